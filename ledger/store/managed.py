"""What a managed file must be before the ledger writes it.

A target's file is a regular file that exists and is not a symlink: a write through a
symlink would land somewhere the operator did not name.  ``target add`` checks one path;
every command that writes checks every target of ``ledger.yaml`` at load (a path edited
by hand or pulled from a colleague), with the same rule and the same message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import TargetError
from ledger.store.config_file import CONFIG_NAME

if TYPE_CHECKING:
    from ledger.store.workspace import Workspace


def refuse_symlink(path: Path, named: str = "") -> None:
    """The rule of ``target add``: a managed file is not a symlink (``named``: where the
    path was written, added to the message)."""
    if path.is_symlink():
        raise TargetError(
            str(path),
            "is a symlink; manage the file it points to instead "
            f"({os.path.realpath(path)}) so writes cannot land somewhere unexpected{named}",
        )


def refuse_symlinked_targets(ws: "Workspace") -> None:
    """Every target of ``ws.config`` whose file is on this machine, checked with
    :func:`refuse_symlink`: what a writer checks when it loads ``ledger.yaml`` (a path
    edited by hand or pulled from a colleague), before it plans anything.  A symlinked
    *directory* on the way is allowed, as ``target add`` allows it: writes land in the
    directory it resolves to, beside the file, and a deployment often links one."""
    for name, path in sorted(ws.target_paths_here().items()):
        refuse_symlink(path, f" (target {name} in {CONFIG_NAME})")


def check_target_file(path: Path) -> None:
    """A managed file must exist, be a regular file, and not be a symlink."""
    refuse_symlink(path)
    if not path.exists():
        raise TargetError(str(path), "does not exist")
    if not path.is_file():
        raise TargetError(str(path), "is not a regular file")
