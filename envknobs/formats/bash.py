"""The ``bash`` target format: env knobs in a serve script.

What it reads, in the order bash runs it:

* ``export K=V`` (several assignments per ``export`` are fine: ``export A=1 B=2``);
* plain assignments ``K=V`` (also several per line).  A plain assignment counts as the
  knob's value even though it is not exported by itself: serve scripts usually export it
  elsewhere (``export K``) or rely on ``set -a``;
* ``unset K`` drops the knob;
* ``K=V`` prefixes on the **launch command**, which win over everything above.  The
  launch command is the last command run with ``exec`` (``SGLANG_X=1 exec python -m
  sglang.launch_server ...``, with ``\\`` continuations); in a script without ``exec``,
  the last command that carries ``K=V`` prefixes.  ``env K=V`` arguments after ``exec``
  count as prefixes too.  Prefixes on other commands only affect that command and are
  ignored, and so is everything after the launch command (the server never sees it).

Values are decoded as bash does: single and double quotes, backslashes, ``$'...'`` is not
supported.  A value the shell computes (``$HOME/x``, ``$(nproc)``, backticks, ``~``) has
no static value: :meth:`BashFormat.parse` leaves it out, and ``set``/``unset`` of it refuse
with a :class:`~envknobs.formats.FormatError` (edit it by hand, or make it a literal).
The script is read as straight-line code: an ``export`` inside an ``if`` block counts.

What it writes: :meth:`BashFormat.set` edits only the value of the occurrence that takes
effect (the launch prefix if there is one, else the last assignment), keeping its quoting
style when the new value fits it.  A new knob becomes ``export K=V`` on a line of its own
after the last ``export`` line before the launch command, or, without one, before the
first command (after the shebang and comment header).  Values are written bare when that
is safe (``[A-Za-z0-9_@%+=:,./-]``), else single-quoted with ``'\\''`` for a quote, so
``$(touch /tmp/pwned)``, backticks, quotes and backslashes are data the shell never runs.
:meth:`BashFormat.unset` removes every occurrence the launch command would see: a whole
line when the assignment is alone on it, else just the word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field

from envknobs.formats import FormatError
from envknobs.formats._shell import Command
from envknobs.formats._shell import Word
from envknobs.formats._shell import scan_commands
from envknobs.formats._shell import strip_reserved
from envknobs.formats._text import check_assignment_args
from envknobs.formats._text import indent_at
from envknobs.formats._text import insert_line
from envknobs.formats._text import line_of
from envknobs.formats._text import line_start
from envknobs.formats._text import remove_lines
from envknobs.formats._text import verified

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


def decode_value(raw: str) -> str | None:
    """The value bash assigns for the raw text after ``K=``; None if the shell computes it."""
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
        elif c == "~" and (i == 0 or raw[i - 1] == ":"):
            return None  # tilde expansion happens in assignment values
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass
class _Statement:
    kind: str  # "assign" | "export" | "unset" | "command" | "other"
    command: Command
    # Words that carry assignments (all operands for export/unset).
    operands: list[Word] = field(default_factory=list)
    removable: bool = False
    is_exec: bool = False


@dataclass
class _Occurrence:
    name: str
    word: Word
    value_start: int
    value: str | None  # None: computed by the shell
    statement: _Statement


def _classify(command: Command) -> _Statement:
    words, understood = strip_reserved(command.words)
    removable = command.alone and len(words) == len(command.words)
    if not understood or not words:
        return _Statement("other", command)
    k = 0
    while k < len(words) and words[k].assignment():
        k += 1
    prefixes, rest = words[:k], words[k:]
    if not rest:
        return _Statement("assign", command, prefixes, removable)
    verb, args = rest[0].text, rest[1:]
    if verb in ("export", "unset"):
        options = [w.text for w in args if w.text.startswith("-")]
        if any(o not in ("--", "-v") for o in options):
            return _Statement("other", command)  # export -n / unset -f: not a value
        return _Statement(verb, command, [w for w in args if w.text not in options], removable)
    if verb == "exec":
        while args and args[0].text.startswith("-"):  # exec -a NAME / -c / -l
            args = args[2:] if args[0].text == "-a" else args[1:]
        if not args:
            return _Statement("other", command)  # `exec >log 2>&1`: only redirections
        if args[0].text == "env":
            extra = [w for w in args[1:] if not w.text.startswith("-")]
            k = 0
            while k < len(extra) and extra[k].assignment():
                k += 1
            prefixes = prefixes + extra[:k]
    return _Statement("command", command, prefixes, removable, is_exec=verb == "exec")


class _Script:
    """A scanned script: which assignment of each knob the launch command sees."""

    def __init__(self, text: str) -> None:
        self.text = text
        statements = [_classify(c) for c in scan_commands(text)]
        launch = next(
            (i for i in range(len(statements) - 1, -1, -1) if statements[i].is_exec), None
        )
        if launch is None:
            launch = next(
                (
                    i
                    for i in range(len(statements) - 1, -1, -1)
                    if statements[i].kind == "command" and statements[i].operands
                ),
                None,
            )
        self.launch = statements[launch] if launch is not None else None
        self.before = statements if launch is None else statements[:launch]
        self.effective: dict[str, _Occurrence] = {}
        for st in self.before:
            if st.kind == "unset":
                for w in st.operands:
                    self.effective.pop(w.text, None)
            elif st.kind in ("assign", "export"):
                for occ in self._occurrences_in(st):
                    self.effective[occ.name] = occ
        if self.launch is not None:
            for occ in self._occurrences_in(self.launch):
                self.effective[occ.name] = occ

    def _occurrences_in(self, st: _Statement) -> list[_Occurrence]:
        found = []
        for w in st.operands:
            parsed = w.assignment()
            if parsed is None:
                continue
            name, append, value_start = parsed
            value = None if append else decode_value(self.text[value_start : w.end])
            found.append(_Occurrence(name, w, value_start, value, st))
        return found

    def occurrences(self, name: str) -> list[_Occurrence]:
        """Every assignment of ``name`` the launch command could see, in file order."""
        statements = self.before + ([self.launch] if self.launch else [])
        return [
            occ
            for st in statements
            if st.kind in ("assign", "export", "command")
            for occ in self._occurrences_in(st)
            if occ.name == name
        ]

    def insertion_point(self, name: str) -> tuple[int, str]:
        """Where a new ``export`` line goes, and its indentation."""
        exports = [st for st in self.before if st.kind == "export"]
        commands = [st for st in self.before if st.kind not in ("assign", "export")]
        if exports:
            anchor = exports[-1].command
            pos = anchor.line_end
        elif commands or self.launch is not None:
            anchor = (commands or [self.launch])[0].command  # type: ignore[list-item]
            pos = line_start(self.text, anchor.start)
        else:
            return len(self.text), ""
        # A later `unset K` would cancel the new line: go after it.
        for st in self.before:
            unsets_it = st.kind == "unset" and any(w.text == name for w in st.operands)
            if unsets_it and st.command.start >= pos:
                anchor, pos = st.command, st.command.line_end
        return pos, indent_at(self.text, anchor.start)


def _remove_word(text: str, start: int, end: int) -> str:
    """Delete one word of a command with the blanks (and continuations) that follow it."""
    j = end
    while True:
        if j < len(text) and text[j] in " \t":
            j += 1
        elif text.startswith(("\\\n", "\\\r\n"), j):
            j += 2 if text[j + 1] == "\n" else 3
        else:
            break
    if j < len(text) and text[j] not in "\r\n;&|#":
        return text[:start] + text[j:]
    k = start  # the last word of its command: take the blanks before it instead
    while k > 0 and text[k - 1] in " \t":
        k -= 1
    return text[:k] + text[end:]


class BashFormat:
    """Serve scripts; see the module docstring for the rules."""

    name = "bash"

    def parse(self, text: str) -> dict[str, str]:
        """Knob -> value the launch command sees (knobs the shell computes are left out)."""
        return self._values(_Script(text))

    @staticmethod
    def _values(script: _Script) -> dict[str, str]:
        return {k: occ.value for k, occ in script.effective.items() if occ.value is not None}

    def set(self, text: str, knob: str, value: str) -> str:
        """Set ``knob`` to ``value``; raises KnobError on a bad name/value, FormatError
        when the knob's value is computed by the shell or the script cannot be scanned."""
        check_assignment_args(knob, value)
        script = _Script(text)
        occ = script.effective.get(knob)
        if occ is None:
            pos, indent = script.insertion_point(knob)
            out = insert_line(text, pos, f"{indent}export {knob}={quote_value(value)}")
            return verified(self._values(script), self.parse(out), knob, value, out)
        if occ.value == value:
            return text
        if occ.value is None:
            raise FormatError(
                f"line {line_of(text, occ.word.start)}: {knob} is computed by the shell "
                f"({occ.word.text!r}); make it a literal value or edit it by hand"
            )
        raw = text[occ.value_start : occ.word.end]
        out = text[: occ.value_start] + quote_value(value, style_of=raw) + text[occ.word.end :]
        return verified(self._values(script), self.parse(out), knob, value, out)

    def unset(self, text: str, knob: str) -> str:
        """Remove every assignment of ``knob`` the launch command sees (same text if none).

        Raises FormatError when an ``export K=V`` to delete shares its line with other
        commands (``export K=V; cd /x``): that line is left for the operator to edit.
        """
        check_assignment_args(knob)
        script = _Script(text)
        occurrences = script.occurrences(knob)
        if not occurrences:
            return text
        # (start, end, whole lines?) of each piece to delete, applied from the end back
        # so that earlier offsets stay valid.
        cuts: list[tuple[int, int, bool]] = []
        by_statement: dict[int, list[_Occurrence]] = {}
        for occ in occurrences:
            by_statement.setdefault(id(occ.statement), []).append(occ)
        for group in by_statement.values():
            st = group[0].statement
            doomed = {id(o.word) for o in group}
            left = [w for w in st.operands if id(w) not in doomed]
            if st.kind in ("assign", "export") and not left:
                if not st.removable:
                    raise FormatError(
                        f"line {line_of(text, st.command.start)}: {knob} is set on a line "
                        "shared with other commands; edit that line by hand"
                    )
                cuts.append((st.command.start, st.command.end, True))
            else:
                cuts.extend((o.word.start, o.word.end, False) for o in group)
        out = text
        for start, end, whole_lines in sorted(cuts, reverse=True):
            out = remove_lines(out, start, end) if whole_lines else _remove_word(out, start, end)
        return verified(self._values(script), self.parse(out), knob, None, out)
