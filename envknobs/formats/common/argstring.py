"""Launch flags kept inside an env string: ``VLLM_ARGS="--port 8000 --tp 2"``.

Operators often keep a server's flags in one variable that the launch expands into
arguments: ``Environment="SGLANG_OPTS=--port 30000 --tp 2"`` with ``ExecStart=... $SGLANG_OPTS``
in a systemd unit, ``OPTS="..."`` with ``python -m sglang.launch_server $OPTS`` in a
script, ``VLLM_ARGS=...`` in an ``EnvironmentFile``/dotenv file.  Such a variable is an
*argument string* (:class:`ArgString`); its flags are read with the launch reader of
:mod:`.launch` (the same catalog rules: switches, ``--no-x``, ``nargs``, last one wins)
and are knobs named ``--flag`` of the target, like flags on a command line.

Which strings are read.  The readers that expand a string differ: bash splits ``$OPTS``
at blanks and globs the words (no quote removal), systemd splits ``$OPTS`` at blanks and
removes quotes, a Python entrypoint may ``shlex.split`` it.  They agree exactly on a
string whose words are *plain* (``[A-Za-z0-9_@+=:,./-]``): only such strings are read,
and only such values are written into them.  A string with another word (a JSON value,
a quote, ``$``, a glob) stays opaque, as before: ``target show`` says so.  A string is
also only read where its text in the file is its value character for character (the
quotes around it aside), so that every edit is a splice of the file's own bytes:

* a value is rewritten in its word (``--tp 2`` -> ``--tp 4``, ``--tp=2`` -> ``--tp=4``);
* an ``--unset`` removes the flag's words with the blank after them (before them when
  they are last), and its place keeps an anchor so a revert puts the bytes back;
* a new flag goes at the end of the string (where the format decides it goes there).

Each format says where its strings are and which place wins; the decisions that are the
same everywhere (which string holds a flag, refusing where several places could take
effect) are :func:`owner` here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable
from typing import Sequence

from envknobs.formats.common.text import holds_flags
from envknobs.formats.common.word_edit import anchor_of
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import Place
from envknobs.formats.common.text import line_of

PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+\Z")
_PIECE = re.compile(r"[^ \t\r\n]+")


@dataclass(frozen=True)
class ArgString:
    """A variable whose value the launch expands into argument words."""

    name: str
    start: int  # file offsets of the value as written, quotes excluded
    end: int
    where: str  # "Environment= (line 4), expanded by $OPTS on ExecStart= (line 9)"
    pieces: tuple[Word, ...]  # its words, at their file offsets

    @property
    def ident(self) -> str:
        return f"string {self.name}"


def read_string(text: str, name: str, start: int, end: int, value: str, where: str
                ) -> tuple[ArgString | None, str | None]:
    """The string at ``text[start:end]`` holding ``value``; (None, why) where it cannot be
    read exactly: its text is not its value, or a word is not plain."""
    if text[start:end] != value:
        return None, f"{name} is written with escapes the ledger does not edit inside"
    pieces = tuple(Word(start + m.start(), start + m.end(), m.group(0))
                   for m in _PIECE.finditer(value))
    odd = [w.text for w in pieces if not PLAIN.match(w.text)]
    if odd:
        return None, (f"{name} holds {odd[0]!r}, which bash, systemd and Python split "
                      "differently: its flags are not read")
    return ArgString(name, start, end, where, pieces), None


def uses_of(s: ArgString, lookup: Callable[[str], object]) -> list[FlagUse]:
    """Every flag in the string, in order (the reader of :mod:`.launch`)."""
    return scan_flags(list(s.pieces), lookup)


def last_uses(s: ArgString, lookup) -> dict[str, FlagUse]:
    out: dict[str, FlagUse] = {}
    for use in uses_of(s, lookup):
        out.pop(use.knob, None)
        out[use.knob] = use
    return out


class StringFlagConflict(FormatError):
    """A flag that more than one place could set: every place is named (``file:line``
    through :meth:`render`), nothing is picked."""

    def __init__(self, knob: str, lines: Sequence[tuple[int, str]], hint: str,
                 reason: str = "is set in more than one place") -> None:
        self.knob, self.lines, self.hint, self.reason = knob, tuple(lines), hint, reason
        super().__init__(self.render(None))

    def render(self, path: str | None) -> str:
        where = "; ".join(f"{path}:{n} ({what})" if path else f"line {n} ({what})"
                          for n, what in self.lines)
        return f"{self.knob} {self.reason}: {where}. Not picking one: {self.hint}"


def owner(knob: str, holders: Sequence[tuple[ArgString, FlagUse]],
          elsewhere: Sequence[tuple[int, str]], text: str) -> tuple[ArgString, FlagUse] | None:
    """The one string that holds ``knob`` (None: no string does); StringFlagConflict where
    it is in several strings, or in a string and on the command line (``elsewhere``)."""
    if len(holders) + len(elsewhere) > 1 and holders:
        lines = [(line_of(text, u.word.start), f"in {s.name}: {text[u.word.start:u.end]}")
                 for s, u in holders]
        raise StringFlagConflict(knob, [*lines, *elsewhere],
                                 "remove the ones that should not count by hand, then record "
                                 "the flag again")
    return holders[0] if holders else None


def check_value(knob: str, value: str | None, s: ArgString) -> None:
    """FormatError for a value that cannot be written inside the string: one that every
    reader would split or unquote differently."""
    if value is not None and not PLAIN.match(value.replace(" ", "")):
        raise FormatError(f"{knob}={value!r} cannot be written inside {s.name}: bash, systemd "
                          f"and Python split such a word differently; move {knob} onto the "
                          "command line by hand")


def set_in(text: str, s: ArgString, use: FlagUse, knob: str, value: str, flag) -> str:
    """``text`` with the flag's value rewritten in the string."""
    from envknobs.formats.common.launch import bool_of

    check_value(knob, value, s)
    w = use.word
    if use.form == "equals":
        cut = w.start + w.text.index("=") + 1
        return text[:cut] + value + text[w.end :]
    if use.form == "space" and len(use.values) == 1:
        v = use.values[0]
        return text[: v.start] + value + text[v.end :]
    if use.form == "nargs" and use.values:
        return text[: use.values[0].start] + " ".join(value.split()) + text[use.values[-1].end :]
    wanted = bool_of(value)
    if wanted is None or use.form not in ("switch", "negated"):
        raise FormatError(f"line {line_of(text, w.start)}: {knob} is a switch in {s.name} "
                          f"(present or absent), not {value!r}")
    if wanted == (use.form == "switch"):
        return text
    if not wanted and not getattr(flag, "negatable", False):
        raise FormatError(f"line {line_of(text, w.start)}: {knob} is a switch without a --no- "
                          "form; unset it")
    return text[: w.start] + (knob if wanted else "--no-" + knob[2:]) + text[w.end :]


def cut_of(s: ArgString, use: FlagUse) -> tuple[int, int]:
    """What removing the flag's words deletes: the blank after them (one on their line),
    else the blank before them, else just the words."""
    start, end = use.word.start, use.end
    after = [w for w in s.pieces if w.start >= end]
    before = [w for w in s.pieces if w.end <= start]
    return ((start, after[0].start) if after else
            (before[-1].end, end) if before else (start, end))


def remove_in(text: str, s: ArgString, use: FlagUse) -> str:
    """``text`` without the flag's words; FormatError where the string would then hold no
    flag first (empty, or a positional first): it would be no string of flags any more,
    and its variable a knob again."""
    start, end = cut_of(s, use)
    rest = text[s.start : start] + text[end : s.end]
    if not holds_flags(rest):
        raise FormatError(f"line {line_of(text, use.word.start)}: removing {use.knob} would "
                          f"leave {s.name} {'empty' if not rest.strip() else 'without a flag first'}"
                          f"; edit {s.name} by hand")
    return text[:start] + text[end:]


def add_in(text: str, s: ArgString, words: str) -> str:
    """``words`` at the end of the string (after its last word)."""
    check_value(words.split()[0], words, s)
    if not s.pieces:
        return text[: s.start] + words + text[s.start :]
    last = s.pieces[-1].end
    return text[:last] + " " + words + text[last:]


def place_of(text: str, s: ArgString, use: FlagUse, value: str | None) -> Place:
    """The flag's place: the line of its word in the file, an anchor to put it back."""
    start, end = cut_of(s, use)
    before = [w.start for w in s.pieces if w.end <= start]
    after = [w.end for w in s.pieces if w.start >= end]
    anchor = {"container": s.ident,
              **anchor_of(text, (start, end), before[-1] if before else s.start,
                          after[0] if after else end),
              # the whole string around it: where it goes back while nothing else of
              # the string changed (a string repeats words: --x 0 --y 0)
              "prefix": text[s.start : start], "suffix": text[end : s.end]}
    return Place(knob=use.knob, key=s.ident, line=line_of(text, use.word.start),
                 kind="string-flag", scope=s.where, value=value,
                 computed=value is None and use.form != "switch", launch=None,
                 raw=text[use.word.start : use.end], anchor=anchor)


def put_back_in(text: str, strings: Sequence[ArgString], anchor: dict) -> str | None:
    """Put a removed flag back at its anchor in the string it was in (None: not found).

    The place is where the text before it (from the previous word) ends and the text
    after it (to the end of the next word) starts -- the string's end where nothing
    followed -- found exactly once in the string: a string repeats words (``--x 0 --y 0``)
    more often than a command line does."""
    s = next((x for x in strings if x.ident == anchor.get("container")), None)
    before, removed, after = (anchor.get(k) for k in ("before", "removed", "after"))
    if s is None or not all(isinstance(x, str) for x in (before, removed, after)) or not removed:
        return None
    prefix, suffix = anchor.get("prefix"), anchor.get("suffix")
    if isinstance(prefix, str) and isinstance(suffix, str) and \
            text[s.start : s.end] == prefix + suffix:
        at = s.start + len(prefix)
        return text[:at] + removed + text[at:]
    ends = [s.start] if not before else \
        [i + len(before) for i in range(s.start, s.end - len(before) + 1)
         if text.startswith(before, i)]
    hits = [p for p in ends if (text.startswith(after, p) and p + len(after) <= s.end
                                if after else p == s.end)]
    if len(hits) != 1:
        return None
    return text[: hits[0]] + removed + text[hits[0] :]
