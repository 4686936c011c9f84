"""Shell words: how bash reads a value, and how to write one that bash reads back exactly."""

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
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if raw.startswith(("\\\n", "\\\r\n"), i):  # line continuation
                i += 2 if raw[i + 1] == "\n" else 3
            else:
                out.append(raw[i + 1] if i + 1 < n else "\\")
                i += 2
        elif c == "'":
            j = raw.index("'", i + 1)
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            i += 1
            while raw[i] != '"':
                d = raw[i]
                if d == "\\" and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append(raw[i + 1])
                    i += 2
                    continue
                if d == "`" or (d == "$" and _NAME_START.match(raw, i + 1)):
                    return None
                out.append(d)
                i += 1
            i += 1
        elif c == "`" or (
            c == "$" and i + 1 < n and (_NAME_START.match(raw, i + 1) or raw[i + 1] in "'\"")
        ):
            return None
        elif c == "~" and (i == 0 or raw[i - 1] == ":" and not word):
            return None  # tilde expansion happens in assignment values
        elif word and c in "*?[{":
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


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
