"""Shell words: how bash reads a value (and how compose splits a word), and how to write
one that bash reads back exactly."""

from __future__ import annotations

import re

_BARE_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")
_NAME_START = re.compile(r"[A-Za-z0-9_{(@*#?$!-]")


def quote_value(value: str, style_of: str | None = None) -> str:
    """Render ``value`` as a shell word that bash reads back exactly.

    ``style_of`` is the raw text of the value being replaced: a single-quoted value stays
    single-quoted, a double-quoted one stays double-quoted when the new value needs no
    escaping there.
    """
    single = "'" + value.replace("'", "'\\''") + "'"
    if style_of and style_of.startswith("'"):
        return single
    if style_of and style_of.startswith('"') and not set(value) & set('$`"\\!'):
        return f'"{value}"'
    if _BARE_SAFE.match(value):
        return value
    return single


def decode_value(raw: str, word: bool = False) -> str | None:
    """The value bash assigns for the raw text after ``K=``; None if the shell computes it.

    With ``word``, ``raw`` is a command argument instead: unquoted glob and brace
    characters (``*``, ``?``, ``[``, ``{``) would be expanded there, so it is computed.
    """
    return _unquoted(raw, bash=True, word=word)


def literal_word(raw: str) -> str:
    """The text of a shell word as compose's splitting gives it (quotes and backslashes
    taken off; ``$`` kept: compose interpolates before it splits, and nothing is computed)."""
    return _unquoted(raw, bash=False) or ""  # only bash computes (None)


def _unquoted(raw: str, *, bash: bool, word: bool = False) -> str | None:
    """The one unquoting loop of both readers of a shell word: bash's (``bash``: a
    ``\\``-newline continues the line, expansions make the value computed: None) and
    compose's splitting (every backslash escapes the next character, ``$`` is text)."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if bash and raw.startswith(("\\\n", "\\\r\n"), i):  # line continuation
                i += 2 if raw[i + 1] == "\n" else 3
            else:
                out.append(raw[i + 1] if i + 1 < n else "\\")
                i += 2
        elif c == "'":
            j = raw.index("'", i + 1)
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            i = _double_quoted(raw, i + 1, out, bash)
            if i < 0:
                return None
        elif bash and _computed(raw, i, word):
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _double_quoted(raw: str, i: int, out: list[str], bash: bool) -> int:
    """The inside of ``"..."`` from ``i`` into ``out``; the index past the closing quote,
    or -1 where bash computes it.  Bash takes a backslash off only before ``$ ` " \\``
    and a newline (dropped with it) and expands ``$NAME`` and backticks; compose's
    splitting takes every backslash off."""
    n = len(raw)
    while i < n and raw[i] != '"':
        d = raw[i]
        if not bash:
            step = 2 if d == "\\" and i + 1 < n else 1
            out.append(raw[i + step - 1])
            i += step
        elif d == "\\" and raw[i + 1] in '$`"\\\n':
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
        elif d == "`" or (d == "$" and _NAME_START.match(raw, i + 1)):
            return -1
        else:
            out.append(d)
            i += 1
    if bash and i >= n:
        raise IndexError(f"no closing double quote in {raw!r}")
    return i + 1


def _computed(raw: str, i: int, word: bool) -> bool:
    """Whether bash expands the unquoted character at ``i`` (a substitution, a tilde in an
    assignment value, a glob or brace in a command argument)."""
    c, n = raw[i], len(raw)
    if c == "`" or c == "$" and i + 1 < n and (_NAME_START.match(raw, i + 1)
                                              or raw[i + 1] in "'\""):
        return True
    if c == "~" and (i == 0 or raw[i - 1] == ":" and not word):
        return True  # tilde expansion happens in assignment values
    return word and c in "*?[{"


_EXPANSION = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def expanded_names(raw: str) -> set[str]:
    """The variables the shell expands in a word's source text (``$K``, ``${K:-d}``,
    ``"...$K..."``), not those inside ``'...'``: the values a command line takes from the
    script itself, before any wrapper runs (``docker run --name $NAME``, ``bash -lc
    "vllm serve $MODEL"``)."""
    names: set[str] = set()
    i, double = 0, False
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and not double:
            close = raw.find("'", i + 1)
            i = len(raw) if close < 0 else close + 1
            continue
        if c == '"':
            double = not double
        elif c == "$":
            m = _EXPANSION.match(raw, i)
            if m is not None:
                names.add(m.group(1))
        i += 1
    return names
