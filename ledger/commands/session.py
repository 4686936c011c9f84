"""One invocation of a command: the open workspace, the command line kept for history,
and the notices to show (a killed command's operation finished first)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from ledger.errors import LockHeld
from ledger.live.rollback import RECORD
from ledger.live.rollback import recover_restart
from ledger.store.txn import WriterLock
from ledger.store.txn import recover
from ledger.store.workspace import Workspace
from ledger.store.workspace import utc_now


@dataclass
class Session:
    """One invocation: the workspace, the command line for history, notices to show."""

    ws: Workspace
    command: str
    now: str = field(default_factory=utc_now)
    notices: list[str] = field(default_factory=list)
    # True while a caller holds the writer lock for several steps (a mutation and its
    # --restart): the library's own maybe_lock then takes nothing more.
    locked: bool = False


def open_session(explicit: str | None, command: str, cwd: Path | None = None) -> Session:
    """Open the workspace and finish any operation a killed command left behind."""
    ws = Workspace.open(explicit, cwd)
    session = Session(ws, command)
    if (ws.state_dir / "intent.json").exists():
        try:
            with WriterLock(ws, f"{command} (recovering)"):
                notice = recover(ws)
        except LockHeld:
            # Not interrupted: still running.  A reader sees the state before it; a
            # writer will fail on the lock itself.
            notice = "another ledger command is changing this workspace right now"
        if notice:
            session.notices.append(notice)
    if (ws.state_dir / RECORD).exists():
        try:
            with WriterLock(ws, f"{command} (recovering a restart)"):
                notice = recover_restart(ws, command=command, at=session.now)
        except LockHeld:
            notice = "another ledger command is restarting services of this workspace now"
        if notice:
            session.notices.append(notice)
    return session


def maybe_lock(s: Session, dry_run: bool):
    """The writer lock, except for a dry run (which writes nothing)."""
    return nullcontext() if dry_run or s.locked else WriterLock(s.ws, s.command)
