"""`ledger backups …`: the backup store seen from the workspace."""

from __future__ import annotations

from pathlib import Path

from backups.store import Backup
from ledger.store.txn import Transaction
from ledger.store.txn import WriterLock
from ledger.store.txn import backup_store
from ledger.store.workspace import Workspace
from ledger.store.workspace import refuse_symlink


def list_backups(ws: Workspace) -> list[Backup]:
    return backup_store(ws).list()


def get_backup(ws: Workspace, ref: str) -> Backup:
    return backup_store(ws).get(ref)


def diff_backup(ws: Workspace, ref: str, path: str | None = None) -> str:
    store = backup_store(ws)
    target = None if path is None else str(Path(path).absolute())
    return store.diff(store.get(ref), target)


def restore_backup(session, ref: str, dry_run: bool = False) -> list[str]:
    """Write every file of backup ``ref`` back; the current contents are backed up first.

    This deliberately bypasses the ledger's expectations: it is the operator's escape
    hatch, and ``ledger status`` will show any drift it creates.
    """
    ws = session.ws
    store = backup_store(ws)
    backup = store.get(ref)
    writes: dict[Path, bytes] = {}
    for f in backup.files:
        data = store.content(f)
        path = Path(f.path)
        current = path.read_bytes() if path.exists() else None
        if data is not None and data != current:
            refuse_symlink(path)  # the rule of `target add`: no write through a symlink
            writes[path] = data
    if dry_run or not writes:
        return [str(p) for p in writes]
    with WriterLock(ws, session.command):
        Transaction(ws, session.command, session.now).execute(
            message=f"backups restore {backup.id}\n\n"
            + "".join(f"- {p}\n" for p in writes),
            target_writes=writes,
        )
    return [str(p) for p in writes]
