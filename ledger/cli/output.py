"""Formatting for people: aligned tables, short lines, colour only on a terminal.

Colour follows the global ``--color auto|always|never`` (``auto``, the default: only
when stdout is a tty and ``NO_COLOR`` is not set, https://no-color.org; ``always``
overrides ``NO_COLOR``, as an explicit flag should).  Every user-supplied string is
printed as data: control characters are shown escaped so a title cannot rewrite the
operator's terminal; a painted cell is escaped *before* it is painted, so the colour's
own escape codes reach the terminal as colour, never as ``\x1b[32m`` text.

Tables fit the terminal's width (``COLUMNS``, else the tty's size) only when stdout
is a terminal: piped output (and ``--json``) is never cut.  On a terminal, columns
marked ``keep`` (the value that answers the question: a knob's CHANGE, a headline)
are wrapped onto more lines, never cut; the other columns are cut with ``…`` first.
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


COLOUR_MODES = ("auto", "always", "never")
_MODE = "auto"


def set_colour_mode(mode: str) -> str:
    """Set ``--color`` for this invocation; return the previous mode."""
    global _MODE
    previous, _MODE = _MODE, mode
    return previous


def use_colour(stream=None) -> bool:
    if _MODE == "always":
        return True
    if _MODE == "never" or os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def terminal_width(stream=None) -> int | None:
    """Columns to fit tables in: ``COLUMNS`` or the terminal's size on a tty; None (no
    limit) when stdout is a pipe or a file, so a script gets every value whole."""
    stream = stream or sys.stdout
    if not (hasattr(stream, "isatty") and stream.isatty()):
        return None
    import shutil

    return max(shutil.get_terminal_size().columns, 40)


class Painted(str):
    """A cell painted for the terminal that remembers its plain text and style, so a
    table measures, escapes and pads the text and paints it afterwards."""

    plain: str
    style: str

    def __new__(cls, plain: str, style: str, painted: str):
        obj = super().__new__(cls, painted)
        obj.plain, obj.style = plain, style
        return obj


def safe(text: object) -> str:
    """Printable form of a user string: control characters escaped, never interpreted."""
    s = "" if text is None else str(text)
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], s)


def paint(text: str, style: str, colour: bool) -> str:
    code = COLOURS.get(style)
    if not colour or not code:
        return text
    return Painted(text, style, f"\x1b[{code}m{text}\x1b[0m")


def _plain(cell: object) -> tuple[str, str]:
    """(text made safe, style) of one cell."""
    if isinstance(cell, Painted):
        return safe(cell.plain), cell.style
    return safe(cell), ""


def table(rows: Sequence[Sequence[object]], headers: Sequence[str] | None = None,
          max_width: int | None = None, keep: Sequence[int] = (),
          width: int | None = -1) -> str:
    """Left-aligned columns, fitted to the terminal (see the module docstring).

    ``keep``: indexes of the columns that answer the question: wrapped, never cut
    (default: the last column); the others are cut with ``…`` when the terminal is narrow.
    ``width``: total columns (-1: the terminal's, None: unlimited).  ``max_width`` no
    longer cuts anything; it is accepted for the callers that still pass it.
    """
    del max_width
    total = terminal_width() if width == -1 else width
    cells = [[_plain(c) for c in row] for row in rows]
    if headers:
        cells.insert(0, [(h, "") for h in headers])
    if not cells:
        return ""
    n = max(map(len, cells))
    widths = [max((len(r[i][0]) for r in cells if i < len(r)), default=0) for i in range(n)]
    kept = {i % n for i in keep} if keep else {n - 1}
    if total is not None:
        heads = [len(headers[i]) if headers and i < len(headers) else 0 for i in range(n)]
        words = [max((len(w) for r in cells if i < len(r) for w in r[i][0].split()), default=0)
                 for i in range(n)]
        widths = _fit(widths, kept, total, heads, words)
    colour = any(isinstance(c, Painted) for row in rows for c in row)
    lines: list[str] = []
    for r in cells:
        lines.extend(_row_lines(r, widths, kept, colour))
    return "\n".join(lines)


def _fit(widths: list[int], kept: set[int], total: int, heads: list[int],
         words: list[int]) -> list[int]:
    """Column widths within ``total``.  The other columns are cut first, each down to its
    header or 8 (whichever is wider, never wider than it was), the widest first, so the
    kept ones keep their longest word whole where they can; then the kept columns share
    what is left, wrapping (never below 16)."""
    gap = 2 * (len(widths) - 1)
    widths = list(widths)

    def over() -> int:
        return sum(widths) + gap - total

    for i in sorted((i for i in range(len(widths)) if i not in kept), key=lambda i: -widths[i]):
        if over() <= 0:
            break
        floor = min(widths[i], max(heads[i], 8))
        widths[i] = max(floor, widths[i] - over())
    for floor_of in (lambda i: max(words[i], 16), lambda i: 16):
        for i in sorted(kept, key=lambda i: -widths[i]):
            if over() <= 0:
                break
            widths[i] = max(min(widths[i], floor_of(i)), widths[i] - over())
    return widths


def _row_lines(r: list[tuple[str, str]], widths: list[int], kept: set[int],
               colour: bool) -> list[str]:
    """One row as one or more lines: kept cells wrapped, others cut with an ellipsis."""
    import textwrap

    pieces = []
    for i, (text, _style) in enumerate(r):
        if len(text) <= widths[i]:
            pieces.append([text])
        elif i in kept:
            pieces.append(textwrap.wrap(text, widths[i], break_on_hyphens=False) or [""])
        else:
            pieces.append([_cut(text, widths[i])])
    out = []
    for k in range(max(len(p) for p in pieces)):
        parts = []
        for i, p in enumerate(pieces):
            text = p[k] if k < len(p) else ""
            pad = "" if i == len(r) - 1 else " " * (widths[i] - len(text))
            style = r[i][1]
            parts.append((paint(text, style, True) if colour and style and text else text) + pad)
        out.append("  ".join(parts).rstrip())
    return out


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
