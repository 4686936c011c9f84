"""Finishing what a killed command left behind: roll back, or forward if it was complete.

:func:`recover` runs under the writer lock (see :class:`~ledger.store.txn.WriterLock`).
It reads the intent record (:mod:`ledger.store.intent`; a damaged one raises
:class:`~ledger.errors.IntentError` and nothing is touched), then:

* **forward**, when the workspace HEAD is the operation's own commit (its
  ``Ledger-Op`` trailer): every write was made; only what the killed processes left
  around is cleaned (git locks, temporaries);
* **back** otherwise: :func:`rollback`.

Both end with no git lock of the operation, no temporary file of it, and no record.
Temporaries of dead writers in ``.ledger`` are swept even when no record was written
(a kill while writing the record itself).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Iterable

from backups.fsio import atomic_write
from backups.fsio import remove_file
from backups.store import BackupStore
from ledger.errors import BackupError
from ledger.errors import IntentError
from ledger.errors import LedgerError
from ledger.errors import RecoveryError
from ledger.store import gitlocks
from ledger.store import leftovers
from ledger.store import wsgit
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import parse_config_text
from ledger.store.intent import INTENT
from ledger.store.intent import Intent
from ledger.store.intent import check_ledger_file
from ledger.store.intent import check_scope
from ledger.store.intent import parse_intent
from ledger.store.workspace import STATE_DIR
from ledger.store.workspace import Workspace

BACKUPS = "backups"


def backup_store(ws: Workspace) -> BackupStore:
    """The workspace's backup store, raising the ledger's own :class:`BackupError`."""
    return BackupStore(ws.state_dir / BACKUPS, error=BackupError)


def sha256_or_none(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def engine_reset(repo_path: Path, head: str) -> None:
    """Put the engine repo's branch and work tree back at ``head`` (it was clean before)."""
    from ledger.patches.stack import EngineRepo

    EngineRepo(repo_path).rollback(head)


def read_intent(ws: Workspace) -> Intent | None:
    """The intent record left in the workspace, checked; None when there is none."""
    path = ws.state_dir / INTENT
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise IntentError(str(path), f"cannot read: {e.strerror}") from e
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise IntentError(str(path), f"not a readable intent record ({e})") from e
    return parse_intent(data, str(path))


def checked_intent(ws: Workspace) -> Intent | None:
    """:func:`read_intent`, and refused (IntentError) if it names what recovery must not
    touch (see :func:`ledger.store.intent.check_scope`)."""
    intent = read_intent(ws)
    if intent is not None:
        check_scope(ws, intent, _managed_paths(ws, intent))
    return intent


def state_temps(ws: Workspace) -> list[Path]:
    """Ledger temporaries in ``.ledger`` and the backup store (where only writers write)."""
    store = ws.state_dir / BACKUPS
    dirs = [ws.state_dir, store, store / "objects"]
    return [p for d in dirs for p in leftovers.temps_in(d)]


@dataclass
class Cleaned:
    """What a recovery put back and cleaned."""

    restored: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # changed by hand since: left alone
    locks: list[str] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)


def _managed_paths(ws: Workspace, intent: Intent) -> set[str]:
    """Absolute target paths of the workspace: now, at the record's workspace HEAD, and
    at the remote commit a pull was merging."""
    configs = [ws.config]
    for rev in (intent.workspace_head, intent.merge_parent):
        text = wsgit.show_file(ws.root, rev, CONFIG_NAME) if rev else None
        if text is not None:
            try:
                configs.append(parse_config_text(text, f"{CONFIG_NAME} at {rev}"))
            except LedgerError:
                pass
    paths = {os.path.normpath(ws.local_config_path)}
    for c in configs:
        for t in c.targets.values():
            try:
                paths.add(os.path.normpath(ws.target_path(t)))
            except LedgerError:  # its root is not on this machine: not a file here
                pass
    return paths


def inside_workspace(ws: Workspace, paths: Iterable[str | Path]) -> list[str]:
    """Workspace-relative spellings of those of ``paths`` that lie inside the workspace
    (outside ``.git`` and ``.ledger``): the target files committed with the ledger."""
    out = []
    for p in paths:
        try:
            rel = Path(os.path.normpath(p)).relative_to(ws.root)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] not in (".git", STATE_DIR):
            out.append(rel.as_posix())
    return out


def _clear_git_locks(ws: Workspace, intent: Intent, since: float | None) -> list[str]:
    removed = []
    repos = [ws.root] + ([Path(intent.engine_path)] if intent.engine_path else [])
    for repo in repos:
        dirs = gitlocks.git_dirs(repo)
        if dirs is not None:
            removed += gitlocks.remove_locks(gitlocks.stale_locks(dirs, since))
    return removed


def _clear_temps(ws: Workspace, intent: Intent) -> list[str]:
    """Every temporary of the operation: listed, and by name wherever it writes."""
    dirs = {ws.root, ws.root / "patches"}
    dirs |= {Path(t.path).parent for t in intent.targets}
    dirs |= {(ws.root / f.path).parent for f in intent.ledger_files}
    found = [Path(t) for t in intent.temps]
    found += [p for d in dirs for p in leftovers.temps_in(d, intent.op)]
    # In .ledger only writers write, and we hold the lock: every temporary there is dead.
    found += [p for p in state_temps(ws) if leftovers.is_orphan(p, writer_running=False)]
    if intent.backup:
        partial = ws.state_dir / BACKUPS / intent.backup
        found += leftovers.temps_in(partial)
    removed = leftovers.remove_all(sorted(set(found)))
    _remove_partial_backup(ws, intent)
    return removed


def _remove_partial_backup(ws: Workspace, intent: Intent) -> None:
    """The directory of the record's backup when it never got its manifest (empty)."""
    if not intent.backup:
        return
    bdir = ws.state_dir / BACKUPS / intent.backup
    if bdir.is_dir() and not (bdir / "manifest.json").exists() and not any(bdir.iterdir()):
        shutil.rmtree(bdir)


def _restore_targets(ws: Workspace, intent: Intent, store: BackupStore, out: Cleaned) -> None:
    backup = None
    for t in intent.targets:
        path = Path(t.path)
        now = sha256_or_none(path)
        if now == t.before:
            continue
        if now != t.after:
            out.kept.append(str(path))
            continue
        if backup is None:
            backup = store.load(intent.backup) if intent.backup else None
        f = backup.file(path) if backup else None
        if f is None:
            what = f"backup {intent.backup} does not hold it" if backup else "its backup is missing"
            raise RecoveryError(
                f"cannot put {path} back ({what}); the intent record "
                f"{ws.state_dir / INTENT} stays: run `ledger doctor` and restore the file by hand"
            )
        data = store.content(f)
        if data is None:
            remove_file(path)
        else:
            atomic_write(path, data, f.mode)
        out.restored.append(str(path))


def rollback(ws: Workspace, intent: Intent, store: BackupStore | None = None,
             trusted: bool = False) -> Cleaned:
    """Undo the operation ``intent`` describes; return what was put back and cleaned.

    ``trusted``: the record was made by this process (the all-or-nothing path), so its
    scope is not checked again.
    """
    store = store or backup_store(ws)
    if not trusted:
        check_scope(ws, intent, _managed_paths(ws, intent))
    out = Cleaned()
    out.locks = _clear_git_locks(ws, intent, _intent_mtime(ws))
    _restore_targets(ws, intent, store, out)
    if intent.engine_head and intent.engine_path:
        engine_reset(Path(intent.engine_path), intent.engine_head)
    existed = [f.path for f in intent.ledger_files if f.existed]
    created = [f.path for f in intent.ledger_files if not f.existed]
    if intent.workspace_head:
        wsgit.restore_paths(ws.root, intent.workspace_head, existed, created)
        # A target inside the workspace may have been staged for the commit: its index
        # entry goes back too (the file itself came back from the backup, or was kept).
        wsgit.unstage(ws.root, intent.workspace_head,
                      [*inside_workspace(ws, [t.path for t in intent.targets]),
                       *intent.staged])
    for rel in created:
        remove_file(check_ledger_file(ws, rel))
    out.temps = _clear_temps(ws, intent)
    remove_file(ws.state_dir / INTENT)
    return out


def _intent_mtime(ws: Workspace) -> float | None:
    try:
        return os.stat(ws.state_dir / INTENT).st_mtime
    except FileNotFoundError:
        return None


def _completed(ws: Workspace, intent: Intent) -> bool:
    head = wsgit.head(ws.root)
    if not head or head == intent.workspace_head:
        return False
    return f"Ledger-Op: {intent.op}" in wsgit.message_of(ws.root, head)


def roll_forward(ws: Workspace, intent: Intent) -> Cleaned:
    """Clean up after an operation whose every write was made."""
    out = Cleaned()
    out.locks = _clear_git_locks(ws, intent, _intent_mtime(ws))
    out.temps = _clear_temps(ws, intent)
    remove_file(ws.state_dir / INTENT)
    return out


def recover(ws: Workspace) -> str | None:
    """Finish an operation a killed command left behind; return a notice, or None.

    The caller holds the writer lock.
    """
    intent = read_intent(ws)
    if intent is None:
        stray = leftovers.remove_all(
            p for p in state_temps(ws) if leftovers.is_orphan(p, writer_running=False))
        return f"removed {len(stray)} temporary file(s) of a killed command" if stray else None
    what = intent.describe()
    if _completed(ws, intent):
        check_scope(ws, intent, _managed_paths(ws, intent))
        done = roll_forward(ws, intent)
        ws.invalidate()
        return f"an interrupted {what} had completed; nothing to undo" + _extras(done)
    done = rollback(ws, intent)
    ws.reload()
    files = ", ".join(done.restored) if done.restored else "no target file had changed"
    return f"rolled back an interrupted {what}: {files}" + _extras(done)


def _extras(done: Cleaned) -> str:
    parts = []
    if done.locks:
        parts.append(f"removed stale git lock(s) {', '.join(done.locks)}")
    if done.kept:
        parts.append(f"left {', '.join(done.kept)} as it is: it was changed by hand since "
                     "(see `ledger status`; the backup holds the old content)")
    return "".join(f"; {p}" for p in parts)
