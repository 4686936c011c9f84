"""Revert/restore of the generated patch stack in every order, against an oracle.

The oracle is independent of git: GNU ``patch`` applies the desired patches in record
order to a plain copy of the base files.  If it cannot, the stack change must be refused
(and nothing changes); if it can, the engine tree must equal its result exactly.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.errors import PatchError
from ledger.patches.stack import EngineRepo
from ledger.patches.stack import StackConflict
from ledger.patches.stack import StackDrift
from ledger.patches.stack import StackItem

from .helpers import Stack
from .helpers import git
from .helpers import tree_files
from .helpers import write_files

ALL = frozenset(range(4))


def oracle(stack: Stack, applied: frozenset[int], scratch: Path) -> dict[str, str] | None:
    """base + applied patches in record order by GNU patch, or None if that fails."""
    d = scratch / ("o" + "".join(map(str, sorted(applied))))
    shutil.rmtree(d, ignore_errors=True)
    write_files(d, stack.base_files)
    for k in sorted(applied):
        proc = subprocess.run(
            ["patch", "-p1", "--batch", "--fuzz=0", "--quiet", "-d", str(d)],
            check=False,
            input=stack.texts[k],
            text=True,
            capture_output=True,
        )
        if proc.returncode != 0:
            return None
        for rej in d.rglob("*.orig"):
            rej.unlink()
    return tree_files(d)


def items(stack: Stack, now: frozenset[int], after: frozenset[int]) -> list[StackItem]:
    return [
        StackItem(
            stack.ids[k], stack.names[k], stack.texts[k], k in now, k in after, stack.classes[k]
        )
        for k in range(4)
    ]


def record_all(engine: EngineRepo, stack: Stack) -> None:
    for k in range(4):
        engine.commit_patch(
            stack.texts[k], entry_id=stack.ids[k], title=stack.names[k], cls=stack.classes[k]
        )


def test_recording_builds_the_full_stack(repo: Path, stack: Stack, tmp_path: Path) -> None:
    engine = EngineRepo(repo)
    base = engine.head()
    record_all(engine, stack)
    assert tree_files(repo) == oracle(stack, ALL, tmp_path)
    log = git(
        repo,
        "log",
        "--format=%H %(trailers:key=Ledger-Entry,valueonly,separator=)",
        f"{base}..HEAD",
    )
    assert [line.split()[1] for line in log.splitlines()] == list(reversed(stack.ids))
    assert git(repo, "status", "--porcelain") == ""
    assert engine.stack_live(items(stack, ALL, ALL)) == dict.fromkeys(stack.ids, True)


@pytest.mark.slow
def test_every_revert_and_restore_order(repo: Path, stack: Stack, tmp_path: Path) -> None:
    """For each order of the four entries: revert them one by one in that order, then
    restore them in that order.  Every ordered subset is a prefix of some full order, so
    this walks every revert order from the full stack (and restores from the reverted
    one).  Each step succeeds iff the oracle can build the desired tree."""
    engine = EngineRepo(repo)
    record_all(engine, stack)
    top = engine.head()
    oracles = {
        frozenset(s): oracle(stack, frozenset(s), tmp_path)
        for n in range(5)
        for s in itertools.combinations(range(4), n)
    }
    assert oracles[frozenset({3})] is None  # B4 needs P3: the fixture must exercise refusals
    refusals = successes = 0
    for perm in itertools.permutations(range(4)):
        state = ALL
        for k, restoring in [(k, False) for k in perm] + [(k, True) for k in perm]:
            if (k in state) == restoring:
                continue  # its revert was refused: nothing to restore
            desired = state | {k} if restoring else state - {k}
            before = tree_files(repo)
            expected = oracles[desired]
            if expected is None:
                with pytest.raises(StackConflict) as exc:
                    engine.plan_stack(items(stack, state, desired))
                assert stack.ids[3] in str(exc.value)  # B4 is always the one in the way
                assert tree_files(repo) == before
                refusals += 1
                continue
            plan = engine.plan_stack(items(stack, state, desired))
            assert tree_files(repo) == before  # planning never touches the worktree
            engine.apply_plan(plan, message=f"toggle {stack.names[k]}")
            assert tree_files(repo) == expected, (perm, desired)
            assert git(repo, "status", "--porcelain") == ""
            state = desired
            successes += 1
        engine.rollback(top)
        assert tree_files(repo) == oracles[ALL]
    assert refusals >= 6 and successes > 100


def test_revert_of_depended_on_perf_names_the_bugfix(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    head = engine.head()
    with pytest.raises(StackConflict) as exc:
        engine.plan_stack(items(stack, ALL, ALL - {2}))
    msg = str(exc.value)
    assert "revert e0003 ('P3')" in msg and "in the way" in msg and "e0004" in msg
    assert [i.entry_id for i in exc.value.in_the_way] == ["e0004"]
    assert [i.entry_id for i in exc.value.overlapping] == ["e0003"]
    assert engine.head() == head
    # Reverting both together is fine, and restoring both brings the tree back.
    engine.apply_plan(engine.plan_stack(items(stack, ALL, ALL - {2, 3})), message="revert")
    assert "P3" not in (repo / "c.py").read_text()
    engine.apply_plan(engine.plan_stack(items(stack, ALL - {2, 3}, ALL)), message="restore")
    assert "bugfix B4" in (repo / "c.py").read_text()


def test_restore_refused_when_a_later_bugfix_took_the_lines(repo: Path, stack: Stack) -> None:
    """P3 reverted, then bugfix X recorded on the same lines: restoring P3 is refused."""
    engine = EngineRepo(repo)
    p3 = StackItem("e0003", "P3", stack.texts[2], True, True, "perf")
    engine.commit_patch(p3.text, entry_id="e0003", title="P3", cls="perf")
    engine.apply_plan(
        engine.plan_stack([StackItem("e0003", "P3", p3.text, True, False)]), message="revert P3"
    )
    (repo / "c.py").write_text((repo / "c.py").read_text().replace("c_10 = 10\n", "c_10 = 9\n"))
    fix = git(repo, "diff")
    git(repo, "checkout", "--", "c.py")
    engine.commit_patch(fix, entry_id="e0005", title="X", cls="bugfix")
    head = engine.head()
    stack_items = [
        StackItem("e0003", "P3", p3.text, False, True, "perf"),
        StackItem("e0005", "X", fix, True, True, "bugfix"),
    ]
    with pytest.raises(StackConflict) as exc:
        engine.plan_stack(stack_items)
    assert "restore e0003" in str(exc.value) and "e0005 ('X')" in str(exc.value)
    assert engine.head() == head and git(repo, "status", "--porcelain") == ""


def test_hand_edited_tree_is_reported_as_drift(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    (repo / "a.py").write_text(stack.base_files["a.py"])  # undo P1 by hand, and commit it
    git(repo, "commit", "-qam", "undo P1 by hand")
    live = engine.stack_live(items(stack, ALL, ALL))
    assert live == {"e0001": False, "e0002": True, "e0003": True, "e0004": True}
    with pytest.raises(StackDrift, match="e0001"):
        engine.plan_stack(items(stack, ALL, ALL - {0}))


def test_stack_live_sees_a_patch_under_a_later_one(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    assert engine.stack_live(items(stack, ALL, ALL))["e0003"] is True
    engine.apply_plan(engine.plan_stack(items(stack, ALL, ALL - {0})), message="revert P1")
    assert engine.stack_live(items(stack, ALL - {0}, ALL - {0}))["e0001"] is False


def test_trailers_name_each_entry_and_action(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    plan = engine.plan_stack(items(stack, ALL, {1}))
    new = engine.apply_plan(plan, message="revert --perf-only\n\nLedger-Entry: forged")
    body = git(repo, "log", "-1", "--format=%B", new)
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", new).split("\n")
    assert "revert --perf-only" in body
    assert [t for t in trailers if t] == [
        "Ledger-Entry: e0001",
        "Ledger-Class: perf",
        "Ledger-Action: revert",
        "Ledger-Entry: e0003",
        "Ledger-Class: perf",
        "Ledger-Action: revert",
        "Ledger-Entry: e0004",
        "Ledger-Class: bugfix",
        "Ledger-Action: revert",
    ]


def test_plan_diff_is_what_apply_does(repo: Path, stack: Stack, tmp_path: Path) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    plan = engine.plan_stack(items(stack, ALL, {1}))
    diff = engine.plan_diff(plan)
    assert "-a_5 = 500  # perf P1" in diff and "b.py" not in diff
    git(repo, "apply", "--check", input=diff)
    engine.apply_plan(plan, message="x")
    assert tree_files(repo) == oracle(stack, frozenset({1}), tmp_path)
    assert engine.plan_diff(engine.plan_stack(items(stack, {1}, {1}))) == ""


def test_rollback_restores_branch_and_worktree(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    before = engine.head()
    before_files = tree_files(repo)
    new_file = "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    engine.commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    engine.commit_patch(new_file, entry_id="e0009", title="new", cls="bugfix")
    assert (repo / "new.py").exists()
    engine.rollback(before)
    assert engine.head() == before and tree_files(repo) == before_files
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_head_moved_since_plan_is_refused(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    engine.commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    plan = engine.plan_stack([StackItem("e0001", "P1", stack.texts[0], True, False)])
    git(repo, "commit", "-q", "--allow-empty", "-m", "someone else")
    with pytest.raises(PatchError, match="HEAD moved"):
        engine.apply_plan(plan, message="x")


def test_materialize_builds_a_side_without_touching_the_live_tree(
    repo: Path, stack: Stack, tmp_path: Path
) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    live = tree_files(repo)
    side = tmp_path / "side-a"
    commit = engine.materialize(items(stack, ALL, ALL - {0}), side)
    assert tree_files(side) == oracle(stack, ALL - {0}, tmp_path)
    assert tree_files(repo) == live and git(repo, "status", "--porcelain") == ""
    assert git(side, "rev-parse", "HEAD").strip() == commit
    engine.remove_worktree(side)
    assert not side.exists()
    assert str(side) not in git(repo, "worktree", "list")


def test_restore_of_bugfix_without_its_perf_base_says_what_to_restore(
    repo: Path, stack: Stack
) -> None:
    engine = EngineRepo(repo)
    record_all(engine, stack)
    engine.apply_plan(engine.plan_stack(items(stack, ALL, ALL - {2, 3})), message="revert")
    with pytest.raises(StackConflict) as exc:
        engine.plan_stack(items(stack, ALL - {2, 3}, ALL - {2}))
    assert "restore e0003 ('P3') in the same command" in str(exc.value)
    assert exc.value.in_the_way == [] and [i.entry_id for i in exc.value.overlapping] == ["e0003"]
