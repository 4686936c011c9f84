"""Managed config files, read and edited through the ``envknobs`` formats.

The files are decoded as UTF-8 with ``surrogateescape`` so that any byte sequence comes
back out exactly as it went in: a file the ledger does not change is never rewritten,
and a file it changes differs only in the lines of the knobs it set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from envknobs.registry import KnobError
from ledger.errors import InvalidValue
from ledger.errors import TargetError
from ledger.model import Target
from ledger.workspace import Workspace
from ledger.workspace import check_target_file

ENCODING = "utf-8"
ERRORS = "surrogateescape"


@dataclass(frozen=True)
class TargetFile:
    target: Target
    path: Path
    raw: bytes
    values: dict[str, str]

    @property
    def text(self) -> str:
        return self.raw.decode(ENCODING, ERRORS)


def _format(target: Target):
    from envknobs.formats import get_format

    return get_format(target.format, container=target.container)


def read_target(ws: Workspace, target: Target) -> TargetFile:
    """Read and parse one target file; errors name the file."""
    from envknobs.formats import FormatError

    path = ws.target_path(target)
    check_target_file(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(str(path), f"cannot read: {e.strerror}") from e
    try:
        values = _format(target).parse(raw.decode(ENCODING, ERRORS))
    except FormatError as e:
        raise TargetError(str(path), str(e)) from e
    return TargetFile(target, path, raw, values)


def edit_target(tf: TargetFile, edits: Mapping[str, str | None]) -> bytes:
    """The file's bytes with each knob in ``edits`` set (or unset, for None)."""
    from envknobs.formats import FormatError

    fmt = _format(tf.target)
    text = tf.text
    try:
        for knob, value in edits.items():
            text = fmt.unset(text, knob) if value is None else fmt.set(text, knob, value)
    except FormatError as e:
        raise TargetError(str(tf.path), str(e)) from e
    except KnobError as e:
        raise InvalidValue(f"{tf.path}: {e}") from e
    return text.encode(ENCODING, ERRORS)
