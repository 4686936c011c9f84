"""The intent record of a transaction: what an interrupted command may have touched.

``.ledger/intent.json`` is written (atomically) before a transaction changes anything
and removed when it is complete.  It is the only thing crash recovery trusts, and it is a
file on disk, so it is read like every other workspace file: its shape and every field's
type are checked (:func:`parse_intent`), and a record that fails raises
:class:`~ledger.errors.IntentError` naming the file, never a traceback.

Recovery deletes and overwrites files, so what a record may name is also checked against
the workspace (:func:`check_scope`) before anything is touched:

* a target path must be absolute and normal (no ``..``), and be a target of this
  workspace (in ``ledger.yaml`` now, at the workspace HEAD the record names, or at the
  remote commit a pull was merging) or a file
  of the engine repo; rollback further restores only files the named backup holds;
* a ledger file (and a file staged as it is, ``staged``) must be a relative path inside
  the workspace, outside ``.git`` and ``.ledger``, with no ``..`` and no symlinked
  directory on the way;
* the engine repo must be the workspace's own, its HEAD a full object id;
* a temporary file must carry this operation's ``.ledger-tmp-<op>-`` name.

A record that names anything else is refused as damaged, with advice to run
``ledger doctor`` (which shows it and, with ``--repair``, sets it aside).  The decision:
a damaged record is never "repaired" by guessing what it meant.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from backups.fsio import TEMP_PREFIX
from backups.fsio import temp_owner
from ledger.errors import IntentError
from ledger.store.leftovers import INTENT
from ledger.store.workspace import STATE_DIR
from ledger.store.workspace import Workspace

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_OP = re.compile(r"[0-9a-f]{6,32}\Z")


@dataclass(frozen=True)
class TargetChange:
    path: str
    before: str | None
    after: str


@dataclass(frozen=True)
class LedgerFile:
    path: str
    existed: bool


@dataclass(frozen=True)
class Intent:
    op: str
    command: str = "?"
    started: str = "?"
    workspace_head: str | None = None
    backup: str | None = None
    targets: tuple[TargetChange, ...] = ()
    ledger_files: tuple[LedgerFile, ...] = ()
    engine_path: str | None = None
    engine_head: str | None = None
    temps: tuple[str, ...] = field(default_factory=tuple)
    # `ledger pull`: the remote commit merged, whose ledger.yaml may name targets the
    # workspace HEAD before did not (they are managed too, for recovery)
    merge_parent: str | None = None
    # files inside the workspace committed as they are (a manifest put under management
    # by `target add`): rollback only takes them out of the index again
    staged: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"`ledger {self.command}` (started {self.started})"

    def to_dict(self) -> dict:
        return {
            "op": self.op, "command": self.command, "started": self.started,
            "workspace_head": self.workspace_head, "backup": self.backup,
            "targets": [{"path": t.path, "before": t.before, "after": t.after}
                        for t in self.targets],
            "ledger_files": [{"path": f.path, "existed": f.existed} for f in self.ledger_files],
            "engine": ({"path": self.engine_path, "head": self.engine_head}
                       if self.engine_path else None),
            "temps": list(self.temps),
            **({"merge_parent": self.merge_parent} if self.merge_parent else {}),
            **({"staged": list(self.staged)} if self.staged else {}),
        }


def _bad(where: str, problem: str) -> IntentError:
    return IntentError(where, problem)


def _str(d: dict, key: str, where: str, pattern: re.Pattern | None = None,
         optional: bool = False) -> str | None:
    v = d.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, str) or (pattern is not None and not pattern.match(v)):
        raise _bad(where, f"field {key!r} is {v!r}, not what the ledger writes there")
    return v


def _list(d: dict, key: str, where: str) -> list:
    v = d.get(key, [])
    if not isinstance(v, list):
        raise _bad(where, f"field {key!r} must be a list, not {type(v).__name__}")
    for item in v:
        if not isinstance(item, dict) and key not in ("temps", "staged"):
            raise _bad(where, f"each item of {key!r} must be an object, found {item!r}")
    return v


def parse_intent(data, where: str) -> Intent:
    """An :class:`Intent` from the decoded JSON of ``where``, every field type-checked."""
    if not isinstance(data, dict):
        raise _bad(where, f"expected a JSON object, found {type(data).__name__}")
    targets = tuple(
        TargetChange(_str(t, "path", where), _str(t, "before", where, _SHA256, True),
                     _str(t, "after", where, _SHA256))
        for t in _list(data, "targets", where)
    )
    files = []
    for f in _list(data, "ledger_files", where):
        if not isinstance(f.get("existed"), bool):
            raise _bad(where, f"ledger file {f.get('path')!r}: 'existed' must be true or false")
        files.append(LedgerFile(_str(f, "path", where), f["existed"]))
    temps = _list(data, "temps", where)
    if not all(isinstance(t, str) for t in temps):
        raise _bad(where, "field 'temps' must be a list of paths")
    staged = _list(data, "staged", where)
    if not all(isinstance(t, str) for t in staged):
        raise _bad(where, "field 'staged' must be a list of paths")
    engine = data.get("engine")
    if engine is not None and not isinstance(engine, dict):
        raise _bad(where, f"field 'engine' must be an object or null, not {engine!r}")
    return Intent(
        op=_str(data, "op", where, _OP),
        command=_str(data, "command", where, optional=True) or "?",
        started=_str(data, "started", where, optional=True) or "?",
        workspace_head=_str(data, "workspace_head", where, _SHA, True),
        backup=_str(data, "backup", where, optional=True),
        targets=targets,
        ledger_files=tuple(files),
        engine_path=_str(engine, "path", where) if engine else None,
        engine_head=_str(engine, "head", where, _SHA, True) if engine else None,
        temps=tuple(temps),
        merge_parent=_str(data, "merge_parent", where, _SHA, True),
        staged=tuple(staged),
    )


def _is_normal_abs(p: str) -> bool:
    return os.path.isabs(p) and os.path.normpath(p) == p and "\0" not in p


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check_ledger_file(ws: Workspace, rel: str) -> Path:
    """The workspace path of ledger file ``rel``, or IntentError if it could be elsewhere."""
    where = str(ws.state_dir / INTENT)
    parts = Path(rel).parts
    if (not rel or os.path.isabs(rel) or os.path.normpath(rel) != rel or ".." in parts
            or "\0" in rel or parts[0] in (".git", STATE_DIR)):
        raise _damaged(where, f"ledger file {rel!r} is not a path inside the workspace")
    path = ws.root / rel
    if not _inside(Path(os.path.realpath(path.parent)), Path(os.path.realpath(ws.root))):
        raise _damaged(where, f"ledger file {rel!r} leads out of the workspace")
    return path


def _damaged(where: str, problem: str) -> IntentError:
    return IntentError(where, f"{problem}; recovery refuses to touch it")


def check_scope(ws: Workspace, intent: Intent, managed_paths: set[str]) -> None:
    """Refuse a record naming anything recovery must not touch (see the module doc).

    ``managed_paths``: the absolute paths of this workspace's targets (now and at the
    record's workspace HEAD).
    """
    where = str(ws.state_dir / INTENT)
    engine = ws.engine_repo_path
    if intent.engine_path is not None:
        if engine is None or os.path.normpath(intent.engine_path) != os.path.normpath(engine):
            raise _damaged(where, f"engine repo {intent.engine_path!r} is not this workspace's")
    for t in intent.targets:
        if not _is_normal_abs(t.path):
            raise _damaged(where, f"target path {t.path!r} is not a normal absolute path")
        in_engine = engine is not None and _inside(Path(t.path), Path(os.path.normpath(engine)))
        if t.path not in managed_paths and not in_engine:
            raise _damaged(where, f"{t.path} is not a file this workspace manages")
    for f in intent.ledger_files:
        check_ledger_file(ws, f.path)
    for rel in intent.staged:  # only ever taken out of the index, still: the workspace's
        check_ledger_file(ws, rel)
    for tmp in intent.temps:
        if not _is_normal_abs(tmp) or temp_owner(os.path.basename(tmp)) != intent.op:
            raise _damaged(where, f"temporary file {tmp!r} is not named {TEMP_PREFIX}{intent.op}-…")
    if intent.backup is not None and (not intent.backup or "/" in intent.backup
                                      or intent.backup in (".", "..", "objects")):
        raise _damaged(where, f"backup id {intent.backup!r} is not a backup id")
