"""A small, hardened runner for ``git`` subprocesses on the engine repo.

Why subprocesses and not GitPython's porcelain: every call here needs the same four
guarantees, and they are easiest to state once, in one place:

* **No hooks, no helper programs.** Every command runs with ``core.hooksPath=/dev/null``
  (so ``pre-commit``, ``post-commit``, ``reference-transaction``, ``post-checkout`` … of
  the engine repo never run on the ledger's behalf), ``core.fsmonitor=false`` (an
  fsmonitor is a configured program too), and diffs with ``--no-ext-diff
  --no-textconv``.
* **User values are data.** Revisions are checked and passed after ``--end-of-options``;
  paths after ``--``; patch text and commit messages travel on stdin, never in argv.
* **A known environment.** Inherited ``GIT_*`` variables (``GIT_DIR``, ``GIT_INDEX_FILE``,
  ``GIT_WORK_TREE`` set by an outer git hook, say) are dropped so they cannot redirect
  the ledger to another repository; identity is ``knob ledger`` via ``GIT_AUTHOR_*`` /
  ``GIT_COMMITTER_*`` so a machine without git config works; ``LC_ALL=C`` keeps
  messages parseable.
* **Failures become** :class:`ledger.errors.GitError` with the command and git's stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import GitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "knob ledger",
    "GIT_AUTHOR_EMAIL": "knob-ledger@localhost",
    "GIT_COMMITTER_NAME": "knob ledger",
    "GIT_COMMITTER_EMAIL": "knob-ledger@localhost",
}

# Options that make git refuse to run anything the repository's config names.
SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.quotePath=false",
    "-c",
    "advice.detachedHead=false",
)

SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")


# A diff git itself can apply again, whatever the repo configures: no external diff
# drivers or textconv filters, binary hunks, full blob ids.
PATCH_DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-textconv", "--binary", "--full-index")


def check_sha(value: str, what: str = "commit") -> str:
    """Return ``value`` if it is a full hex object id, else raise GitError.

    Used for ids that the ledger itself stored (a HEAD recorded before a transaction):
    anything else is corruption or tampering and must not reach git's argv.
    """
    if not isinstance(value, str) or not SHA_RE.match(value):
        raise GitError(f"invalid {what} id {value!r}: expected a full hexadecimal object id")
    return value


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git call runs with (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY)
    env.update(LC_ALL="C", LANG="C", GIT_TERMINAL_PROMPT="0")
    if extra:
        env.update(extra)
    return env


class Git:
    """Run git in one work tree.  ``path`` must already be the top of a work tree."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def run(
        self,
        *args: str,
        input: bytes | str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git <args>`` and return the completed process (stdout/stderr as bytes).

        ``check=False`` hands back non-zero exits for callers that use the exit status
        as an answer (``apply --check``, ``merge-base --is-ancestor``).
        """
        # surrogateescape: patch text read from a non-UTF-8 file round-trips byte for byte.
        data = input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input
        cmd = ["git", *SAFE_CONFIG, "-C", str(self.path), *args]
        try:
            proc = subprocess.run(
                cmd, input=data, capture_output=True, env=clean_env(env), check=False
            )
        except OSError as e:  # git missing or not executable
            raise GitError(f"cannot run git: {e}") from e
        if check and proc.returncode != 0:
            raise GitError(
                f"git {' '.join(args[:3])} failed in {self.path}: "
                f"{proc.stderr.decode('utf-8', 'replace').strip() or f'exit {proc.returncode}'}"
            )
        return proc

    def out(
        self, *args: str, input: str | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        """stdout of ``git <args>`` as text, trailing newline stripped."""
        proc = self.run(*args, input=input, env=env)
        return proc.stdout.decode("utf-8", "surrogateescape").rstrip("\n")

    def resolve_commit(self, rev: str) -> str | None:
        """The commit id ``rev`` names, or None.  ``rev`` is treated as data."""
        proc = self.run(
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{rev}^{{commit}}",
            check=False,
        )
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def head(self) -> str | None:
        """HEAD's commit id, or None on an unborn branch."""
        return self.resolve_commit("HEAD")

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


__all__ = ["IDENTITY", "Git", "TempIndex", "check_sha", "clean_env", "temp_index"]
