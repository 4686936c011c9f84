"""A small scanner for bash scripts: simple commands with the offsets of their words.

It is not a bash parser.  It knows enough of the shell's lexical rules to find, in a
serve script, every simple command and the exact source span of each word: quotes
(``'...'``, ``"..."``, ``$'...'``), backslash escapes and ``\\``-newline continuations,
``$(...)``, ``${...}``, backticks, comments, control operators (``;``, ``&&``, ``|``,
...), redirections and here-documents (whose bodies are skipped, not read as commands).
Compound commands (``if``/``for``/functions) are read as straight-line code: a leading
reserved word such as ``then`` or ``do`` is stepped over and the command after it is
taken at face value.

Offsets are into the text as given; a CR before LF counts as part of the line break, so
CRLF scripts read the way their author meant them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field

from envknobs.formats import FormatError
from envknobs.formats._text import line_of

_METACHARS = frozenset(" \t\r\n;&|()<>")
# Words that open or continue a compound command; the command proper follows them.
_LEADING_RESERVED = frozenset(
    {"then", "else", "elif", "do", "if", "while", "until", "!", "{", "time"}
)
# Words after which nothing on the command is a simple command we understand.
_OPAQUE_RESERVED = frozenset({"for", "case", "select", "function", "[[", "(("})
_REDIRECTION_RE = re.compile(r"&>>?|<<<|<<-?|<>|<&|>&|>>|>\||<|>")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")


@dataclass
class Word:
    start: int
    end: int
    text: str

    def assignment(self) -> tuple[str, bool, int] | None:
        """``(name, is_append, value_offset)`` if the word is ``NAME=value``."""
        m = ASSIGNMENT_RE.match(self.text)
        if m is None:
            return None
        return m.group(1), bool(m.group(2)), self.start + m.end()


@dataclass
class Command:
    """One simple command: its words (redirections left out) and where its line is."""

    words: list[Word] = field(default_factory=list)
    # Whether it was the only thing on its logical line (no `;`, `&&`, reserved word,
    # redirection): only then may a whole line be deleted on its behalf.
    alone: bool = True
    # Offset just past the line break (and any here-doc bodies) ending its logical line.
    line_end: int = -1

    @property
    def start(self) -> int:
        return self.words[0].start

    @property
    def end(self) -> int:
        return self.words[-1].end


# Deepest $(...) / ${...} nesting the scanner follows before refusing the file.
MAX_NESTING = 100


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.commands: list[Command] = []
        self.line_commands: list[Command] = []
        self.current = Command()
        self.heredocs: list[tuple[str, bool, int]] = []  # (delimiter, <<-, offset)
        self.nesting = 0  # open $(...) / ${...} around the scan position

    def fail(self, pos: int, what: str) -> FormatError:
        return FormatError(f"line {line_of(self.text, pos)}: {what}")

    # -- skipping quoted and nested constructs -------------------------------------
    def skip_single(self, i: int) -> int:
        j = self.text.find("'", i + 1)
        if j < 0:
            raise self.fail(i, "unterminated single quote")
        return j + 1

    def skip_ansi_c(self, i: int) -> int:  # $'...' with backslash escapes; i at the quote
        j = i + 1
        while j < self.n:
            if self.text[j] == "\\":
                j += 2
            elif self.text[j] == "'":
                return j + 1
            else:
                j += 1
        raise self.fail(i, "unterminated $'...' quote")

    def skip_double(self, i: int) -> int:
        j = i + 1
        while j < self.n:
            c = self.text[j]
            if c == "\\":
                j += 2
            elif c == '"':
                return j + 1
            elif c == "$" and self.text.startswith(("$(", "${"), j):
                j = self.skip_dollar(j)
            elif c == "`":
                j = self.skip_backtick(j)
            else:
                j += 1
        raise self.fail(i, "unterminated double quote")

    def skip_backtick(self, i: int) -> int:
        j = i + 1
        while j < self.n:
            if self.text[j] == "\\":
                j += 2
            elif self.text[j] == "`":
                return j + 1
            else:
                j += 1
        raise self.fail(i, "unterminated backquote")

    def skip_dollar(self, i: int) -> int:
        """Skip ``$(...)``, ``$((...))`` or ``${...}`` starting at ``i``.

        Nesting deeper than :data:`MAX_NESTING` is refused (no serve script needs it, and
        each level is a recursion of this scanner).
        """
        if self.nesting >= MAX_NESTING:
            raise self.fail(i, f"$(...) / ${{...}} nested more than {MAX_NESTING} deep")
        self.nesting += 1
        try:
            return self._skip_dollar(i)
        finally:
            self.nesting -= 1

    def _skip_dollar(self, i: int) -> int:
        opener = self.text[i + 1]
        closer = ")" if opener == "(" else "}"
        depth = 0
        j = i + 1
        while j < self.n:
            c = self.text[j]
            if c == "\\":
                j += 2
                continue
            if c == "'" and opener == "(":
                j = self.skip_single(j)
                continue
            if c == '"':
                j = self.skip_double(j)
                continue
            if c == "`":
                j = self.skip_backtick(j)
                continue
            if c == "$" and self.text.startswith(("$(", "${"), j):
                j = self.skip_dollar(j)
                continue
            if c == opener:
                depth += 1
            elif c == closer:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise self.fail(i, f"unterminated ${opener}")

    def read_word(self, i: int) -> int:
        """Offset just past the word starting at ``i``."""
        text = self.text
        while i < self.n and text[i] not in _METACHARS:
            c = text[i]
            if c == "\\":
                i += 2
            elif c == "'":
                i = self.skip_single(i)
            elif c == '"':
                i = self.skip_double(i)
            elif c == "`":
                i = self.skip_backtick(i)
            elif c == "$" and i + 1 < self.n and text[i + 1] in "({":
                i = self.skip_dollar(i)
            elif c == "$" and i + 1 < self.n and text[i + 1] == "'":
                i = self.skip_ansi_c(i + 1)
            else:
                i += 1
        return min(i, self.n)

    # -- commands ---------------------------------------------------------------------
    def end_command(self, separated: bool) -> None:
        if self.current.words:
            self.commands.append(self.current)
            self.line_commands.append(self.current)
        if separated:
            for cmd in self.line_commands:
                cmd.alone = False
            self.current = Command(alone=False)
        else:
            self.current = Command()

    def end_line(self, after_newline: int) -> int:
        self.end_command(separated=False)
        end = self.skip_heredocs(after_newline)
        for cmd in self.line_commands:
            cmd.line_end = end
        self.line_commands = []
        self.current = Command()
        return end

    def skip_heredocs(self, i: int) -> int:
        for delimiter, strip_tabs, opened in self.heredocs:
            while True:
                if i >= self.n:
                    # bash only warns; but a knob written after it would land inside it.
                    raise self.fail(opened, f"here-document is not closed by {delimiter!r}")
                nl = self.text.find("\n", i)
                stop = self.n if nl < 0 else nl + 1
                line = self.text[i:stop].rstrip("\n").rstrip("\r")
                i = stop
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self.heredocs = []
        return i

    def redirection(self, i: int) -> int:
        """Step over a redirection operator and its target word; returns the new offset."""
        m = _REDIRECTION_RE.match(self.text, i)
        op = m.group(0) if m else self.text[i]
        # An io-number like the 2 in 2>&1 was read as a word: it is part of the redirection.
        words = self.current.words
        if words and words[-1].end == i and words[-1].text.isdigit():
            words.pop()
        self.current.alone = False
        j = i + len(op)
        while j < self.n and self.text[j] in " \t":
            j += 1
        end = self.read_word(j)
        if op in ("<<", "<<-") and end > j:
            delimiter = re.sub(r"""['"\\]""", "", self.text[j:end])
            self.heredocs.append((delimiter, op == "<<-", i))
        return end

    def scan(self) -> list[Command]:
        text, i = self.text, 0
        while i < self.n:
            c = text[i]
            if c in " \t\r":
                i += 1
            elif c == "\\" and text.startswith(("\\\n", "\\\r\n"), i):
                i += 2 if text[i + 1] == "\n" else 3
            elif c == "#":
                nl = text.find("\n", i)
                i = self.n if nl < 0 else nl
            elif c == "\n":
                i = self.end_line(i + 1)
            elif c in "<>" or text.startswith("&>", i):
                i = self.redirection(i)
            elif c in ";&|()":
                self.end_command(separated=True)
                i += 2 if text[i : i + 2] in ("&&", "||", ";;", "|&") else 1
            else:
                end = self.read_word(i)
                self.current.words.append(Word(i, end, text[i:end]))
                i = end
        self.end_line(self.n)
        return self.commands


def scan_commands(text: str) -> list[Command]:
    """Every simple command of ``text`` in order; raises FormatError on unbalanced quotes."""
    return _Scanner(text).scan()


def strip_reserved(words: list[Word]) -> tuple[list[Word], bool]:
    """Drop leading reserved words (``then``, ``do``...); False if the command is opaque."""
    k = 0
    while k < len(words) and words[k].text in _LEADING_RESERVED:
        k += 1
    if k < len(words) and words[k].text in _OPAQUE_RESERVED:
        return [], False
    return words[k:], True
