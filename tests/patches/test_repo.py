"""The engine repo as an adapter: dirty trees, hooks, user values as data, adoption."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.errors import PatchError
from ledger.patches.stack import EngineRepo
from ledger.patches.stack import StackItem
from ledger.patches.stack import patch_sha256
from ledger.patches.stack import verify_sha256

from .helpers import Stack
from .helpers import git
from .helpers import tree_files
from .test_safety import new_file

HOOKS = (
    "pre-commit",
    "post-commit",
    "commit-msg",
    "post-checkout",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
)


def install_hooks(repo: Path, marker: Path) -> None:
    """Hooks in .git/hooks and in a configured core.hooksPath; each leaves a marker."""
    custom = repo.parent / "custom-hooks"
    custom.mkdir(exist_ok=True)
    for d in (repo / ".git" / "hooks", custom):
        for name in HOOKS:
            hook = d / name
            hook.write_text(f"#!/bin/sh\necho {name} >> '{marker}'\n")
            hook.chmod(0o755)
    git(repo, "config", "core.hooksPath", str(custom))


def test_hooks_never_run(repo: Path, stack: Stack, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    install_hooks(repo, marker)
    git(repo, "commit", "-q", "--allow-empty", "-m", "hooks work when git runs them")
    assert marker.exists()
    marker.unlink()
    engine = EngineRepo(repo)
    before = engine.head()
    engine.commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    engine.apply_plan(
        engine.plan_stack([StackItem("e0001", "P1", stack.texts[0], True, False)]), message="revert"
    )
    engine.materialize([StackItem("e0001", "P1", stack.texts[0], False, True)], tmp_path / "wt")
    engine.remove_worktree(tmp_path / "wt")
    engine.rollback(before)
    assert not marker.exists()


def test_identity_without_any_git_config(
    repo: Path, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))  # must not redirect the ledger
    commit = EngineRepo(repo).commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    monkeypatch.delenv("GIT_DIR")
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn", commit).strip() == (
        "knob ledger <knob-ledger@localhost>|knob ledger"
    )


@pytest.mark.parametrize("kind", ["unstaged", "staged", "in-progress merge"])
def test_dirty_repo_is_refused_and_nothing_is_lost(repo: Path, stack: Stack, kind: str) -> None:
    engine = EngineRepo(repo)
    engine.commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    head = engine.head()
    (repo / "b.py").write_text("my work in progress\n")
    if kind == "staged":
        git(repo, "add", "b.py")
    if kind == "in-progress merge":
        git(repo, "checkout", "--", "b.py")
        (repo / ".git" / "MERGE_HEAD").write_text(head + "\n")
    files = tree_files(repo)
    plan = engine.plan_stack([StackItem("e0001", "P1", stack.texts[0], True, False)])
    with pytest.raises(PatchError, match="merge" if "merge" in kind else "changes in: b.py"):
        engine.apply_plan(plan, message="revert")
    with pytest.raises(PatchError):
        engine.commit_patch(stack.texts[2], entry_id="e0003", title="P3", cls="perf")
    assert engine.head() == head and tree_files(repo) == files
    assert git(repo, "stash", "list") == ""


def test_untracked_files(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    (repo / "bench-output.json").write_text("{}")  # unrelated: does not block
    engine.commit_patch(stack.texts[0], entry_id="e0001", title="P1", cls="perf")
    (repo / "new.py").write_text("mine\n")  # where the patch would create a file: refused
    with pytest.raises(PatchError, match="new.py"):
        engine.commit_patch(new_file("new.py", "theirs"), entry_id="e0002", title="N", cls="bugfix")
    assert (repo / "new.py").read_text() == "mine\n"
    assert (repo / "bench-output.json").read_text() == "{}"


@pytest.mark.parametrize(
    "rev",
    [
        "--upload-pack=touch PWNED",
        "-uPWNED",
        "--template=/tmp",
        "--output=PWNED",
        "-",
        "HEAD\n--all",
        "no-such-ref",
    ],
)
def test_revisions_are_data(repo: Path, rev: str) -> None:
    engine = EngineRepo(repo)
    with pytest.raises(PatchError):
        engine.adopt_commit(rev)
    assert not list(repo.glob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_titles_and_ids_are_data(repo: Path, stack: Stack) -> None:
    engine = EngineRepo(repo)
    title = "--upload-pack=touch PWNED -u --template=x $(touch PWNED) `id`"
    commit = engine.commit_patch(stack.texts[0], entry_id="e0001", title=title, cls="perf")
    assert git(repo, "log", "-1", "--format=%s", commit).strip() == title
    assert not list(repo.glob("PWNED*"))
    for bad in (
        {"entry_id": "-e"},
        {"entry_id": "e 1"},
        {"title": "x\nLedger-Entry: e9"},
        {"title": ""},
        {"cls": "--perf"},
    ):
        args = {"entry_id": "e0002", "title": "t", "cls": "bugfix", **bad}
        with pytest.raises(PatchError):
            engine.commit_patch(stack.texts[1], **args)


def test_adopt_commit(repo: Path, stack: Stack) -> None:
    (repo / "a.py").write_text((repo / "a.py").read_text().replace("a_5 = 5\n", "a_5 = 50\n"))
    git(repo, "commit", "-qam", "inflight-pin fix by hand")
    git(repo, "commit", "-q", "--allow-empty", "-m", "later")
    engine = EngineRepo(repo)
    text, sha = engine.adopt_commit("HEAD~1")
    assert sha == git(repo, "rev-parse", "HEAD~1").strip()
    assert "+a_5 = 50" in text
    assert engine.stack_live([StackItem("e0001", "pin", text, True, False)]) == {"e0001": True}
    plan = engine.plan_stack([StackItem("e0001", "pin", text, True, False)])
    engine.apply_plan(plan, message="revert the adopted fix")
    assert (repo / "a.py").read_text() == stack.base_files["a.py"]
    with pytest.raises(PatchError, match="changes no file"):
        engine.adopt_commit("HEAD~1")  # the empty commit "later"
    git(repo, "checkout", "-q", "-b", "side", "HEAD~3")
    git(repo, "commit", "-q", "--allow-empty", "-m", "side")
    git(repo, "checkout", "-q", "main")
    with pytest.raises(PatchError, match="not in the history of HEAD"):
        engine.adopt_commit("side")


def test_sha256_of_stored_text(stack: Stack) -> None:
    digest = patch_sha256(stack.texts[0])
    verify_sha256(stack.texts[0], digest, entry_id="e0001")
    with pytest.raises(PatchError, match="entry e0001: stored patch sha256"):
        verify_sha256(stack.texts[0].replace("500", "501"), digest, entry_id="e0001")


def test_not_a_repo_and_empty_repo(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="not a git work tree"):
        EngineRepo(tmp_path)
    with pytest.raises(PatchError, match="not a directory"):
        EngineRepo(tmp_path / "missing")
    git(tmp_path, "init", "-q")
    with pytest.raises(PatchError, match="no commit yet"):
        EngineRepo(tmp_path).head()


def test_subdirectory_resolves_to_top_and_ambiguous_patch(repo: Path) -> None:
    (repo / "sub").mkdir()
    assert EngineRepo(repo / "sub").path == repo.resolve()
    ambiguous = "--- a/README\n+++ b/OTHER\n@@ -1 +1 @@\n-engine\n+x\n"
    with pytest.raises(PatchError, match="git reads this patch"):
        EngineRepo(repo).check_patch(ambiguous)


def test_patch_that_does_not_apply(repo: Path) -> None:
    bad = "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-not there\n+x\n"
    with pytest.raises(PatchError, match="does not apply"):
        EngineRepo(repo).commit_patch(bad, entry_id="e0001", title="t", cls="perf")
    assert os.listdir(repo) and git(repo, "status", "--porcelain") == ""


def test_rollback_after_a_crash_mid_checkout(repo: Path, stack: Stack) -> None:
    """Killed between writing files and moving the branch: the next rollback cleans up."""
    engine = EngineRepo(repo)
    before, files = engine.head(), tree_files(repo)
    engine.commit_patch(new_file("pkg/new.py", "x = 1"), entry_id="e0001", title="N", cls="bugfix")
    crashed = engine.head()
    git(repo, "reset", "-q", "--soft", before)  # the branch had not moved yet ...
    git(repo, "reset", "-q")  # ... nor the index; pkg/new.py is on disk, untracked
    (repo / ".git" / "knob-ledger-pending").write_text(f"{before} {crashed}\n")
    (repo / ".git" / "index.lock").write_text("")  # left by the killed git
    engine.rollback(before)
    assert engine.head() == before and tree_files(repo) == files
    assert not (repo / "pkg").exists() and not (repo / ".git" / "index.lock").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    engine.rollback(before)  # idempotent
