"""Recording restarts, rolling a command back after a failed health check, and
recovering a restart that was killed.

The sequence of ``ledger <mutation> --restart`` (driven by :mod:`ledger.commands.live`):

1. write the restart record ``.ledger/restart.json`` (the command, its time, the
   workspace HEAD before it), then run the mutation (its own transaction and commit);
2. add the mutation's commit, backup and the files it wrote to the record, and restart;
3. healthy: one more commit records each restart and health result in the entries'
   history (action ``restart``); the record is removed;
4. unhealthy: :func:`rollback_op` puts the files back byte for byte from the mutation's
   backup, and every entry back to its state before (history keeps the attempt: the
   ``restart`` result and a ``rollback`` action; entries the failed command had applied
   become *suspected*, with the failed health check as the hypothesis, so a later
   ``restore`` does not bring them back unnoticed) — one commit, subject
   ``rollback of <command>: health check failed``; the record's phase becomes
   ``rollback``; the services are restarted again and that result is recorded too.

A process killed anywhere in there leaves the record; the next ``ledger`` command
(:func:`recover_restart`, after any interrupted transaction was recovered) treats a
mutation whose health was never confirmed like an interrupted operation: it rolls it back
(``rollback of <command>: interrupted before its health check passed``).  It does not
restart services itself — a read command restarting servers would surprise — and says
which targets may now run a configuration that differs from their files
(``ledger status --live`` shows it).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from backups.fsio import atomic_write
from backups.fsio import remove_file
from ledger.core import planner
from ledger.core.action import Action
from ledger.core.model import Entry
from ledger.errors import LedgerError
from ledger.live import RESTART_RECORD
from ledger.live.restart import RestartResult
from ledger.store import wsgit
from ledger.store.txn import Transaction
from ledger.store.txn import backup_store
from ledger.store.txn import sha256_or_none
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import Workspace
from ledger.store.entries_file import entries_bytes
from ledger.store.entries_file import parse_entries

# Fault injection, as in ledger.store.txn: `LEDGER_CRASH_AT=<point>` SIGKILLs the process.
CRASH_POINTS = ("before-restart", "before-rollback-restart")


def crash_point(point: str) -> None:
    if os.environ.get("LEDGER_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class RestartRecord:
    """What an in-flight ``--restart`` must leave for a crash to be recovered."""

    command: str
    time: str
    before: str | None  # workspace HEAD before the mutation
    targets: list[str] = field(default_factory=list)
    commit: str | None = None  # the mutation's commit, once made
    backup: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 the mutation wrote
    phase: str = "restart"  # restart | rollback

    def save(self, ws: Workspace) -> None:
        ws.state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(ws.state_dir / RESTART_RECORD,
                     (json.dumps(self.__dict__, indent=2) + "\n").encode())

    @classmethod
    def load(cls, ws: Workspace) -> RestartRecord | None:
        path = ws.state_dir / RESTART_RECORD
        if not path.exists():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as e:
            raise LedgerError(f"{path}: an interrupted --restart left an unreadable record "
                              f"({e}); check `ledger status --live`, then remove it") from e

    @staticmethod
    def clear(ws: Workspace) -> None:
        remove_file(ws.state_dir / RESTART_RECORD)


def entries_at(ws: Workspace, rev: str | None) -> list[Entry]:
    text = wsgit.show_file(ws.root, rev, ENTRIES_NAME) if rev else None
    return parse_entries(text, f"{ENTRIES_NAME} at {rev[:10]}") if text else []


def changed_by(ws: Workspace, rec: RestartRecord) -> list[Entry]:
    """The entries the mutation of ``rec`` recorded or changed, as they are now."""
    before = {e.id: e for e in entries_at(ws, rec.before)}
    return [e for e in ws.entries() if before.get(e.id) != e]


def _concerns(e: Entry, targets: Sequence[str]) -> bool:
    return e.kind == "patch" or e.target in targets


def with_restarts(entries: Sequence[Entry], ids: set[str], result: RestartResult, at: str,
                  command: str, context: str) -> list[Entry]:
    """``entries`` with a ``restart`` action on each of ``ids`` a restarted target concerns."""
    by_target = {s.target: s for s in result.steps}
    out = []
    for e in entries:
        steps = [s for t, s in by_target.items() if e.id in ids and _concerns(e, [t])]
        for s in steps:
            e = e.with_action(Action(at=at, action="restart", why=f"{context}: {s.describe()}",
                                     command=command))
        out.append(e)
    return out


def record_restarts(ws: Workspace, rec: RestartRecord, result: RestartResult, *, at: str,
                    command: str, context: str) -> str:
    """One commit putting each restart and health result in the entries' history."""
    ids = {e.id for e in changed_by(ws, rec)}
    entries = with_restarts(ws.entries(), ids, result, at, command, context)
    verdict = "healthy" if result.ok else "health check FAILED"
    message = f"restart {', '.join(result.restarted) or 'nothing'} {context}: {verdict}\n\n" + \
        "".join(f"- {s.describe()}\n" for s in result.steps)
    return _commit_history(ws, entries, message, at=at, command=command)


def _commit_history(ws: Workspace, entries: list[Entry], message: str, *, at: str,
                    command: str) -> str:
    """One commit writing ``entries`` (history only: no target file changes)."""
    txn = Transaction(ws, command, at)
    try:
        return txn.execute(message=message,
                           ledger_writes={ENTRIES_NAME: entries_bytes(entries)}).commit
    finally:
        ws.invalidate()


def record_bake(ws: Workspace, rec: RestartRecord, why: str, ok: bool, *, at: str,
                 command: str) -> str:
    """One commit putting a bake's result in the history of the entries ``rec``'s
    command changed (action ``bake``), kept or not."""
    ids = {e.id for e in changed_by(ws, rec)}
    action = Action(at=at, action="bake", why=why, command=command)
    entries = [e.with_action(action) if e.id in ids else e for e in ws.entries()]
    message = f"bake after `{rec.command}`: {'kept' if ok else 'rolling back'}\n\n{why}\n"
    return _commit_history(ws, entries, message, at=at, command=command)


def _rolled_back(now: Entry, before: Entry | None, action: Action, reason: str) -> Entry:
    """``now`` put back to its state before the failed command, its history kept."""
    if before is None or (not before.applied and now.applied):
        base = now if before is None else replace(
            now, clear_why=before.clear_why)
        return base.with_action(action, state="reverted", suspicion="suspected",
                                suspect_why=reason)
    return now.with_action(action, state=before.state, suspicion=before.suspicion,
                           suspect_why=before.suspect_why, clear_why=before.clear_why)


def _file_writes(ws: Workspace, rec: RestartRecord) -> dict[Path, bytes]:
    """The bytes each file had before the mutation, from its backup; refuses a file that
    changed since the mutation wrote it (someone else's edit is never overwritten)."""
    if not rec.files:
        return {}
    store = backup_store(ws)
    backup = store.get(rec.backup) if rec.backup else None
    writes = {}
    for path, after in rec.files.items():
        p = Path(path)
        if sha256_or_none(p) != after:
            raise LedgerError(f"{p}: changed since `ledger {rec.command}` wrote it; not "
                              "rolling back over that edit — see `ledger diff` and "
                              f"`ledger backups show {rec.backup}`")
        f = backup.file(p) if backup else None
        data = store.content(f) if f else None
        if data is None:
            raise LedgerError(f"{p}: no backup of it before `ledger {rec.command}`; cannot "
                              "roll back")
        writes[p] = data
    return writes


def rollback_op(ws: Workspace, rec: RestartRecord, *, reason: str, at: str, command: str,
                result: RestartResult | None = None) -> str:
    """Put files and entries back as they were before ``rec``'s mutation, as one new
    recorded command; the restart ``result`` (if any) goes into the history first."""
    before = {e.id: e for e in entries_at(ws, rec.before)}
    ids = {e.id for e in changed_by(ws, rec)}
    now = ws.entries()
    if result is not None:
        now = with_restarts(now, ids, result, at, command, f"after `{rec.command}`")
    why = f"rollback of `{rec.command}`: {reason}"
    action = Action(at=at, action="rollback", why=why, command=command)
    changes = [(e, _rolled_back(e, before.get(e.id), action, why)) for e in now if e.id in ids]
    after = {new.id: new for _, new in changes}
    entries = [after.get(e.id, e) for e in now]
    writes = _file_writes(ws, rec)
    plan = planner.Plan("rollback", tuple(changes), patch_flips=tuple(
        new for old, new in changes if old.kind == "patch" and old.applied != new.applied))
    engine = None
    if plan.patch_flips:
        from ledger.store.patch_entries import engine_step_for

        engine = engine_step_for(ws, now, plan)
    message = f"{why}\n\n" + "".join(f"- {e.id} [{e.cls}] {e.title}\n" for _, e in changes)
    if result is not None:
        message += "\n" + "".join(f"{s.describe()}\n" for s in result.steps)
    txn = Transaction(ws, command, at)
    try:
        return txn.execute(
            message=message, target_writes=writes,
            ledger_writes={ENTRIES_NAME: entries_bytes(entries)},
            engine_step=engine.step if engine else None,
            engine_repo=engine.repo if engine else None,
            engine_head=engine.head if engine else None,
            backup_also=engine.files if engine else (),
        ).commit
    finally:
        ws.invalidate()


def find_backup(ws: Workspace, command: str, time: str) -> str | None:
    """The backup a transaction of ``command`` started at ``time`` took, if any."""
    for b in reversed(backup_store(ws).list()):
        if b.command == command and b.time == time:
            return b.id
    return None


def recover_restart(ws: Workspace, *, command: str, at: str) -> str | None:
    """Finish a ``--restart`` a killed command left behind; return a notice, or None."""
    rec = RestartRecord.load(ws)
    if rec is None:
        return None
    what = f"`ledger {rec.command}` (started {rec.time})"
    targets = ", ".join(rec.targets) or "its targets"
    if rec.phase == "rollback":
        RestartRecord.clear(ws)
        return (f"{what} was rolled back after a failed health check, but the restart after "
                f"the rollback was interrupted: {targets} may still run the failed "
                "configuration — check `ledger status --live` and restart them")
    head = wsgit.head(ws.root)
    if rec.commit is None:
        if head == rec.before:
            RestartRecord.clear(ws)
            return None  # the mutation itself never committed (its intent was recovered)
        rec.commit = head
        rec.backup = find_backup(ws, rec.command, rec.time)
    if not rec.files and rec.backup:
        backup = backup_store(ws).get(rec.backup)
        targets = {str(p) for p in ws.target_paths_here().values()}
        rec.files = {f.path: sha256_or_none(Path(f.path)) or "" for f in backup.files
                     if f.path in targets}  # engine files go back through git
    rollback_op(ws, rec, reason="interrupted before its health check passed", at=at,
                command=command)
    RestartRecord.clear(ws)
    return (f"rolled back {what}: it was interrupted before the health check of {targets} "
            "passed; files and entries are as before it. The services may run either "
            "configuration: check `ledger status --live`")
