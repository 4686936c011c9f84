"""Formatting for people: aligned tables, short lines, colour only on a terminal.

Colour is used only when stdout is a tty and ``NO_COLOR`` is not set
(https://no-color.org).  Every user-supplied string is printed as data: control
characters are shown escaped so a title cannot rewrite the operator's terminal.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Sequence

import click

from ledger.core.display import UNSET

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x1b]")

COLOURS = {
    "applied": "32",
    "reverted": "33",
    "suspected": "31",
    "cleared": "36",
    "perf": "35",
    "bugfix": "34",
    "gain": "32",
    "regression": "31",
    "drift": "31",
    "dim": "2",
    "bold": "1",
}


def use_colour(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def safe(text: object) -> str:
    """Printable form of a user string: control characters escaped, never interpreted."""
    s = "" if text is None else str(text)
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], s)


def paint(text: str, style: str, colour: bool) -> str:
    code = COLOURS.get(style)
    if not colour or not code:
        return text
    return f"\x1b[{code}m{text}\x1b[0m"


def table(rows: Sequence[Sequence[object]], headers: Sequence[str] | None = None,
          max_width: int = 60) -> str:
    """Left-aligned columns; long cells cut with an ellipsis, except in the last column,
    which is never padded or cut (it is where headlines and reasons go)."""
    cells = [[safe(c) if i == len(row) - 1 else _cut(safe(c), max_width)
              for i, c in enumerate(row)] for row in rows]
    if headers:
        cells.insert(0, list(headers))
    if not cells:
        return ""
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(max(map(len, cells)))]
    lines = []
    for r in cells:
        parts = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


STALE_NOTE = ("[stale]: that evidence was measured on another engine commit or with other "
              "knob values than the live ones (a patch or knob changed since); "
              "`ledger ab ID` measures it again")


def stale_note(texts: Sequence[object]) -> None:
    """Explain ``[stale]`` once, under any output that shows a stale headline."""
    if any(str(t).startswith("[stale") for t in texts):
        click.echo(STALE_NOTE)


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


def show_value(v: str | None) -> str:
    """A knob value for the terminal: ``(unset)`` for None, else the value made safe."""
    return f"({UNSET})" if v is None else safe(v)
