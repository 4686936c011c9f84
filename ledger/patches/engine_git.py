"""git on the engine repo: the patch stack's operations (trees, diffs, worktrees, resets).

It runs through the ledger's one hardened runner, :class:`ledger.git_runner.GitRunner` (no
hooks, no fsmonitor, no gc, no inherited ``GIT_*``, ``LC_ALL=C``, the ledger's own
identity on every commit); this module adds what the patch stack asks of the engine repo.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from ledger.git_runner import PATCH_DIFF_OPTIONS
from ledger.git_runner import GitRunner
from ledger.git_runner import check_sha


class Git(GitRunner):
    """Run git in the engine repo's work tree (``path`` must be its top)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)

    def commit_tree(self, tree: str, parents: Sequence[str], message: str) -> str:
        """Write a commit object (no hooks exist for commit-tree) and return its id."""
        args = ["commit-tree"]
        for p in parents:
            args += ["-p", check_sha(p)]
        args += ["--end-of-options", check_sha(tree, "tree")]
        return self.out(*args, input=message)

    def changed_paths(self, old_tree: str, new_tree: str) -> list[tuple[str, str]]:
        """(status letter, path) for each path that differs between two trees."""
        raw = self.run(
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            "--end-of-options",
            check_sha(old_tree, "tree"),
            check_sha(new_tree, "tree"),
        ).stdout.decode("utf-8", "surrogateescape")
        parts = raw.split("\0")
        return [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]

    def tree_of(self, commit: str) -> str:
        return self.out(
            "rev-parse", "--verify", "--end-of-options", f"{check_sha(commit)}^{{tree}}"
        )

    def diff_trees(self, old: str, new: str) -> str:
        """The unified diff from ``old`` to ``new`` (commits or trees), binary-safe."""
        if old == new:
            return ""
        proc = self.run(
            "diff",
            *PATCH_DIFF_OPTIONS,
            "--end-of-options",
            check_sha(old, "tree"),
            check_sha(new, "tree"),
            "--",
        )
        return proc.stdout.decode("utf-8", "surrogateescape")

    # -- work-tree state ---------------------------------------------------------------

    def dirty_paths(self) -> list[str]:
        """Tracked paths with uncommitted changes, staged or not (untracked files excluded).

        ``--no-optional-locks`` keeps this read-only: status must not rewrite the index
        of a repository the ledger is only inspecting.
        """
        raw = self.run(
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=no",
            "--ignore-submodules=none",
        ).stdout.decode("utf-8", "surrogateescape")
        return sorted({rec[3:] for rec in raw.split("\0") if len(rec) > 3})

    def operation_in_progress(self) -> str | None:
        """The name of an unfinished merge, rebase, cherry-pick, revert or bisect, if any."""
        markers = {
            "MERGE_HEAD": "merge",
            "CHERRY_PICK_HEAD": "cherry-pick",
            "REVERT_HEAD": "revert",
            "rebase-merge": "rebase",
            "rebase-apply": "rebase or am",
            "BISECT_LOG": "bisect",
        }
        args = [a for name in markers for a in ("--git-path", name)]
        for name, rel in zip(markers, self.out("rev-parse", *args).split("\n")):
            if os.path.lexists(self.path / rel):
                return markers[name]
        return None

    def symlinks_in(self, commit: str, paths: Sequence[str]) -> list[str]:
        """Those of ``paths`` that are symbolic links in ``commit``'s tree."""
        if not paths:
            return []
        raw = self.run(
            "ls-tree", "-z", "--full-tree", "--end-of-options", check_sha(commit), "--", *paths
        ).stdout.decode("utf-8", "surrogateescape")
        found = []
        for rec in raw.split("\0"):
            if rec:
                meta, _, name = rec.partition("\t")
                if meta.startswith("120000 "):
                    found.append(name)
        return found

    def move_to(self, commit: str, reason: str) -> None:
        """Move HEAD's branch, the index and the worktree to ``commit``.

        ``reset --keep`` refuses (changing nothing) when a file that differs between HEAD
        and ``commit`` has local changes, so nobody's edits are overwritten.
        """
        # reset trusts the index's stat data; a copied or touched checkout has stale stat
        # data for unchanged files, which reset would take for local changes.
        self.run("update-index", "-q", "--refresh", check=False)
        self.run(
            "reset",
            "--keep",
            check_sha(commit),
            "--",
            env={"GIT_REFLOG_ACTION": f"knob ledger: {reason}"},
        )

    def reset_hard(self, commit: str, reason: str) -> None:
        """Put HEAD's branch, the index and the worktree exactly at ``commit``."""
        self.run(
            "reset",
            "--hard",
            "--quiet",
            check_sha(commit),
            "--",
            env={"GIT_REFLOG_ACTION": f"knob ledger: {reason}"},
        )

    def add_worktree(self, dest: Path, commit: str) -> None:
        """A detached worktree of ``commit`` at ``dest`` (which must not exist yet)."""
        self.run("worktree", "add", "--detach", "--quiet", "--", str(dest), check_sha(commit))

    def remove_worktree(self, dest: Path) -> None:
        """Remove a worktree made by :meth:`add_worktree`, local changes and all."""
        self.run("worktree", "remove", "--force", "--", str(dest))
        self.run("worktree", "prune")


class TempIndex:
    """A private index file, so trees can be computed without touching the worktree
    or the repository's own index (``GIT_INDEX_FILE``)."""

    def __init__(self, git: Git, directory: str) -> None:
        self.git = git
        self.env = {"GIT_INDEX_FILE": os.path.join(directory, "index")}

    def read_tree(self, tree: str) -> None:
        self.git.run("read-tree", "--end-of-options", check_sha(tree, "tree"), env=self.env)

    def apply(self, patch: str, *, reverse: bool = False) -> str | None:
        """Apply ``patch`` to this index only; return None on success, git's message otherwise."""
        args = ["apply", "--cached", "--whitespace=nowarn"]
        if reverse:
            args.append("-R")
        proc = self.git.run(*args, input=patch, env=self.env, check=False)
        if proc.returncode == 0:
            return None
        return proc.stderr.decode("utf-8", "replace").strip() or f"exit {proc.returncode}"

    def write_tree(self) -> str:
        return self.git.out("write-tree", env=self.env)


@contextmanager
def temp_index(git: Git, tree: str) -> Iterator[TempIndex]:
    """A :class:`TempIndex` loaded with ``tree``, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="ledger-index-") as d:
        idx = TempIndex(git, d)
        idx.read_tree(tree)
        yield idx


__all__ = ["PATCH_DIFF_OPTIONS", "Git", "TempIndex", "check_sha", "temp_index"]
