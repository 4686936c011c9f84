"""Patch entries across clones: the engine repo follows the merged patch stack."""

from __future__ import annotations

import pytest

from ledger.errors import MergeConflict
from tests.sync.kit import ENGINE_FILES
from tests.sync.kit import git
from tests.sync.kit import make_team


def change(path: str, line: int, new: str) -> str:
    """A one-line patch of ``path`` (one of ENGINE_FILES) at ``line``."""
    lines = ENGINE_FILES[path].splitlines()
    lo, hi = max(line - 4, 0), min(line + 3, len(lines))
    body = [f" {x}" for x in lines[lo:line - 1]] + [f"-{lines[line - 1]}", f"+{new}"]
    body += [f" {x}" for x in lines[line:hi]]
    n = hi - lo
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{lo + 1},{n} +{lo + 1},{n} @@\n" + "\n".join(body) + "\n")


@pytest.fixture
def team(tmp_path):
    return make_team(tmp_path, engine=True)


def test_patches_of_both_sides_stack_in_the_merged_order_on_every_machine(team):
    op1, op2, op3 = team
    p1 = op1.record_patch(change("engine/sched.py", 10, "line 10 fixed"), "fix sched")
    op1.push()
    p2 = op2.record_patch(change("engine/attn.py", 20, "attn 20 fast"), "fast attn", "perf")
    done = op2.pull()
    assert done.merged.replayed == ((p2.id, 1, 2),) and done.patch_diff
    op2.push()
    op3.pull()
    op1.pull()
    trees = {c.engine_tree for c in team}
    assert len(trees) == 1
    for c in team:
        src = c.root / "engine-src"
        assert "line 10 fixed\n" in (src / "engine/sched.py").read_text()
        assert "attn 20 fast\n" in (src / "engine/attn.py").read_text()
        assert git(src, "status", "--porcelain") == ""
        assert [e.id for e in c.entries()] == [p1.id, p2.id]
    # a revert on one machine reaches the others' engine trees through pull
    op3.revert(p2.id)
    op3.push()
    op1.pull()
    assert "attn 20 fast" not in (op1.root / "engine-src/engine/attn.py").read_text()
    assert op1.engine_tree == op3.engine_tree


def test_patches_on_the_same_lines_conflict_and_nothing_changes(team):
    op1, op2, _ = team
    p1 = op1.record_patch(change("engine/sched.py", 10, "line 10 by op1"), "op1 fix")
    op1.push()
    p2 = op2.record_patch(change("engine/sched.py", 11, "line 11 by op2"), "op2 fix")
    tree, head = op2.engine_tree, git(op2.root, "rev-parse", "HEAD")
    with pytest.raises(MergeConflict) as err:
        op2.pull()
    text = str(err.value)
    assert p1.id in text and p2.id in text and "engine lines engine/sched.py" in text
    assert op2.engine_tree == tree and git(op2.root, "rev-parse", "HEAD") == head
    op2.pull(drop=[p2.id])
    assert op2.engine_tree == op1.engine_tree
    assert not (op2.root / "patches" / f"{p2.id}.patch").exists()
