"""One invocation of a command: the open workspace, the command line kept for history,
and the notices to show (a killed command's operation finished first).

Every read-modify-write of workspace state goes through :func:`writing` (or
:func:`edit_config` for ``ledger.yaml``): it takes the writer lock and *then* reads again
what the command will modify, so two commands racing never lose one's update — the
second either sees the first's result or fails on the lock.  A command that planned
from what it read before the lock must plan again inside the block (the decision: the
lock is taken before planning, not re-validated after).

An intent record that cannot be trusted (damaged, or naming files the workspace does not
manage) does not block readers: they run with a note saying so.  Writers refuse, naming
the file and advising ``ledger doctor``.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Callable
from typing import Iterator
from typing import Sequence

from ledger.errors import IntentError
from ledger.errors import LedgerError
from ledger.errors import LockHeld
from ledger.errors import RecoveryError
from ledger.live import RESTART_RECORD
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import Config
from ledger.store.config_file import dump_config
from ledger.store.config_file import read_text
from ledger.store.leftovers import needs_recovery
from ledger.store.managed import refuse_symlinked_targets
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
    # --restart): `writing` then takes nothing more.
    locked: bool = False


def printable(text: str) -> str:
    """``text`` with any undecodable byte (a surrogate escape) shown as ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def open_session(explicit: str | None, command: str, cwd: Path | None = None,
                 recover_bisect: bool = True) -> Session:
    """Open the workspace and finish any operation a killed command left behind.

    ``recover_bisect=False`` leaves an interrupted bisect for `ledger bisect reset`."""
    ws = Workspace.open(explicit, cwd)
    session = Session(ws, printable(command))
    if needs_recovery(ws.state_dir):
        from ledger.store.txn import WriterLock

        try:
            with WriterLock(ws, f"{session.command} (recovering)") as lock:
                notice = lock.notice
        except LockHeld:
            # Not interrupted: still running.  A reader sees the state before it; a
            # writer will fail on the lock itself.
            notice = "another ledger command is changing this workspace right now"
        except (IntentError, RecoveryError) as e:
            # Readers go on (they change nothing); writers refuse on the lock.
            notice = f"cannot recover an interrupted command: {e}"
        if notice:
            session.notices.append(notice)
    notice = _recover_bisect(ws, command, session.now) if recover_bisect else None
    if notice:
        session.notices.append(notice)
    notice = _recover_restart(ws, session)
    if notice:
        session.notices.append(notice)
    return session


def _recover_restart(ws: Workspace, session: Session) -> str | None:
    """Roll back a mutation whose --restart was killed before its health check passed."""
    if not (ws.state_dir / RESTART_RECORD).exists():
        return None
    from ledger.live.rollback import recover_restart
    from ledger.store.txn import WriterLock

    try:
        with WriterLock(ws, f"{session.command} (recovering a restart)"):
            return recover_restart(ws, command=session.command, at=session.now)
    except LockHeld:
        return "another ledger command is restarting services of this workspace now"


@contextmanager
def writing(s: Session, dry_run: bool = False, new_config: bool = False) -> Iterator[Workspace]:
    """The writer lock (none for a dry run, which writes nothing), then the workspace
    read again, so what the command modifies is what is on disk now.

    The targets of the ``ledger.yaml`` just read are checked by the rule of ``target add``
    (:func:`~ledger.store.workspace.refuse_symlinked_targets`), so no write lands through a
    symlink written there by hand or pulled from a colleague.  ``new_config``: the command
    writes a new ``ledger.yaml`` (target add/set, root add, pull) and checks that one
    instead — so it can also be what repairs a bad path."""
    if dry_run or s.locked:  # s.locked: held for a mutation and its --restart (commands.live)
        if not new_config:
            refuse_symlinked_targets(s.ws)
        yield s.ws
        return
    from ledger.store.txn import WriterLock

    with WriterLock(s.ws, s.command) as lock:
        if lock.notice:
            s.notices.append(lock.notice)
        s.ws.reload()
        if not new_config:
            refuse_symlinked_targets(s.ws)
        yield s.ws


def edit_config(s: Session, message: str, change: Callable[[Config], None],
                commit_also: Sequence[str] = ()) -> str:
    """Change ``ledger.yaml`` under the writer lock: re-read, ``change`` it, commit.

    ``change`` edits the config it is given in place (and may raise to refuse); the
    file keeps the operator's comments.  Returns the workspace commit.  ``commit_also``:
    workspace files committed with it as they are (a manifest ``target add`` put under
    management inside the workspace).  The changed targets are checked as every writer
    checks them (:func:`writing`).
    """
    with writing(s, new_config=True) as ws:
        change(ws.config)
        refuse_symlinked_targets(Workspace.with_config(ws.root, ws.config))
        text = dump_config(ws.config, read_text(ws.config_path))
        from ledger.store.txn import Transaction

        txn = Transaction(ws, s.command, s.now)
        return txn.execute(message=message, ledger_writes={CONFIG_NAME: text.encode()},
                           commit_also=commit_also).commit


def _recover_bisect(ws: Workspace, command: str, now: str) -> str | None:
    """Restore the start of a bisect that was killed; say so (or that one is running)."""
    from ledger.store.bisect_state import in_progress
    from ledger.store.bisect_state import recover_bisect

    state = in_progress(ws)
    if state is None:
        return None
    from ledger.store.txn import WriterLock

    try:
        with WriterLock(ws, f"{command} (recovering an interrupted bisect)"):
            return recover_bisect(ws, now)
    except LockHeld:
        return (f"bisect {state.id} is running (pid {state.pid}, started {state.started}): "
                "entries are toggled temporarily; its record says which")
    except LedgerError as e:
        return (f"bisect {state.id} was interrupted and its starting state could not be put "
                f"back: {e}\n`ledger bisect reset --force` puts it back anyway")
