"""Temporary files a killed ledger command leaves behind, and which are safe to delete.

Every temporary file the ledger writes is named ``.ledger-tmp-<tag>-<name>`` (see
:mod:`backups.fsio`).  The tag says who wrote it: a transaction's operation id (only the
holder of the writer lock runs a transaction, so such a file is orphaned whenever nobody
holds the lock), or ``p<pid>`` for a write outside any transaction (orphaned when that
process is gone).  Nothing else is ever deleted here: the name is the proof.

Files of the older naming (``.<name>.<random>.tmp``, written next to targets and in the
workspace before this scheme) are recognised too, next to the file they were for, so
``ledger doctor`` can report and remove them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from backups.fsio import temp_owner
from ledger.procs import pid_alive

# A transaction's intent, ``.ledger/intent.json`` (:mod:`ledger.store.intent`): present
# only while one runs, or after one was killed.
INTENT = "intent.json"


def needs_recovery(state_dir: Path) -> bool:
    """Whether a killed writer left something in the workspace's ``.ledger`` directory:
    an intent or a temporary (cheap: a stat and a listdir; every command asks, and the
    recovery itself, :mod:`ledger.store.recovery`, loads only when it is needed)."""
    return (state_dir / INTENT).exists() or bool(temps_in(state_dir))


_LEGACY = re.compile(r"\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.tmp\Z")


def temps_in(directory: Path, tag: str | None = None) -> list[Path]:
    """The ledger temporaries in ``directory`` (of operation ``tag`` only, if given)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = []
    for name in names:
        owner = temp_owner(name)
        if owner is not None and (tag is None or owner == tag):
            out.append(Path(directory) / name)
    return sorted(out)


def legacy_temps_of(path: Path) -> list[Path]:
    """Old-style temporaries (``.NAME.XXXXXXXX.tmp``) of ``path``, in its directory."""
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    out = []
    for name in names:
        m = _LEGACY.match(name)
        if m and m.group("name") == path.name:
            out.append(path.parent / name)
    return sorted(out)


def is_orphan(path: Path, writer_running: bool) -> bool:
    """Whether the ledger temporary ``path`` belongs to nobody alive (a zombie writer is
    dead: see :mod:`ledger.procs`)."""
    tag = temp_owner(path.name)
    if tag is None:
        return False
    if tag.startswith("p") and tag[1:].isdigit():
        return not pid_alive(int(tag[1:]))
    return not writer_running


def remove_all(paths: Iterable[Path]) -> list[str]:
    """Delete each file (never a directory); return those removed."""
    removed = []
    for p in paths:
        try:
            if not Path(p).is_dir() or Path(p).is_symlink():
                Path(p).unlink()
                removed.append(str(p))
        except FileNotFoundError:
            pass
    return removed
