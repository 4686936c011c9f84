"""Hostile patches: each is refused with nothing written, inside or outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.errors import PatchError
from ledger.patches.stack import EngineRepo
from ledger.patches.stack import StackItem
from ledger.patches.stack import parse_patch_files

from .helpers import git
from .helpers import tree_files


def new_file(path: str, body: str = "pwned", header_path: str | None = None) -> str:
    hp = header_path or path
    return (
        f"diff --git a/{hp} b/{hp}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+{body}\n"
    )


def new_symlink(path: str, target: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    )


def attacks(outside: Path) -> dict[str, str]:
    rel_out = os.path.relpath(outside, "/")
    return {
        "dotdot": new_file("../evil"),
        "dotdot-deep": new_file("sub/../../evil"),
        "absolute-traditional": f"--- /dev/null\n+++ {outside}/evil\n@@ -0,0 +1 @@\n+pwned\n",
        "absolute-git": new_file(f"/{rel_out}/evil"),
        "git-dir": new_file(".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned"),
        "git-dir-case": new_file(".GIT/config"),
        "nested-git-dir": new_file("vendor/.git/config"),
        "rename-out": (
            "diff --git a/README b/../README\nsimilarity index 100%\n"
            "rename from README\nrename to ../README\n"
        ),
        "copy-abs": (
            f"diff --git a/README b/{outside}/README\nsimilarity index 100%\n"
            f"copy from README\ncopy to {outside}/README\n"
        ),
        "symlink-escape": new_symlink("ln", str(outside)),
        "symlink-escape-rel": new_symlink("sub/ln", "../../outside"),
        "symlink-into-git": new_symlink("hooks", ".git/hooks"),
        "symlink-then-write": new_symlink("ln", "sub") + new_file("ln/evil"),
        "write-then-symlink": new_file("ln/evil") + new_symlink("ln", "sub"),
        "quoted-dotdot": (
            'diff --git "a/\\056\\056/evil" "b/\\056\\056/evil"\nnew file mode 100644\n'
            '--- /dev/null\n+++ "b/\\056\\056/evil"\n@@ -0,0 +1 @@\n+pwned\n'
        ),
        "control-char-path": new_file("a\x01b"),
        # A hunk whose header under-counts its body: the rest is read as a new header.
        "hunk-miscount": (
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n"
            "-engine\n+engine2\n" + new_file("../evil")
        ),
        # Names in the diff --git line that disagree with ---/+++.
        "inconsistent-names": (
            "diff --git a/README b/README\n--- a/README\n+++ b/../README\n"
            "@@ -1 +1 @@\n-engine\n+x\n"
        ),
    }


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    return d


def snapshot(repo: Path, outside: Path) -> tuple[str, dict, list]:
    return (
        git(repo, "rev-parse", "HEAD"),
        tree_files(repo),
        sorted(p.name for p in outside.iterdir()),
    )


@pytest.mark.parametrize("name", sorted(attacks(Path("/x"))))
def test_attack_is_refused_with_nothing_written(repo: Path, outside: Path, name: str) -> None:
    text = attacks(outside)[name]
    engine = EngineRepo(repo)
    before = snapshot(repo, outside)
    hooks = sorted(os.listdir(repo / ".git" / "hooks"))
    with pytest.raises(PatchError):
        engine.commit_patch(text, entry_id="e0001", title="evil", cls="perf")
    with pytest.raises(PatchError):
        engine.plan_stack([StackItem("e0001", "evil", text, False, True)])
    with pytest.raises(PatchError):
        engine.stack_live([StackItem("e0001", "evil", text, True, False)])
    assert snapshot(repo, outside) == before
    assert sorted(os.listdir(repo / ".git" / "hooks")) == hooks
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (repo.parent / "evil").exists() and not Path("/evil").exists()


def test_write_through_a_symlink_in_the_repo(repo: Path, outside: Path) -> None:
    (repo / "link").symlink_to(outside)
    git(repo, "add", "link")
    git(repo, "commit", "-qm", "a symlink")
    engine = EngineRepo(repo)
    with pytest.raises(PatchError, match="through symlink link"):
        engine.commit_patch(new_file("link/evil"), entry_id="e0001", title="t", cls="perf")
    assert list(outside.iterdir()) == []
    # An untracked symlink in the worktree is as dangerous as a committed one.
    (repo / "wlink").symlink_to(outside)
    with pytest.raises(PatchError, match="through symlink wlink"):
        engine.commit_patch(new_file("wlink/evil"), entry_id="e0001", title="t", cls="perf")
    assert list(outside.iterdir()) == []


def test_in_repo_symlink_alone_is_allowed(repo: Path) -> None:
    engine = EngineRepo(repo)
    engine.commit_patch(new_symlink("docs", "README"), entry_id="e0001", title="t", cls="perf")
    assert os.readlink(repo / "docs") == "README"


def test_parser_sees_every_path_git_sees() -> None:
    text = (
        "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n"
        + new_file("dir with space/f.py")
        + 'diff --git "a/t\\303\\251st" "b/t\\303\\251st"\nnew file mode 100644\n'
        '--- /dev/null\n+++ "b/t\\303\\251st"\n@@ -0,0 +1 @@\n+x\n'
        + "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\n"
        "rename to new.py\n--- a/old.py\n+++ b/new.py\n@@ -1 +1 @@\n-a\n+b\n"
        + "--- a/trad.c\t2024-01-01 00:00:00\n+++ b/trad.c\t2024-01-02 00:00:00\n"
        "@@ -1,2 +1,2 @@\n--- not a header\n+x\n keep\n-- \n2.39.5\n"
    )
    assert parse_patch_files(text) == ["dir with space/f.py", "new.py", "old.py", "trad.c", "tést"]


def test_malformed_patches_are_refused() -> None:
    for text in (
        "",
        "hello\n",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n*x\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1 @@\n-x\n",
    ):
        with pytest.raises(PatchError):
            parse_patch_files(text)


def test_retargeting_an_existing_symlink_outside_is_refused(repo: Path, outside: Path) -> None:
    (repo / "docs").symlink_to("README")
    git(repo, "add", "docs")
    git(repo, "commit", "-qm", "docs link")
    (repo / "docs").unlink()
    (repo / "docs").symlink_to(outside)
    text = git(repo, "diff")
    git(repo, "checkout", "--", "docs")
    assert "120000" in text
    engine = EngineRepo(repo)
    head = engine.head()
    with pytest.raises(PatchError, match="pointing outside"):
        engine.commit_patch(text, entry_id="e0001", title="t", cls="perf")
    assert engine.head() == head and os.readlink(repo / "docs") == "README"
