"""One invocation of a command: the open workspace, the command line kept for history,
and the notices to show (a killed command's operation finished first)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from ledger.errors import LockHeld
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
    return session


def maybe_lock(s: Session, dry_run: bool):
    """The writer lock, except for a dry run (which writes nothing)."""
    return nullcontext() if dry_run else WriterLock(s.ws, s.command)
