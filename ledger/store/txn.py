"""All-or-nothing, crash-safe application of one command's writes.

A mutating command computes everything it will write first (target files, entry files,
the engine repo's new HEAD), then hands it to :class:`Transaction`, which:

1. copies every target file it will touch into the backup store;
2. writes an *intent record* (``.ledger/intent.json``): which files, their sha256 before
   and after, the backup id, the workspace and engine HEADs before, the ledger files it
   will write and whether they existed;
3. writes the target files (each atomically), runs the engine step (patch stack), writes
   the ledger's own files, and commits the workspace (one commit, trailer
   ``Ledger-Op: <intent id>``);
4. deletes the intent record.

Any exception in 3 rolls everything back (target files from the backup, the engine repo
reset to its HEAD before, ledger files from the workspace's git HEAD) and re-raises.  A
process killed at any instant leaves the intent record behind; the next ``ledger``
command finds it (:func:`recover`) and rolls the operation back — or, if its workspace
commit had already been made, forward (it was complete) — before doing anything else,
and says so.  Rolling back rather than forward is the safe default: the operator re-runs
one command, and never ends up with a half-applied plan nobody reviewed.

Only one writer at a time: :class:`WriterLock` takes ``flock`` on ``.ledger/lock`` and a
second writer fails fast with :class:`~ledger.errors.LockHeld`.  The kernel drops the
lock when its holder dies, so a crash never leaves the workspace locked.  Whoever takes
the lock next finds what the dead holder left (an intent record, temporaries) and
recovers first — so a writer that raced past ``open_session``'s check is safe too.

Hardening decisions (issue 12):

* The intent record is written *before* the backup is taken, naming the backup id it
  reserves: a kill while the backup is being written is rolled back like any other (the
  half-written backup directory is removed; targets are not written until it is complete).
* The record lists the temporary file of every write (``.ledger-tmp-<op>-NAME``, see
  :mod:`backups.fsio`); rollback *and* roll-forward remove them, and every other file of
  that operation's name next to the targets, in the workspace and in ``.ledger``.
* Rollback and roll-forward remove the git locks the killed command left in the
  workspace repo and the engine repo (``index.lock``, ``HEAD.lock``, the branch's ref
  lock …), with the proof rules of :mod:`ledger.store.gitlocks`.
* Recovery validates the record (:mod:`ledger.store.intent`) and touches only managed
  files; it restores a target only when it still holds the bytes this operation wrote
  (one edited by hand since is left alone and reported: drift is never overwritten),
  and only from the one backup the record names (no other manifest is read).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from typing import Mapping
from typing import Sequence

from backups.fsio import atomic_write
from backups.fsio import remove_file
from backups.fsio import temp_path
from backups.fsio import temp_tag
from backups.fsio import write_many
from ledger.errors import Interrupted
from ledger.errors import LockHeld
from ledger.store import leftovers
from ledger.store import wsgit
from ledger.store.intent import INTENT
from ledger.store.intent import Intent
from ledger.store.intent import LedgerFile
from ledger.store.intent import TargetChange
from ledger.store.recovery import backup_store
from ledger.store.recovery import inside_workspace
from ledger.store.recovery import recover
from ledger.store.recovery import rollback
from ledger.store.recovery import sha256_or_none
from ledger.store.roots import LOCAL_NAME
from ledger.store.workspace import Workspace

__all__ = ["CRASH_POINTS", "INTENT", "Outcome", "Transaction", "WriterLock", "backup_store",
           "recover", "rollback", "sha256_or_none"]

LOCK = "lock"

# Fault injection for the crash-safety tests: `LEDGER_CRASH_AT=<point>` makes the
# process SIGKILL itself at that point of a transaction, exactly as a power cut would.
CRASH_POINTS = (
    "after-intent",
    "after-backup",
    "after-targets",
    "after-engine",
    "after-ledger-files",
    "after-commit",
)


def _crash_point(point: str) -> None:
    if os.environ.get("LEDGER_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
    # `LEDGER_INTERRUPT_AT=<point>` (or `<point>:TERM`): the Ctrl-C (SIGTERM) an operator
    # sends landing exactly there; the real signal, handled as any other would be.
    wanted, _, sig = os.environ.get("LEDGER_INTERRUPT_AT", "").partition(":")
    if wanted == point:
        os.kill(os.getpid(), signal.SIGTERM if sig == "TERM" else signal.SIGINT)


class WriterLock:
    """Exclusive, non-blocking lock on ``.ledger/lock`` for the life of a command.

    Once taken, whatever a killed holder left behind is recovered first (``recover``
    False skips it: the lock is then taken *for* recovery); :attr:`notice` says what was
    done.  A damaged intent record raises :class:`~ledger.errors.IntentError` and
    releases the lock: no writer runs over an interrupted operation it cannot undo.
    """

    def __init__(self, ws: Workspace, command: str, recover: bool = True) -> None:
        self.ws = ws
        self.path = ws.state_dir / LOCK
        self.command = command
        self.recover = recover
        self.notice: str | None = None
        self._fd: int | None = None

    def __enter__(self) -> "WriterLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise LockHeld(str(self.path), holder) from None
        os.ftruncate(fd, 0)
        line = f"pid {os.getpid()}: ledger {self.command}\n"
        os.pwrite(fd, line.encode("utf-8", "backslashreplace"), 0)
        self._fd = fd
        if self.recover and leftovers.needs_recovery(self.ws.state_dir):
            try:
                self.notice = recover(self.ws)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class Outcome:
    backup_id: str | None
    commit: str | None  # None: commit=False
    op_id: str


class Transaction:
    def __init__(self, ws: Workspace, command: str, time: str) -> None:
        self.ws = ws
        self.command = command
        self.time = time
        self.op_id = secrets.token_hex(6)

    @property
    def intent_path(self) -> Path:
        return self.ws.state_dir / INTENT

    def execute(
        self,
        *,
        message: str,
        target_writes: Mapping[Path, bytes] | None = None,
        ledger_writes: Mapping[str, bytes | None] | None = None,
        engine_step: Callable[[], None] | None = None,
        engine_repo: Path | None = None,
        engine_head: str | None = None,
        backup_also: Sequence[Path] = (),
        merge_parent: str | None = None,
        commit: bool = True,
        commit_also: Sequence[str] = (),
    ) -> Outcome:
        """Apply every write or none; return the backup id and the workspace commit.

        ``backup_also``: files changed by the engine step (not by this transaction's own
        writes), copied into the backup store with the targets for the operator's sake;
        the engine repo itself is rolled back through git.  ``merge_parent``: the
        workspace commit is a merge of HEAD and that commit (``ledger pull``).  Target
        files inside the workspace (not git-ignored) are committed with the ledger's
        files: the commit is what a GitOps engine applies.  ``commit=False``: a change of
        this machine's local files only (ledger.local.yaml), with no commit (the
        outcome's commit is None).  ``commit_also``: workspace files committed as they
        are (``target add`` of a manifest inside the workspace).
        """
        target_writes = dict(target_writes or {})
        ledger_writes = dict(ledger_writes or {})
        store = backup_store(self.ws)
        to_back_up = list(target_writes) + [p for p in backup_also if p not in target_writes]
        backup_id = store.new_id(self.time) if to_back_up else None
        intent = self._intent(target_writes, ledger_writes, engine_repo, engine_head, backup_id,
                              merge_parent, tuple(commit_also))
        self.ws.state_dir.mkdir(parents=True, exist_ok=True)
        with temp_tag(self.op_id):
            atomic_write(self.intent_path, (json.dumps(intent.to_dict(), indent=2) + "\n").encode())
            try:
                _crash_point("after-intent")
                if to_back_up:
                    store.snapshot(to_back_up, command=self.command, time=self.time,
                                   backup_id=backup_id)
                _crash_point("after-backup")
                sha = self._write_all(message, target_writes, ledger_writes, engine_step,
                                      merge_parent, commit, commit_also)
            except BaseException as e:
                rollback(self.ws, intent, store, trusted=True)
                if isinstance(e, KeyboardInterrupt):
                    raise Interrupted(f"`ledger {self.command}`",
                                      "every file it had written is put back and the ledger "
                                      "is unchanged", "nothing of it was kept") from e
                raise
        remove_file(self.intent_path)
        return Outcome(backup_id, sha, self.op_id)

    def _write_all(self, message: str, target_writes: Mapping[Path, bytes],
                   ledger_writes: Mapping[str, bytes | None],
                   engine_step: Callable[[], None] | None, merge_parent: str | None,
                   commit: bool, commit_also: Sequence[str]) -> str | None:
        """The steps after the backup, in their crash-safe order; the commit's sha."""
        if target_writes:
            write_many(target_writes)
        _crash_point("after-targets")
        if engine_step is not None:
            engine_step()
        _crash_point("after-engine")
        self._write_ledger_files(ledger_writes)
        _crash_point("after-ledger-files")
        sha = self._commit(message, [*ledger_writes, *commit_also], target_writes,
                           merge_parent) if commit else None
        _crash_point("after-commit")
        return sha

    def _commit(self, message: str, paths: Sequence[str], target_writes: Mapping[Path, bytes],
                merge_parent: str | None) -> str:
        """The workspace commit: ``paths``, plus the target files inside the workspace that
        git does not ignore (never ``ledger.local.yaml``, this machine's own file)."""
        inside = wsgit.not_ignored(self.ws.root, [
            p for p in inside_workspace(self.ws, target_writes) if p != LOCAL_NAME])
        return wsgit.commit(self.ws.root, [*paths, *inside],
                            f"{message.rstrip()}\n\nLedger-Op: {self.op_id}\n", merge_parent)

    def _intent(self, target_writes, ledger_writes, engine_repo, engine_head, backup_id,
                merge_parent=None, staged=()) -> Intent:
        root = self.ws.root
        temps = [temp_path(p, self.op_id) for p in target_writes]
        temps += [temp_path(root / rel, self.op_id) for rel, data in ledger_writes.items()
                  if data is not None]
        return Intent(
            op=self.op_id, command=self.command, started=self.time,
            workspace_head=wsgit.head(root), backup=backup_id,
            targets=tuple(TargetChange(str(p), sha256_or_none(p), hashlib.sha256(d).hexdigest())
                          for p, d in target_writes.items()),
            ledger_files=tuple(LedgerFile(rel, (root / rel).exists()) for rel in ledger_writes),
            engine_path=str(engine_repo) if engine_repo else None,
            engine_head=engine_head if engine_repo else None,
            temps=tuple(str(t) for t in temps),
            merge_parent=merge_parent,
            staged=staged,
        )

    def _write_ledger_files(self, writes: Mapping[str, bytes | None]) -> None:
        files = {}
        for rel, data in writes.items():
            path = self.ws.root / rel
            if data is None:
                remove_file(path)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                files[path] = data
        write_many(files)
