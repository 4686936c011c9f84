"""Lock files a killed git leaves behind, and when the ledger may remove them.

git takes ``<name>.lock`` beside every file it rewrites (``index.lock``, ``HEAD.lock``,
``refs/heads/<branch>.lock``, ``packed-refs.lock``, ``ORIG_HEAD.lock``) and renames it over
the file when done.  A git process killed in between leaves the lock, and every later
git command that needs it fails with "Unable to create '….lock': File exists".

Removing a lock a live git still holds would corrupt that git's work, so a lock is
removed only with proof that it is stale:

* **no git process runs in that repository** (checked through ``/proc``: a process
  named ``git…`` whose working directory is in the work tree or the git directory, other
  than the ledger's own children and git commands that never take a lock (such as the
  long-lived ``cat-file`` readers GitPython keeps); where ``/proc`` cannot tell, nothing is
  removed), and
* for crash recovery, **the lock is not older than the interrupted command's intent
  record** (it was taken while that command ran: a lock older than the record would have
  made the command's own git fail, and the command would have rolled back by itself).

``ledger doctor --repair`` applies the first rule alone, so it also clears a lock left by
a git run by hand that was killed.  The objects a killed git may leave (``tmp_obj_*``)
are not locks and are left to ``git gc``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKTREE_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock")
COMMON_LOCKS = ("packed-refs.lock", "config.lock", "shallow.lock")
# Subcommands that never take a lock (GitPython keeps `cat-file` readers running).
READ_ONLY = frozenset({"cat-file", "rev-parse", "log", "show", "ls-files", "ls-tree",
                       "for-each-ref", "rev-list", "version", "merge-base", "diff-tree"})
# git's timestamps and ours come from the same coarse clock; allow for its granularity.
_CLOCK_SLACK_S = 1.0


@dataclass(frozen=True)
class GitDirs:
    work_tree: Path
    git_dir: Path
    common_dir: Path


def git_dirs(work_tree: Path) -> GitDirs | None:
    """The git directories of ``work_tree`` (a ``.git`` directory, or a worktree's file)."""
    dot_git = Path(work_tree) / ".git"
    if dot_git.is_dir():
        return GitDirs(Path(work_tree), dot_git, dot_git)
    try:
        line = dot_git.read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    git_dir = Path(work_tree) / line[len("gitdir:"):].strip()
    try:
        common = (git_dir / "commondir").read_text().strip()
        common_dir = git_dir / common
    except OSError:
        common_dir = git_dir
    return GitDirs(Path(work_tree), Path(os.path.normpath(git_dir)),
                   Path(os.path.normpath(common_dir)))


def find_locks(dirs: GitDirs) -> list[Path]:
    """Every git lock file present in the repository."""
    found = [dirs.git_dir / n for n in WORKTREE_LOCKS]
    found += [dirs.common_dir / n for n in COMMON_LOCKS]
    refs = dirs.common_dir / "refs"
    if refs.is_dir():
        for base, _, names in os.walk(refs):
            found += [Path(base) / n for n in names if n.endswith(".lock")]
    return sorted({p for p in found if os.path.lexists(p)})


def git_running_in(dirs: GitDirs) -> bool:
    """Whether a git process works in this repository (True when it cannot be told)."""
    proc = Path("/proc")
    if not (proc / "self" / "cwd").exists():
        return True
    places = [os.path.realpath(p) for p in (dirs.work_tree, dirs.git_dir, dirs.common_dir)]
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == str(os.getpid()):
            continue
        try:
            if not (entry / "comm").read_text().startswith("git"):
                continue
            if _parent(entry) == me or _subcommand(entry) in READ_ONLY:
                continue  # our own children, or readers (GitPython's cat-file): no locks
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue  # gone, or not ours to look at (then not ours to worry about)
        if any(cwd == p or cwd.startswith(p + os.sep) for p in places):
            return True
    return False


def _subcommand(proc_entry: Path) -> str | None:
    """The git subcommand a process runs (``git -c k=v -C dir cat-file …`` → ``cat-file``)."""
    args = (proc_entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")[1:]
    i = 0
    while i < len(args):
        if args[i] in ("-c", "-C", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return args[i]
    return None


def _parent(proc_entry: Path) -> int:
    """The parent pid of a /proc entry (field 4 of ``stat``, after the ``(comm)``)."""
    stat = (proc_entry / "stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def stale_locks(dirs: GitDirs, not_before: float | None = None) -> list[Path]:
    """The repository's lock files that are provably stale (see the module doc).

    ``not_before``: only locks taken at or after this time (an intent record's mtime).
    """
    locks = find_locks(dirs)
    if not locks or git_running_in(dirs):
        return []
    if not_before is None:
        return locks
    out = []
    for lock in locks:
        try:
            if os.lstat(lock).st_mtime >= not_before - _CLOCK_SLACK_S:
                out.append(lock)
        except FileNotFoundError:
            pass
    return out


def remove_locks(locks: list[Path]) -> list[str]:
    """Delete ``locks``; return the ones removed."""
    removed = []
    for lock in locks:
        try:
            lock.unlink()
            removed.append(str(lock))
        except FileNotFoundError:
            pass
    return removed
