"""The workspace repository's remotes: fetch, push, and reading the other side's files.

Real git, run as a list of arguments (never a shell), through the ledger's one hardened
runner (:mod:`ledger.git_runner`).  What the operator types — a remote's
name — is checked against ``git remote`` before it is passed, and always after ``--``
where git takes one; branch names come from the repository itself and are checked with
``git check-ref-format``.  File contents are read as bytes (``git cat-file``), so a blob
comes back exactly as it was committed.

The merge driver is registered here: ``merge.ledger.driver`` in ``.git/config`` (local
to the clone: it names this machine's Python) and ``entries.jsonl merge=ledger`` in the
committed ``.gitattributes``.
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import GitError
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.git_runner import GitResult
from ledger.git_runner import check_rev
from ledger.store.wsgit import runner

ATTRIBUTES = ".gitattributes"
ATTRIBUTE_LINES = ("entries.jsonl merge=ledger",)
DRIVER_NAME = "knob ledger: merge entries by id (ledger merge-driver)"
_REMOTE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}\Z")


def git(root: Path, *args: str, check: bool = True, input: bytes | None = None,
        env: dict | None = None) -> GitResult:
    """``git ARGS`` in ``root``; bytes out.  GitError with git's message when ``check``."""
    return runner(root).run(*args, check=check, input=input, env=env)


def out(root: Path, *args: str) -> str:
    return git(root, *args).stdout.decode("utf-8", "surrogateescape").strip()


def remotes(root: Path) -> list[str]:
    return [r for r in out(root, "remote").splitlines() if r]


def check_remote(root: Path, name: str | None) -> str:
    """The remote to use: ``name`` if it is one of the workspace's, else the branch's
    upstream remote, else the only remote; refused (naming the choices) otherwise."""
    known = remotes(root)
    if name is not None:
        if name not in known or not _REMOTE_RE.match(name):
            raise UsageError(f"no git remote named {name!r} in {root} "
                             f"(remotes: {', '.join(known) or 'none'}; add one with "
                             "`git remote add NAME URL`)")
        return name
    branch = current_branch(root)
    upstream = git(root, "config", "--get", f"branch.{branch}.remote", check=False)
    configured = upstream.stdout.decode("utf-8", "replace").strip()
    if configured in known:
        return configured
    if len(known) == 1:
        return known[0]
    if not known:
        raise UsageError(f"{root} has no git remote: add one with `git remote add NAME URL`")
    raise UsageError(f"{root} has several remotes ({', '.join(known)}) and branch {branch} "
                     "tracks none of them: name one (`ledger pull REMOTE`)")


def current_branch(root: Path) -> str:
    proc = git(root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    branch = proc.stdout.decode("utf-8", "replace").strip()
    if proc.returncode != 0 or not branch:
        raise Refused(f"{root}: HEAD is detached; check out the workspace's branch first")
    git(root, "check-ref-format", "--branch", branch)
    return branch


def tracking_ref(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def fetch(root: Path, remote: str, branch: str) -> str | None:
    """Fetch ``branch`` of ``remote`` into its remote-tracking ref; its commit, or None
    when the remote has no such branch yet."""
    ref = tracking_ref(remote, branch)
    proc = git(root, "fetch", "--quiet", "--no-tags", "--", remote,
               f"+refs/heads/{branch}:{ref}", check=False)
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip()
        if "couldn't find remote ref" in detail:
            return None
        raise GitError(f"git fetch from {remote} failed: {detail}")
    return rev(root, ref)


def rev(root: Path, ref: str) -> str | None:
    proc = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}",
               check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def parents(root: Path, commit: str) -> list[str]:
    return out(root, "rev-list", "--parents", "-n", "1", check_rev(commit), "--").split()[1:]


def merge_base(root: Path, a: str, b: str) -> str | None:
    proc = git(root, "merge-base", check_rev(a), check_rev(b), check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def is_ancestor(root: Path, a: str, b: str) -> bool:
    return git(root, "merge-base", "--is-ancestor", check_rev(a), check_rev(b),
               check=False).returncode == 0


def changed(root: Path, a: str, b: str) -> dict[str, str]:
    """path -> status letter (A, M, D, T) of every file that differs from ``a`` to ``b``."""
    raw = git(root, "diff", "--name-status", "--no-renames", "-z", check_rev(a), check_rev(b),
              "--").stdout
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    return {parts[i + 1]: parts[i][:1] for i in range(0, len(parts) - 1, 2)}


def blob(root: Path, commit: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``commit`` (None when the file is not there)."""
    proc = git(root, "cat-file", "blob", f"{check_rev(commit)}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def merge_text(root: Path, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
    """git's own three-way merge of one file's text; None when it conflicts."""
    with tempfile.TemporaryDirectory() as d:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(d) / name
            path.write_bytes(data)
            names.append(str(path))
        proc = git(root, "merge-file", "-p", "--", *names, check=False)
    return proc.stdout if proc.returncode == 0 else None


def commits_between(root: Path, base: str | None, tip: str) -> list[tuple[str, str, str, str]]:
    """(sha, author, date, message) of the commits in ``base..tip``."""
    span = f"{check_rev(base)}..{check_rev(tip)}" if base else check_rev(tip)
    raw = git(root, "log", "--format=%H%x1f%an <%ae>%x1f%aI%x1f%B%x1e", span, "--").stdout
    rows = []
    for rec in raw.decode("utf-8", "replace").split("\x1e"):
        rec = rec.strip("\n")
        if rec:
            sha, who, when, body = (rec.split("\x1f") + ["", "", ""])[:4]
            rows.append((sha, who, when, body))
    return rows


def recorded_by(root: Path, base: str | None, tips: list[str]) -> dict[str, str]:
    """entry id -> "author in commit abc1234" for the entries the commits in
    ``base..tip`` name (each ledger commit lists ``- ID [class] title``)."""
    who: dict[str, str] = {}
    for tip in tips:
        for sha, author, _, body in reversed(commits_between(root, base, tip)):
            for m in re.finditer(r"^- ([0-9A-Za-z._-]+) \[", body, re.M):
                who.setdefault(m.group(1), f"{author} in commit {sha[:10]}")
    return who


@dataclass(frozen=True)
class PushResult:
    remote: str
    branch: str
    commit: str
    up_to_date: bool


def push(root: Path, remote: str, branch: str) -> PushResult:
    """Push the branch; a rejection (the remote moved on) is refused with what to do."""
    head = out(root, "rev-parse", "HEAD")
    before = rev(root, tracking_ref(remote, branch))
    proc = git(root, "push", "--porcelain", "--", remote,
               f"refs/heads/{branch}:refs/heads/{branch}", check=False)
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    if proc.returncode != 0:
        if "[rejected]" in text or "non-fast-forward" in text or "fetch first" in text:
            raise Refused(f"{remote} rejected the push of {branch}: it has ledger changes this "
                          f"workspace does not have yet. Run `ledger pull {remote}` first "
                          "(it merges them and updates this machine's files), then "
                          f"`ledger push {remote}` again")
        raise GitError(f"git push to {remote} failed: {text.strip()}")
    git(root, "update-ref", tracking_ref(remote, branch), head, check=False)
    return PushResult(remote, branch, head, before == head or "[up to date]" in text)


def driver_command() -> str:
    """The merge driver's command line: this Python, so it runs without an activated venv."""
    return f"{shlex.quote(sys.executable)} -m ledger.cli merge-driver %O %A %B %P"


def register_driver(root: Path) -> None:
    """``merge.ledger.*`` in the clone's ``.git/config`` (idempotent)."""
    git(root, "config", "--local", "merge.ledger.name", DRIVER_NAME)
    git(root, "config", "--local", "merge.ledger.driver", driver_command())


def attributes_text(current: bytes | None) -> bytes | None:
    """``.gitattributes`` with the ledger's lines added, or None when they are there."""
    text = (current or b"").decode("utf-8", "surrogateescape")
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in ATTRIBUTE_LINES if line not in have]
    if not missing:
        return None
    if text and not text.endswith("\n"):
        text += "\n"
    if not text:
        text = "# knob ledger: merge the ledger's files by entry id (see `ledger pull`)\n"
    return (text + "".join(f"{line}\n" for line in missing)).encode("utf-8", "surrogateescape")
