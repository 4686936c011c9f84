"""Text for the rendered docs: Markdown escaping and the display form of values.

Kept apart from :mod:`ledger.render.docs` so the escaping rules, which are what stands between
a hostile title and a reviewer's browser, can be read and tested on their own.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from ledger.core.display import UNSET

# ---------------------------------------------------------------------------------------
# Markdown escaping
# ---------------------------------------------------------------------------------------

# Characters with inline meaning anywhere: code, emphasis, links, table cells.  `<`, `>`
# and `&` become entities (a backslash before `<` is not honoured by every renderer).
_MD_INLINE = {
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
    "~": "\\~",
    "<": "&lt;",
    ">": "&gt;",
    "&": "&amp;",
}
_MD_INLINE_RE = re.compile(r"[\\`*\[\]|~<>&]")
# `_` opens emphasis only at a word edge; escaping it inside KNOB_NAMES would make the raw
# Markdown unreadable for no gain.
_MD_UNDERSCORE_RE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What turns the start of a line into a heading, list, quote or rule.
_MD_LINE_START_RE = re.compile(r"^(#|[-+=](?=\s|$))")
# An ordered-list marker (``1.``, ``0)``) is escaped at its delimiter: CommonMark escapes
# punctuation only, so a backslash before the digits would show as one.
_MD_LIST_NUMBER_RE = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
_NEWLINES_RE = re.compile(r"\r\n|\r|\n")


def md_text(value: Any) -> str:
    """``value`` as literal Markdown inline text, safe in a table cell, link text or list.

    Line breaks become ``<br>`` (the only HTML this emits) so a multi-line reason stays
    inside its table cell.
    """
    text = "" if value is None else str(value)
    lines = []
    for line in _NEWLINES_RE.split(text):
        line = _MD_INLINE_RE.sub(lambda m: _MD_INLINE[m.group(0)], line)
        line = _MD_UNDERSCORE_RE.sub(r"\\_", line)
        line = _MD_LINE_START_RE.sub(r"\\\1", line.lstrip())
        line = _MD_LIST_NUMBER_RE.sub(r"\1\\\2", line)
        lines.append(line)
    return "<br>".join(lines)


def md_code(value: str | None, table: bool = True, default: str | None = None) -> str:
    """``value`` as a Markdown code span; ``unset``/``empty`` in italics for None/""
    (``*unset* (default `256`)`` when the engine's ``default`` is known).

    The fence is one backtick longer than any run inside the value, so no value can close
    it early.  In GFM tables a ``|`` ends the cell even inside code, hence ``\\|`` there.
    """
    if value is None:
        return f"*{UNSET}*" + ("" if default is None else f" (default {md_code(default, table)})")
    if value == "":
        return "*empty*"
    text = _NEWLINES_RE.sub(" ", value)
    if table:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end of a code span whose content starts and
    # ends with a space (unless it is all spaces), and a backtick at an edge would merge
    # with the fence: one pad space on each side keeps the value exact in both cases.
    edges = text[:1] + text[-1:]
    pad = " " if text.strip(" ") and ("`" in edges or " " in edges) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ---------------------------------------------------------------------------------------
# Display values
# ---------------------------------------------------------------------------------------


def when(stamp: str | None, seconds: bool = False) -> str:
    """An ISO timestamp shortened for people ('2026-05-02 14:14 UTC'; with ``seconds``
    '2026-05-02 14:14:09 UTC'); other text as is."""
    if not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return str(stamp)
    offset = moment.utcoffset()
    zone = "" if offset is None else " UTC" if not offset else moment.strftime(" %z")
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M") + zone


def when_exact(stamp: str | None) -> str:
    """:func:`when` to the second, for the timeline, where several commands of one minute
    must read in their real order."""
    return when(stamp, seconds=True)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def fmt_median(value: Any) -> str:
    v = _num(value)
    if v is None:
        return "—"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"


def fmt_pct(value: Any) -> str:
    v = _num(value)
    return "—" if v is None else f"{v:+.1f}%"


def fmt_ci(low: Any, high: Any) -> str:
    lo, hi = _num(low), _num(high)
    return "—" if lo is None or hi is None else f"{lo:+.1f} … {hi:+.1f}%"


def fmt_p(value: Any) -> str:
    v = _num(value)
    if v is None:
        return "—"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


__all__ = ["fmt_ci", "fmt_median", "fmt_p", "fmt_pct", "md_code", "md_fence", "md_text", "when",
           "when_exact"]


def md_fence(value: str | None) -> str:
    """``value`` as a fenced Markdown code block, shown as written and never interpreted
    (a note's markdown may hold HTML or links of its own).  The fence is one backtick
    longer than any run of three or more inside, so none can close it."""
    text = "" if value is None else str(value)
    runs = [len(m.group(0)) for m in re.finditer(r"`{3,}", text)]
    fence = "`" * max([3, *(n + 1 for n in runs)])
    body = text.rstrip("\n")
    return f"{fence}markdown\n{body}\n{fence}"
