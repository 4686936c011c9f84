"""python-dotenv's grammar, read with source offsets (the ``dotenv`` format's reader).

The parser mirrors ``dotenv.parser``: ``K=V`` lines, an optional ``export`` prefix, single-
or double-quoted values (which may span lines), unquoted values with `` #`` comments
stripped, ``#`` comment lines; a line python-dotenv cannot parse is skipped, as it skips
it.  Each :class:`Binding` keeps where its key, ``=`` and value are, so that the format's
edits are surgical (:mod:`envknobs.formats.dotenv`).
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from envknobs.formats.common.sniff import might_be_foreign
from envknobs.formats.common.sniff import refuse_foreign

# The regular expressions of python-dotenv's parser.
_MULTILINE_WS = re.compile(r"\s*", re.MULTILINE)
_WS = re.compile(r"[^\S\r\n]*")
_EXPORT = re.compile(r"(?:export[^\S\r\n]+)?")
_SINGLE_QUOTED_KEY = re.compile(r"'([^']+)'")
_UNQUOTED_KEY = re.compile(r"([^=\#\s]+)")
_EQUAL_SIGN = re.compile(r"(=[^\S\r\n]*)")
_SINGLE_QUOTED_VALUE = re.compile(r"'((?:\\.|[^'\\])*)'", re.DOTALL)
_DOUBLE_QUOTED_VALUE = re.compile(r'"((?:\\.|[^"\\])*)"', re.DOTALL)
_UNQUOTED_VALUE = re.compile(r"([^\r\n]*)")
_COMMENT = re.compile(r"(?:[^\S\r\n]*#[^\r\n]*)?")
_END_OF_LINE = re.compile(r"[^\S\r\n]*(?:\r\n|\n|\r|$)")
_REST_OF_LINE = re.compile(r"[^\r\n]*(?:\r|\n|\r\n)?")
_DOUBLE_QUOTE_ESCAPES = re.compile(r"\\([\\'\"abfnrtv])")
_SINGLE_QUOTE_ESCAPES = re.compile(r"\\([\\'])")
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class Binding:
    key: str
    value: str | None
    start: int  # first character of the binding (after blank lines)
    end: int  # just past its line break
    eq: int  # offset of '=' (-1 if none)
    value_start: int
    value_end: int
    quote: str  # "'", '"' or "" (unquoted)


class _NoMatch(Exception):
    pass


def _match(regex: re.Pattern[str], text: str, pos: int) -> re.Match[str]:
    m = regex.match(text, pos)
    if m is None:
        raise _NoMatch
    return m


@functools.lru_cache(maxsize=32)
def read_bindings(text: str) -> tuple[Binding, ...]:
    """Every well-formed ``K[=V]`` binding, in order, as python-dotenv reads them.

    Cached on the text: an edit reads the file before it and re-reads its result to
    verify it, and a command editing many knobs of one file chains such edits, so the
    same texts are read again and again (the bindings are frozen: safe to share)."""
    bindings = tuple(_scan(text))
    if might_be_foreign(text):
        refuse_foreign(text, "dotenv", binding_line_numbers(text, bindings))
    return bindings


def binding_line_numbers(text: str, bindings: tuple[Binding, ...]) -> tuple[int, ...]:
    """The line numbers that hold a ``K=V`` binding (a quoted value may span several)."""
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    lines: list[int] = []
    for b in bindings:
        if b.value is not None:
            first = bisect.bisect_right(starts, b.start)
            lines += range(first, bisect.bisect_right(starts, max(b.start, b.end - 1)) + 1)
    return tuple(lines)


def _scan(text: str) -> list[Binding]:
    out: list[Binding] = []
    pos = 1 if text.startswith("\ufeff") else 0
    while pos < len(text):
        pos = _MULTILINE_WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            break
        start = pos
        try:
            pos = _EXPORT.match(text, pos).end()  # type: ignore[union-attr]
            if text.startswith("#", pos):
                key = None
            else:
                m = _match(
                    _SINGLE_QUOTED_KEY if text.startswith("'", pos) else _UNQUOTED_KEY, text, pos
                )
                key, pos = m.group(1), m.end()
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            value, eq, vstart, vend, quote = None, -1, pos, pos, ""
            if key is not None and text.startswith("=", pos):
                eq = pos
                m = _match(_EQUAL_SIGN, text, pos)
                pos = vstart = vend = m.end()
                nxt = text[pos : pos + 1]
                if len(m.group(1)) > 1 and nxt == "#":
                    # `K= # comment`: empty value; a new one goes right after '=', so
                    # the blank before '#' keeps the comment a comment.
                    value, vstart, vend = "", eq + 1, eq + 1
                elif nxt in ("'", '"'):
                    regex = _SINGLE_QUOTED_VALUE if nxt == "'" else _DOUBLE_QUOTED_VALUE
                    m = _match(regex, text, pos)
                    pos = vend = m.end()
                    value, quote = _unescape(m.group(1), nxt), nxt
                elif nxt in ("", "\n", "\r"):
                    value = ""
                else:
                    part = _match(_UNQUOTED_VALUE, text, pos).group(1)
                    value = re.sub(r"\s+#.*", "", part).rstrip()
                    pos += len(part)
                    vend = vstart + len(value)
            pos = _COMMENT.match(text, pos).end()  # type: ignore[union-attr]
            pos = _match(_END_OF_LINE, text, pos).end()
        except _NoMatch:
            pos = _REST_OF_LINE.match(text, pos).end()  # type: ignore[union-attr]
            continue
        if key is not None:
            out.append(Binding(key, value, start, pos, eq, vstart, vend, quote))
    return out


def _unescape(raw: str, quote: str) -> str:
    if quote == "'":
        return _SINGLE_QUOTE_ESCAPES.sub(lambda m: m.group(1), raw)
    return _DOUBLE_QUOTE_ESCAPES.sub(lambda m: _C_ESCAPES.get(m.group(1), m.group(1)), raw)
