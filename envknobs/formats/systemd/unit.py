"""Reading a systemd unit the way systemd 252 reads it, with source offsets kept.

Lines (``systemd.syntax(7)``, ``conf-parser.c``): blank lines and lines starting with
``#`` or ``;`` are comments; a line ending in an odd number of backslashes continues on
the next one, the backslash read as a space and the next line appended *with* its
leading blanks; comment lines inside a continued line are skipped, and a blank line
ends it.  ``[Section]`` headers; ``Key=value`` with the blanks around key and value
stripped.  A section may appear several times: its directives add up in file order.

Words (``extract_first_word`` with ``EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE``): split at
blanks; ``"`` and ``'`` quote anywhere in a word (``A="1 2"x`` is ``A=1 2x``); C escapes
(``\\n \\t \\\\ \\" \\' \\s \\xNN \\NNN \\uNNNN \\UNNNNNNNN`` ...) work inside and outside
quotes, single quotes included.  An unknown escape is an error in ``Environment=`` (the
rest of the line is ignored, the words before it stay) and kept as written in
``ExecStart=`` (``EXTRACT_CUNESCAPE_RELAX``); an unclosed quote is an error in both.

Each :class:`Word` keeps its span in the file (a word may cross a continuation), its
decoded text and, for the specifier pass that follows (``%%`` is ``%``; ``%n``, ``%i``,
``%h`` ... depend on the unit instance and host), whether it holds a specifier.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_BLANKS = " \t\n\r"
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
              "\\": "\\", '"': '"', "'": "'", "s": " "}
_HEX = {"x": 2, "u": 4, "U": 8}


@dataclass(frozen=True)
class Logical:
    """One logical line: its text and, for each character, the file offset it came from."""

    text: str
    offsets: tuple[int, ...]
    line: int  # the first physical line (1-based)
    end: int  # file offset just past the last physical line's line break
    start: int  # file offset of the first physical line's start

    def at(self, i: int) -> int:
        return self.offsets[i] if i < len(self.offsets) else (self.offsets[-1] + 1 if self.offsets else self.start)


@dataclass(frozen=True)
class Directive:
    section: str
    key: str
    value: str
    value_at: int  # index of the value in the logical text
    logical: Logical

    @property
    def line(self) -> int:
        return self.logical.line


@dataclass(frozen=True)
class Word:
    start: int  # file offsets of the word as written
    end: int
    text: str  # decoded: unquoted, unescaped (specifiers still in)
    quote: str  # the quote the word opens with ('"', "'" or ""), for keeping its style
    error: str | None = None  # why systemd rejects this word (and, in Environment=, the rest)


def _physical(text: str):
    """(line number, start, content end, next line start) for every physical line."""
    pos, n = 0, 1
    while pos < len(text):
        nl = text.find("\n", pos)
        nxt = len(text) if nl < 0 else nl + 1
        end = nxt - 1 if nl >= 0 else len(text)
        if end > pos and text[end - 1] == "\r":
            end -= 1
        yield n, pos, end, nxt
        pos, n = nxt, n + 1


def _odd_backslashes(s: str) -> bool:
    return (len(s) - len(s.rstrip("\\"))) % 2 == 1


@functools.lru_cache(maxsize=64)
def logical_lines(text: str) -> tuple[Logical, ...]:
    """The logical lines of ``text`` (comments dropped, continuations joined)."""
    out: list[Logical] = []
    chars: list[str] | None = None
    offsets: list[int] = []
    first = start = 0
    for n, pos, end, nxt in _physical(text):
        line = text[pos:end]
        stripped = line.lstrip(_BLANKS)
        if chars is None:
            if not stripped or stripped[0] in "#;":
                continue
            chars, offsets, first, start = [], [], n, pos
            skip = len(line) - len(stripped)
        else:
            if stripped and stripped[0] in "#;":
                continue
            skip = 0
        body = line[skip:]
        chars.extend(body)
        offsets.extend(range(pos + skip, end))
        if body and _odd_backslashes(body):
            chars[-1] = " "
            continue
        out.append(Logical("".join(chars), tuple(offsets), first, nxt, start))
        chars = None
    if chars is not None:
        out.append(Logical("".join(chars), tuple(offsets), first, len(text), start))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def directives(text: str) -> tuple[Directive, ...]:
    """Every ``Key=value`` of the unit with its section, in file order."""
    out: list[Directive] = []
    section = ""
    for lg in logical_lines(text):
        s = lg.text
        if s.startswith("["):
            section = s.strip()[1:-1] if s.rstrip().endswith("]") else ""
            continue
        eq = s.find("=")
        if eq < 0 or not section:
            continue
        i = eq + 1
        while i < len(s) and s[i] in _BLANKS:
            i += 1
        out.append(Directive(section, s[:eq].strip(), s[i:].rstrip(_BLANKS), i, lg))
    return tuple(out)


def _escape(s: str, i: int) -> tuple[str, int] | None:
    """The character a C escape at ``s[i] == '\\\\'`` stands for and the index after it."""
    c = s[i + 1] if i + 1 < len(s) else ""
    if c in _C_ESCAPES:
        return _C_ESCAPES[c], i + 2
    if c in _HEX:
        digits = s[i + 2 : i + 2 + _HEX[c]]
        if len(digits) == _HEX[c] and re.fullmatch(r"[0-9a-fA-F]+", digits):
            code = int(digits, 16)
            if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000:
                return chr(code), i + 2 + _HEX[c]
        return None
    digits = s[i + 1 : i + 4]
    if re.fullmatch(r"[0-7]{3}", digits) and 0 < int(digits, 8) < 256:
        return chr(int(digits, 8)), i + 4
    return None


def split_words(d: Directive, relax: bool) -> list[Word]:
    """The words of a directive's value; ``relax``: keep unknown escapes (ExecStart=)."""
    s, lg = d.logical.text, d.logical
    i, out = d.value_at, []
    end_of_value = d.value_at + len(d.value)
    while True:
        while i < end_of_value and s[i] in _BLANKS:
            i += 1
        if i >= end_of_value:
            return out
        begin, buf, quote, first_quote, error = i, [], "", s[i] if s[i] in "'\"" else "", None
        while i < end_of_value:
            c = s[i]
            if not quote and c in _BLANKS:
                break
            if c == "\\":
                found = _escape(s, i)
                if found is None:
                    if not relax or i + 1 >= end_of_value:
                        error = f"unknown escape {s[i:i + 2]!r}"
                        break
                    buf.append(s[i : i + 2])
                    i += 2
                    continue
                buf.append(found[0])
                i = found[1]
            elif quote and c == quote:
                quote, i = "", i + 1
            elif not quote and c in "'\"":
                quote, i = c, i + 1
            else:
                buf.append(c)
                i += 1
        if quote and error is None:
            error = "unbalanced quoting"
        out.append(Word(lg.at(begin), lg.at(i - 1) + 1, "".join(buf), first_quote, error))
        if error is not None:
            return out


_SPECIFIER = re.compile(r"%(.)?", re.S)


def resolve_specifiers(s: str) -> str | None:
    """``s`` with ``%%`` read as ``%``; None when it holds another specifier (its value
    depends on the unit's name, instance or host: computed, never rewritten)."""
    computed = False

    def sub(m: re.Match[str]) -> str:
        nonlocal computed
        if m.group(1) == "%":
            return "%"
        computed = True
        return ""

    out = _SPECIFIER.sub(sub, s)
    return None if computed else out
