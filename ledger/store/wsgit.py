"""The workspace's own git repository, driven through GitPython.

One successful command is one commit.  Hooks never run on the ledger's behalf
(``core.hooksPath=/dev/null``), and when the machine has no git identity configured the
ledger commits as "knob ledger" rather than failing half-way through a command.
Paths are always passed after ``--``.  Automatic maintenance is off (``gc.auto=0``,
``maintenance.auto=false``): a ``git commit`` would otherwise start a ``gc`` of its own
after the commit, whose locks a kill could leave behind where recovery does not look.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable
from typing import Sequence

from ledger.errors import GitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "knob ledger",
    "GIT_AUTHOR_EMAIL": "ledger@localhost",
    "GIT_COMMITTER_NAME": "knob ledger",
    "GIT_COMMITTER_EMAIL": "ledger@localhost",
}
# git's argument list limit is the OS's; add paths in chunks well below it.
_CHUNK = 500


def _git(root: Path):
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{root} is not a git repository: {e}") from e
    repo.git.set_persistent_git_options(c="core.hooksPath=/dev/null")
    return repo


SAFE_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0",
                "-c", "maintenance.auto=false")


def _env(repo) -> dict[str, str]:
    """Fallback identity only for the parts git has no configuration for."""
    env = {}
    reader = repo.config_reader()
    if not reader.has_option("user", "name") and "GIT_AUTHOR_NAME" not in os.environ:
        env.update({k: v for k, v in IDENTITY.items() if k.endswith("_NAME")})
    if not reader.has_option("user", "email") and "GIT_AUTHOR_EMAIL" not in os.environ:
        env.update({k: v for k, v in IDENTITY.items() if k.endswith("_EMAIL")})
    return env


def _run(repo, *args: str, **kwargs) -> str:
    import git

    try:
        return repo.git.execute(["git", *SAFE_OPTIONS, *args], **kwargs)
    except git.GitCommandError as e:
        detail = (e.stderr or e.stdout or "").strip()
        raise GitError(f"git {args[0]} failed in {repo.working_dir}: {detail}") from e


def init(root: Path) -> None:
    import git

    try:
        git.Repo.init(root, initial_branch="main")
    except git.GitCommandError as e:
        raise GitError(f"cannot create a git repository in {root}: {e.stderr}") from e


def head(root: Path) -> str | None:
    repo = _git(root)
    try:
        return repo.head.commit.hexsha
    except ValueError:
        return None  # no commits yet


def commit(root: Path, paths: Iterable[str], message: str,
           merge_parent: str | None = None) -> str:
    """Stage ``paths`` (added, changed or deleted) and commit; return the new sha.

    ``merge_parent``: make a merge commit of HEAD and that commit (``ledger pull``); the
    branch moves in one ``update-ref``, so a kill leaves it either before or at the merge.
    """
    repo = _git(root)
    paths = sorted(set(paths))
    for i in range(0, len(paths), _CHUNK):
        _run(repo, "add", "--all", "--", *paths[i : i + _CHUNK])
    env = {**os.environ, **_env(repo)}
    if merge_parent is not None:
        old = repo.head.commit.hexsha
        tree = _run(repo, "write-tree")
        sha = _run(repo, "commit-tree", tree, "-p", old, "-p", merge_parent, "-F", "-",
                   istream=_pipe(message), env=env).strip()
        _run(repo, "update-ref", "-m", "ledger pull: merge", "HEAD", sha, old)
        return sha
    _run(repo, "commit", "--quiet", "--allow-empty", "--no-verify", "-F", "-",
         istream=_pipe(message), env=env)
    return repo.head.commit.hexsha


def _pipe(text: str):
    """A file object holding ``text``, for git's stdin (messages are data, never argv)."""
    f = tempfile.TemporaryFile()
    f.write(text.encode("utf-8"))
    f.seek(0)
    return f


def restore_paths(
    root: Path, rev: str | None, paths: Sequence[str], created: Sequence[str] = ()
) -> None:
    """Put ``paths`` back as they are in ``rev`` (index and work tree), and take
    ``created`` (files that did not exist in ``rev``) out of the index."""
    if rev is None or not (paths or created):
        return
    repo = _git(root)
    every = list(paths) + list(created)
    for i in range(0, len(every), _CHUNK):
        _run(repo, "reset", "--quiet", rev, "--", *every[i : i + _CHUNK])
    for i in range(0, len(paths), _CHUNK):
        _run(repo, "checkout", rev, "--", *paths[i : i + _CHUNK])


def dirty(root: Path) -> list[str]:
    """``git status --porcelain`` lines of the workspace (changed or untracked paths)."""
    out = _run(_git(root), "--no-optional-locks", "status", "--porcelain=v1",
               "--untracked-files=all")
    return [line for line in out.splitlines() if line.strip()]


def message_of(root: Path, rev: str) -> str:
    return _run(_git(root), "log", "-1", "--format=%B", rev, "--")


def log(root: Path, limit: int | None = None, revs: Sequence[str] = ()) -> list[dict]:
    """Commits, newest first: sha, time, subject, body."""
    repo = _git(root)
    args = ["log", "--format=%H%x1f%aI%x1f%s%x1f%b%x1e"]
    if limit:
        args.append(f"--max-count={limit}")
    args += [*revs, "--"]
    out = _run(repo, *args)
    commits = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, time, subject, body = (record.split("\x1f") + ["", "", ""])[:4]
        commits.append({"sha": sha, "time": time, "subject": subject, "body": body.strip()})
    return commits


def verify_rev(root: Path, rev: str) -> str:
    """Resolve a user-given revision of the workspace; never taken as an option."""
    if rev.startswith("-"):
        raise GitError(f"{rev!r} is not a revision")
    return _run(_git(root), "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")


def show_file(root: Path, rev: str, path: str) -> str | None:
    import git

    repo = _git(root)
    try:
        return repo.git.execute(["git", "show", f"{rev}:{path}"])
    except git.GitCommandError:
        return None


def not_ignored(root: Path, paths: Sequence[str]) -> list[str]:
    """Those of ``paths`` (relative to the workspace) that git would track: target files
    inside the workspace are committed with the ledger, except where .gitignore says no."""
    import git

    if not paths:
        return []
    repo = _git(root)
    try:
        out = repo.git.execute(["git", *SAFE_OPTIONS, "check-ignore", "--no-index", "--",
                                *paths])
    except git.GitCommandError as e:
        if e.status != 1:  # 1: none is ignored
            raise GitError(f"git check-ignore failed in {root}: {(e.stderr or '').strip()}") from e
        out = ""
    ignored = set(out.splitlines())
    return [p for p in paths if p not in ignored]


def unstage(root: Path, rev: str | None, paths: Sequence[str]) -> None:
    """Put the index entries of ``paths`` back as they are in ``rev`` (work tree as is)."""
    restore_paths(root, rev, (), paths)
