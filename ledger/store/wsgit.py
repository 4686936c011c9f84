"""The workspace's own git repository.

One successful command is one commit.  git runs through the ledger's one hardened
runner (:mod:`ledger.git_runner`: no hooks, no fsmonitor, no automatic gc, no inherited
``GIT_*`` that could point elsewhere, ``LC_ALL=C``); commits carry the operator's git
identity, or "knob ledger" where the machine has none, rather than failing half-way
through a command.  Paths are always passed after ``--``; revisions a person typed are
checked and passed after ``--end-of-options``; messages travel on stdin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable
from typing import Sequence

from ledger.errors import GitError
from ledger.git_runner import GitRunner
from ledger.git_runner import check_rev
from ledger.git_runner import check_sha
from ledger.git_runner import init_repo

# git's argument list limit is the OS's; add paths in chunks well below it.
_CHUNK = 500


def runner(root: Path) -> GitRunner:
    """The hardened runner for the workspace at ``root`` (refused if it is no repository)."""
    if not (Path(root) / ".git").exists():
        raise GitError(f"{root} is not a git repository")
    return GitRunner(root, operator=True)


def _run(repo: GitRunner, *args: str, input: str | None = None, env=None) -> str:
    """stdout of ``git ARGS`` (one trailing newline stripped, as GitPython does)."""
    text = repo.run(*args, input=input, env=env).stdout.decode("utf-8", "surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def init(root: Path) -> None:
    try:
        init_repo(root)
    except GitError as e:
        raise GitError(f"cannot create a git repository in {root}: {e}") from e


def head(root: Path) -> str | None:
    """HEAD's commit, or None before the first commit."""
    return runner(root).head()


def commit(root: Path, paths: Iterable[str], message: str,
           merge_parent: str | None = None) -> str:
    """Stage ``paths`` (added, changed or deleted) and commit; return the new sha.

    ``merge_parent``: make a merge commit of HEAD and that commit (``ledger pull``); the
    branch moves in one ``update-ref``, so a kill leaves it either before or at the merge.
    """
    repo = runner(root)
    paths = sorted(set(paths))
    for i in range(0, len(paths), _CHUNK):
        _run(repo, "add", "--all", "--", *paths[i : i + _CHUNK])
    env = repo.commit_env()
    if merge_parent is not None:
        old = check_sha(repo.head() or "", "HEAD")
        tree = _run(repo, "write-tree")
        sha = _run(repo, "commit-tree", "-p", old, "-p", check_sha(merge_parent), "-F", "-",
                   "--end-of-options", check_sha(tree, "tree"), input=message, env=env).strip()
        _run(repo, "update-ref", "-m", "ledger pull: merge", "--end-of-options", "HEAD",
             check_sha(sha), old)
        return sha
    _run(repo, "commit", "--quiet", "--allow-empty", "--no-verify", "-F", "-",
         input=message, env=env)
    return repo.head() or ""


def restore_paths(
    root: Path, rev: str | None, paths: Sequence[str], created: Sequence[str] = ()
) -> None:
    """Put ``paths`` back as they are in ``rev`` (index and work tree), and take
    ``created`` (files that did not exist in ``rev``) out of the index."""
    if rev is None or not (paths or created):
        return
    repo = runner(root)
    rev = check_rev(rev)
    every = list(paths) + list(created)
    for i in range(0, len(every), _CHUNK):
        _run(repo, "reset", "--quiet", rev, "--", *every[i : i + _CHUNK])
    for i in range(0, len(paths), _CHUNK):
        _run(repo, "checkout", rev, "--", *paths[i : i + _CHUNK])


def dirty(root: Path) -> list[str]:
    """``git status --porcelain`` lines of the workspace (changed or untracked paths)."""
    out = _run(runner(root), "--no-optional-locks", "status", "--porcelain=v1",
               "--untracked-files=all")
    return [line for line in out.splitlines() if line.strip()]


def message_of(root: Path, rev: str) -> str:
    return _run(runner(root), "log", "-1", "--format=%B", check_rev(rev), "--")


def log(root: Path, limit: int | None = None, revs: Sequence[str] = ()) -> list[dict]:
    """Commits, newest first: sha, time, subject, body."""
    repo = runner(root)
    args = ["log", "--format=%H%x1f%aI%x1f%s%x1f%b%x1e"]
    if limit:
        args.append(f"--max-count={int(limit)}")
    args += [*(check_rev(r) for r in revs), "--"]
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
    return _run(runner(root), "rev-parse", "--verify", "--end-of-options",
                f"{check_rev(rev)}^{{commit}}")


def show_file(root: Path, rev: str, path: str) -> str | None:
    """The text of ``path`` at ``rev`` (one trailing newline stripped), or None."""
    proc = runner(root).run("show", "--no-textconv", f"{check_rev(rev)}:{path}", check=False)
    if proc.returncode != 0:
        return None
    text = proc.stdout.decode("utf-8", "surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def not_ignored(root: Path, paths: Sequence[str]) -> list[str]:
    """Those of ``paths`` (relative to the workspace) that git would track: target files
    inside the workspace are committed with the ledger, except where .gitignore says no."""
    if not paths:
        return []
    proc = runner(root).run("check-ignore", "--no-index", "--", *paths, check=False)
    if proc.returncode not in (0, 1):  # 1: none is ignored
        detail = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(f"git check-ignore failed in {root}: {detail}")
    ignored = set(proc.stdout.decode("utf-8", "surrogateescape").splitlines())
    return [p for p in paths if p not in ignored]


def unstage(root: Path, rev: str | None, paths: Sequence[str]) -> None:
    """Put the index entries of ``paths`` back as they are in ``rev`` (work tree as is)."""
    restore_paths(root, rev, (), paths)
