"""A bisect's state on disk: what to put back, and the record of what it tried.

Files::

    bisect/<id>/record.json     the record (committed with every probe's toggle and at the end)
    .ledger/bisect.json         the in-progress marker: where the bisect started (local)
    .ledger/bisect-record.json  the record as of the last check (local, rewritten atomically)

Before a bisect toggles anything it snapshots, into the backup store, every target file
its selection touches and ``entries.jsonl``, and writes ``.ledger/bisect.json`` naming
that snapshot and the engine repo's HEAD.  Every probe's toggle is one transaction
(:mod:`ledger.store.txn`) that also commits the record so far; so at every instant the
configuration is either the start or a probe the committed record names.

:func:`restore_start` is one transaction that writes the start bytes back (targets and
``entries.jsonl``), resets the engine repo to its start HEAD and commits the final
record; then the marker goes.  A bisect killed at any instant (Ctrl-C, SIGKILL) leaves
the marker behind: the next ``ledger`` command (:func:`recover_bisect`, called when a
session opens) or ``ledger bisect reset`` runs :func:`restore_start` with the record
marked ``interrupted``.  It is idempotent: a marker left after the final commit is just
removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backups.fsio import atomic_write
from backups.fsio import remove_file
from ledger.core.model import Entry
from ledger.errors import DriftError
from ledger.errors import LedgerError
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import Workspace
from ledger.store.entries_file import parse_entries

STATE = "bisect.json"
WORKING = "bisect-record.json"
RECORD_DIR = "bisect"


def record_rel(bisect_id: str) -> str:
    return f"{RECORD_DIR}/{bisect_id}/record.json"


def record_bytes(record: dict) -> bytes:
    """The record as JSON: one key a line, and one line per step and per selected entry
    (a step of a 1,000-entry bisect lists 1,000 ids: indenting each would make the file
    unreadable in a diff, and Python's indenting encoder is ten times slower than the
    compact one, which matters when the record is saved after every check)."""
    def one(value) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)

    rows = []
    for key in sorted(record):
        value = record[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            inner = ",\n".join(f"  {one(v)}" for v in value)
            rows.append(f" {one(key)}: [\n{inner}\n ]")
        else:
            rows.append(f" {one(key)}: {one(value)}")
    return ("{\n" + ",\n".join(rows) + "\n}\n").encode()


@dataclass(frozen=True)
class StartState:
    """Where a bisect started: the marker's content."""

    id: str
    pid: int
    started: str
    command: str
    backup: str
    paths: tuple[str, ...]  # target files snapshotted (absolute), plus entries.jsonl
    engine_path: str | None
    engine_head: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "pid": self.pid, "started": self.started,
                "command": self.command, "backup": self.backup, "paths": list(self.paths),
                "engine": {"path": self.engine_path, "head": self.engine_head}}

    @classmethod
    def from_dict(cls, d: dict) -> StartState:
        engine = d.get("engine") or {}
        return cls(str(d["id"]), int(d["pid"]), str(d["started"]), str(d["command"]),
                   str(d["backup"]), tuple(d["paths"]), engine.get("path"), engine.get("head"))


def state_path(ws: Workspace) -> Path:
    return ws.state_dir / STATE


def in_progress(ws: Workspace) -> StartState | None:
    """The marker of a bisect that has not finished, or None."""
    path = state_path(ws)
    if not path.exists():
        return None
    try:
        return StartState.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LedgerError(
            f"{path}: unreadable bisect marker ({e}); its starting state is in "
            "`ledger backups list` (command `bisect`): restore it and remove the file"
        ) from e


def begin(ws: Workspace, *, bisect_id: str, command: str, now: str, target_paths: Sequence[Path],
          engine_path: Path | None, engine_head: str | None) -> StartState:
    """Snapshot the starting state and write the marker (before any toggle)."""
    from ledger.store.txn import backup_store

    paths = [Path(p) for p in target_paths] + [ws.entries_path]
    snap = backup_store(ws).snapshot(paths, command=f"bisect {bisect_id} start", time=now)
    state = StartState(bisect_id, os.getpid(), now, command, snap.id,
                       tuple(str(p) for p in paths),
                       str(engine_path) if engine_path else None, engine_head)
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(state_path(ws), (json.dumps(state.to_dict(), indent=2) + "\n").encode())
    return state


def save_working(ws: Workspace, record: dict) -> None:
    """The record as of the last check, so a kill loses no step already run."""
    atomic_write(ws.state_dir / WORKING, record_bytes(record))


def load_working(ws: Workspace) -> dict | None:
    try:
        return json.loads((ws.state_dir / WORKING).read_text())
    except (OSError, ValueError):
        return None


def start_entries(ws: Workspace, state: StartState) -> list[Entry]:
    """The entries as they were when the bisect started."""
    data = _start_bytes(ws, state).get(str(ws.entries_path)) or b""
    return parse_entries(data.decode("utf-8"), f"{ENTRIES_NAME} at the start of bisect {state.id}")


def _start_bytes(ws: Workspace, state: StartState) -> dict[str, bytes | None]:
    from ledger.store.txn import backup_store

    store = backup_store(ws)
    backup = store.get(state.backup)
    out = {}
    for p in state.paths:
        f = backup.file(p)
        out[p] = store.content(f) if f else None
    return out


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def restore_start(ws: Workspace, state: StartState, record: dict, *, now: str, message: str,
                  force: bool = False) -> str:
    """Put every file back as it was at the start and commit ``record``; return the commit.

    Refuses (DriftError) when a target's live knob values differ from what the ledger
    expects now — something other than the bisect edited it — unless ``force``.
    """
    from ledger.store.apply import drift_in
    from ledger.store.apply import read_targets

    ws.invalidate()
    entries = ws.entries()
    names = {name for name, p in ws.target_paths_here().items() if str(p) in state.paths}
    drifts = drift_in(ws, entries, read_targets(ws, sorted(names)))
    if drifts and not force:
        raise DriftError(drifts)
    start = _start_bytes(ws, state)
    target_writes: dict[Path, bytes] = {}
    ledger_writes: dict[str, bytes | None] = {record_rel(state.id): record_bytes(record)}
    for p, data in start.items():
        path = Path(p)
        if _sha(_current(path)) == _sha(data):
            continue
        if path == ws.entries_path:
            ledger_writes[ENTRIES_NAME] = data
        elif data is not None:
            target_writes[path] = data
    engine_step = engine_repo = engine_head = None
    if state.engine_path and state.engine_head:
        from ledger.patches.stack import EngineRepo

        repo = EngineRepo(Path(state.engine_path))
        current = repo.head()
        if current != state.engine_head:
            engine_repo, engine_head = Path(state.engine_path), current

            def engine_step() -> None:
                repo.rollback(state.engine_head)  # type: ignore[arg-type]
    from ledger.store.txn import Transaction

    try:
        outcome = Transaction(ws, f"bisect {state.id} restore", now).execute(
            message=message, target_writes=target_writes, ledger_writes=ledger_writes,
            engine_step=engine_step, engine_repo=engine_repo, engine_head=engine_head)
    finally:
        ws.invalidate()
    finish(ws)
    return outcome.commit


def finish(ws: Workspace) -> None:
    """Remove the marker and the working record (the final record is committed)."""
    remove_file(state_path(ws))
    remove_file(ws.state_dir / WORKING)


def committed_record(ws: Workspace, bisect_id: str) -> dict | None:
    try:
        return json.loads((ws.root / record_rel(bisect_id)).read_text())
    except (OSError, ValueError):
        return None


def recover_bisect(ws: Workspace, now: str, force: bool = False) -> str | None:
    """Finish a bisect a killed command left behind: restore its start; return a notice."""
    state = in_progress(ws)
    if state is None:
        return None
    done = committed_record(ws, state.id)
    if done is not None and done.get("status") not in (None, "running"):
        finish(ws)
        return None
    record = load_working(ws) or done or {"id": state.id, "steps": []}
    record = {**record, "status": "interrupted", "finished": now,
              "result": "restored the starting state"}
    commit = restore_start(
        ws, state, record, now=now, force=force,
        message=f"bisect {state.id} interrupted: restored the starting state\n\n"
                f"started {state.started} by `ledger {state.command}` (pid {state.pid})\n")
    return (f"bisect {state.id} (started {state.started}) had been interrupted: restored the "
            f"configuration it started from (workspace commit {commit[:10]}); its record is "
            f"{record_rel(state.id)}")


def list_records(ws: Workspace) -> list[dict]:
    """Every committed bisect record, oldest first."""
    base = ws.root / RECORD_DIR
    if not base.is_dir():
        return []
    out = []
    for child in sorted(base.iterdir()):
        rec = committed_record(ws, child.name)
        if rec is not None:
            out.append(rec)
    return sorted(out, key=lambda r: (str(r.get("started", "")), str(r.get("id", ""))))


def records_for(ws: Workspace, entry_id: str) -> list[dict]:
    """The bisect records whose selection includes ``entry_id``."""
    return [r for r in list_records(ws)
            if any(s.get("id") == entry_id for s in r.get("selection") or ())]


__all__ = [
    "StartState",
    "begin",
    "committed_record",
    "in_progress",
    "list_records",
    "load_working",
    "record_rel",
    "records_for",
    "recover_bisect",
    "restore_start",
    "save_working",
    "start_entries",
]
