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
lock when its holder dies, so a crash never leaves the workspace locked.
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
from backups.fsio import write_many
from backups.store import BackupStore
from ledger.errors import BackupError
from ledger.errors import LedgerError
from ledger.errors import LockHeld
from ledger.store import wsgit
from ledger.store.workspace import Workspace

INTENT = "intent.json"
LOCK = "lock"

# Fault injection for the crash-safety tests: `LEDGER_CRASH_AT=<point>` makes the
# process SIGKILL itself at that point of a transaction, exactly as a power cut would.
CRASH_POINTS = (
    "after-intent",
    "after-targets",
    "after-engine",
    "after-ledger-files",
    "after-commit",
)


def backup_store(ws: Workspace) -> BackupStore:
    """The workspace's backup store, raising the ledger's own :class:`BackupError`."""
    return BackupStore(ws.state_dir / "backups", error=BackupError)


def _crash_point(point: str) -> None:
    if os.environ.get("LEDGER_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def sha256_or_none(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


class WriterLock:
    """Exclusive, non-blocking lock on ``.ledger/lock`` for the life of a command."""

    def __init__(self, ws: Workspace, command: str) -> None:
        self.path = ws.state_dir / LOCK
        self.command = command
        self._fd: int | None = None

    def __enter__(self) -> "WriterLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise LockHeld(str(self.path), holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: ledger {self.command}\n".encode(), 0)
        self._fd = fd
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
    commit: str
    op_id: str


def engine_reset(repo_path: Path, head: str) -> None:
    """Put the engine repo's branch and work tree back at ``head`` (it was clean before)."""
    from ledger.patches.stack import EngineRepo

    EngineRepo(repo_path).rollback(head)


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
    ) -> Outcome:
        """Apply every write or none; return the backup id and the workspace commit.

        ``backup_also``: files changed by the engine step (not by this transaction's own
        writes), copied into the backup store with the targets for the operator's sake;
        the engine repo itself is rolled back through git.
        """
        target_writes = dict(target_writes or {})
        ledger_writes = dict(ledger_writes or {})
        store = backup_store(self.ws)
        snap = None
        to_back_up = list(target_writes) + [p for p in backup_also if p not in target_writes]
        if to_back_up:
            snap = store.snapshot(to_back_up, command=self.command, time=self.time)
        ws_head = wsgit.head(self.ws.root)
        intent = {
            "op": self.op_id,
            "command": self.command,
            "started": self.time,
            "workspace_head": ws_head,
            "backup": snap.id if snap else None,
            "targets": [
                {"path": str(p), "before": sha256_or_none(p),
                 "after": hashlib.sha256(data).hexdigest()}
                for p, data in target_writes.items()
            ],
            "ledger_files": [
                {"path": rel, "existed": (self.ws.root / rel).exists()} for rel in ledger_writes
            ],
            "engine": {"path": str(engine_repo), "head": engine_head} if engine_repo else None,
        }
        self.ws.state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.intent_path, (json.dumps(intent, indent=2) + "\n").encode())
        try:
            _crash_point("after-intent")
            if target_writes:
                write_many(target_writes)
            _crash_point("after-targets")
            if engine_step is not None:
                engine_step()
            _crash_point("after-engine")
            self._write_ledger_files(ledger_writes)
            _crash_point("after-ledger-files")
            full_message = f"{message.rstrip()}\n\nLedger-Op: {self.op_id}\n"
            commit = wsgit.commit(self.ws.root, ledger_writes, full_message)
            _crash_point("after-commit")
        except BaseException:
            rollback(self.ws, intent, store)
            raise
        remove_file(self.intent_path)
        return Outcome(snap.id if snap else None, commit, self.op_id)

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


def rollback(ws: Workspace, intent: dict, store: BackupStore | None = None) -> list[str]:
    """Undo an operation described by ``intent``; return the files put back."""
    store = store or backup_store(ws)
    restored = []
    backup = store.get(intent["backup"]) if intent.get("backup") else None
    for t in intent.get("targets", []):
        path = Path(t["path"])
        if sha256_or_none(path) == t["before"]:
            continue
        if backup is None:
            continue
        f = backup.file(path)
        data = store.content(f) if f else None
        if data is None:
            remove_file(path)
        else:
            atomic_write(path, data, f.mode)
        restored.append(str(path))
    engine = intent.get("engine")
    if engine and engine.get("head"):
        engine_reset(Path(engine["path"]), engine["head"])
    lock = ws.root / ".git" / "index.lock"
    if lock.exists():
        # Left by a git process killed mid-command; we hold the writer lock, so it's stale.
        lock.unlink()
    existed = [f["path"] for f in intent.get("ledger_files", []) if f["existed"]]
    created = [f["path"] for f in intent.get("ledger_files", []) if not f["existed"]]
    if intent.get("workspace_head"):
        wsgit.restore_paths(ws.root, intent["workspace_head"], existed)
    for rel in created:
        remove_file(ws.root / rel)
    remove_file(ws.state_dir / INTENT)
    return restored


def recover(ws: Workspace) -> str | None:
    """Finish an operation a killed command left behind; return a notice, or None."""
    path = ws.state_dir / INTENT
    if not path.exists():
        return None
    try:
        intent = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise LedgerError(
            f"{path}: an interrupted operation left an unreadable intent record ({e}); "
            "inspect `ledger backups list` and remove the file by hand"
        ) from e
    what = f"`ledger {intent.get('command', '?')}` (started {intent.get('started', '?')})"
    head = wsgit.head(ws.root)
    if head and head != intent.get("workspace_head"):
        if f"Ledger-Op: {intent.get('op')}" in wsgit.message_of(ws.root, head):
            remove_file(path)
            return f"an interrupted {what} had completed; nothing to undo"
    restored = rollback(ws, intent)
    ws.invalidate()
    files = ", ".join(restored) if restored else "no target file had changed"
    return f"rolled back an interrupted {what}: {files}"
