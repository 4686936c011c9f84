"""A lexer for bash scripts: words with their exact source spans, operators, redirections.

It is not a bash parser (that is :mod:`envknobs.formats.bash.tree`, built on these
tokens).  It knows the shell's lexical rules well enough for serve scripts: quotes
(``'...'``, ``"..."``, ``$'...'``), backslash escapes and ``\\``-newline continuations,
``$(...)``, ``$((...))``, ``${...}``, process substitutions ``<(...)`` / ``>(...)`` (a
word, alone or inside one: ``done < <(docker logs -f "$name" 2>&1)``), backticks, comments, control operators (``;``, ``&&``,
``|``, ``;;``...), redirections (with io-numbers, ``2>&1``) and here-documents, whose
bodies are skipped and remembered (text in them is never a command).  Three constructs
are read as one token because their insides are not commands: array assignments
``NAME=( ... )`` (with their element words, comments and newlines allowed inside),
``[[ ... ]]`` tests and ``(( ... ))`` arithmetic.

Offsets are into the text as given; a CR before LF counts as part of the line break, so
CRLF scripts read the way their author meant them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import MAX_NESTING
from envknobs.formats.common.text import line_of

_METACHARS = frozenset(" \t\r\n;&|()<>")
# A run of characters that end no word and start no quote or expansion: read_word skips
# it in one step (most of a script's text is such runs).
_PLAIN_RUN = re.compile(r"[^ \t\r\n;&|()<>\\'\"`$]+")
_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "(", ")")
_REDIRECTION_RE = re.compile(r"&>>?|<<<|<<-?|<>|<&|>&|>>|>\||<|>")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_ARRAY_OPEN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=\Z")


# Word text -> (name, is_append, offset of the value in the text), or None: a pure
# function of the text, kept for the last few thousand texts seen.
_ASSIGNMENTS: dict[str, tuple[str, bool, int] | None] = {}
_ASSIGNMENTS_KEPT = 8192
_NOT_SEEN = object()


@dataclass
class Word:
    """One shell word: its span and raw text; ``array`` holds the elements of ``A=( ... )``."""

    start: int
    end: int
    text: str
    array: list[Word] | None = None

    def assignment(self) -> tuple[str, bool, int] | None:
        """``(name, is_append, value_offset)`` if the word is ``NAME=value``.

        Asked of each word again and again (classifying, following, selecting), so the
        match of each distinct text is kept (:data:`_ASSIGNMENTS`)."""
        found = _ASSIGNMENTS.get(self.text, _NOT_SEEN)
        if found is _NOT_SEEN:
            m = ASSIGNMENT_RE.match(self.text)
            found = None if m is None else (m.group(1), bool(m.group(2)), m.end())
            if len(_ASSIGNMENTS) >= _ASSIGNMENTS_KEPT:
                _ASSIGNMENTS.clear()
            _ASSIGNMENTS[self.text] = found
        return None if found is None else (found[0], found[1], self.start + found[2])


@dataclass
class Token:
    """``kind``: ``word``, ``op`` (control operator), ``nl`` (line break) or ``redir``."""

    kind: str
    start: int
    end: int
    text: str
    word: Word | None = None


@dataclass
class Lexed:
    tokens: list[Token] = field(default_factory=list)
    heredocs: list[tuple[int, int]] = field(default_factory=list)  # body spans




class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.out = Lexed()
        self.pending: list[tuple[str, bool, int]] = []  # here-docs: delimiter, <<-, offset
        self.nesting = 0  # open $(...) / ${...} around the scan position

    def fail(self, pos: int, what: str) -> FormatError:
        return FormatError(f"line {line_of(self.text, pos)}: {what}")

    # -- skipping quoted and nested constructs -------------------------------------
    def skip_single(self, i: int) -> int:
        j = self.text.find("'", i + 1)
        if j < 0:
            raise self.fail(i, "unterminated single quote")
        return j + 1

    def skip_escaped(self, i: int, close: str, what: str) -> int:
        """Skip a ``$'...'`` quote or a backquote (backslash escapes inside); i at the opener."""
        j = i + 1
        while j < self.n:
            if self.text[j] == "\\":
                j += 2
            elif self.text[j] == close:
                return j + 1
            else:
                j += 1
        raise self.fail(i, f"unterminated {what}")

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
                j = self.skip_escaped(j, "`", "backquote")
            else:
                j += 1
        raise self.fail(i, "unterminated double quote")

    def skip_dollar(self, i: int) -> int:
        """Skip ``$(...)``, ``$((...))`` or ``${...}`` starting at ``i``.

        Nesting deeper than :data:`MAX_NESTING` is refused (no serve script needs it, and
        each level is a recursion of this lexer).
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
                j = self.skip_escaped(j, "`", "backquote")
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
        raise self.fail(i, f"unterminated {'$' if self.text[i] == '$' else self.text[i]}{opener}"
                        + (" (process substitution)" if self.text[i] in "<>" else ""))

    def read_word(self, i: int, extra_stops: str = "") -> int:
        """Offset just past the word starting at ``i``."""
        text = self.text
        plain = _PLAIN_RUN.match
        while i < self.n and text[i] not in extra_stops and (
                text[i] not in _METACHARS or self.process_substitution(i)):
            if text[i] in "<>":  # <(...) / >(...): bash reads it as (part of) a word
                i = self.skip_dollar(i)
                continue
            if not extra_stops and (run := plain(text, i, self.n)) is not None:
                i = run.end()
                continue
            c = text[i]
            if c == "\\":
                i += 2
            elif c == "'":
                i = self.skip_single(i)
            elif c == '"':
                i = self.skip_double(i)
            elif c == "`":
                i = self.skip_escaped(i, "`", "backquote")
            elif c == "$" and i + 1 < self.n and text[i + 1] in "({":
                i = self.skip_dollar(i)
            elif c == "$" and i + 1 < self.n and text[i + 1] == "'":
                i = self.skip_escaped(i + 1, "'", "$'...' quote")
            else:
                i += 1
        return min(i, self.n)

    def process_substitution(self, i: int) -> bool:
        """Whether ``<(`` or ``>(`` starts at ``i`` (a process substitution, not a
        redirection: bash takes ``<(`` as one unit, and ``< (`` as a syntax error)."""
        return self.text.startswith(("<(", ">("), i)

    def skip_blanks(self, i: int, newlines: bool = False) -> int:
        """Skip blanks, ``\\``-newlines and (with ``newlines``) line breaks and comments."""
        text = self.text
        while i < self.n:
            if text[i] in " \t\r" or (newlines and text[i] == "\n"):
                i += 1
            elif text.startswith(("\\\n", "\\\r\n"), i):
                i += 2 if text[i + 1] == "\n" else 3
            elif newlines and text[i] == "#":
                nl = text.find("\n", i)
                i = self.n if nl < 0 else nl
            else:
                break
        return i

    # -- special tokens -------------------------------------------------------------
    def read_array(self, start: int, open_paren: int) -> tuple[int, list[Word]]:
        """``NAME=( ... )``: the offset past ``)`` and the element words."""
        elements: list[Word] = []
        i = open_paren + 1
        while True:
            i = self.skip_blanks(i, newlines=True)
            if i >= self.n:
                raise self.fail(start, "unterminated array assignment (")
            if self.text[i] == ")":
                return i + 1, elements
            end = self.read_word(i)
            if end == i:
                raise self.fail(i, f"unexpected {self.text[i]!r} in an array assignment")
            elements.append(Word(i, end, self.text[i:end]))
            i = end

    def read_until_word(self, i: int, closer: str, what: str) -> int:
        """From ``[[`` (at i), the offset past the matching ``]]`` word."""
        j = i + 2
        while True:
            j = self.skip_blanks(j)
            if j >= self.n:
                raise self.fail(i, f"unterminated {what}")
            end = self.read_word(j)
            if end == j:  # an operator character: part of the test expression
                end = j + 1
            if self.text[j:end] == closer:
                return end
            j = end

    def read_arith(self, i: int) -> int:
        """From ``((`` (at i), the offset past the matching ``))``."""
        depth, j = 0, i
        while j < self.n:
            c = self.text[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
            elif c in "'\"":
                j = self.skip_single(j) - 1 if c == "'" else self.skip_double(j) - 1
            j += 1
        raise self.fail(i, "unterminated ((")

    def redirection(self, i: int) -> int:
        m = _REDIRECTION_RE.match(self.text, i)
        op = m.group(0) if m else self.text[i]
        tokens = self.out.tokens
        start = i
        # An io-number like the 2 in 2>&1 was read as a word: it is part of the redirection.
        if tokens and tokens[-1].kind == "word" and tokens[-1].end == i and tokens[-1].text.isdigit():
            start = tokens.pop().start
        j = self.skip_blanks(i + len(op))
        end = self.read_word(j)
        if op in ("<<", "<<-") and end > j:
            delimiter = re.sub(r"""['"\\]""", "", self.text[j:end])
            self.pending.append((delimiter, op == "<<-", i))
        tokens.append(Token("redir", start, end, self.text[start:end]))
        return end

    def skip_heredocs(self, i: int) -> int:
        for delimiter, strip_tabs, opened in self.pending:
            body = i
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
            self.out.heredocs.append((body, i))
        self.pending = []
        return i

    def lex(self) -> Lexed:
        text, i, tokens = self.text, 0, self.out.tokens
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
                tokens.append(Token("nl", i, i + 1, "\n"))
                i = self.skip_heredocs(i + 1)
            elif (c in "<>" and not self.process_substitution(i)) or text.startswith("&>", i):
                i = self.redirection(i)
            elif text.startswith("((", i):
                end = self.read_arith(i)
                tokens.append(Token("word", i, end, text[i:end], Word(i, end, text[i:end])))
                i = end
            elif c in ";&|()":
                op = next(o for o in _OPERATORS if text.startswith(o, i))
                tokens.append(Token("op", i, i + len(op), op))
                i += len(op)
            else:
                end = self.read_word(i)
                word = Word(i, end, text[i:end])
                if _ARRAY_OPEN_RE.match(word.text) and text.startswith("(", end):
                    end, word.array = self.read_array(i, end)
                    word.end, word.text = end, text[i:end]
                elif word.text == "[[":
                    end = self.read_until_word(i, "]]", "[[ test")
                    word = Word(i, end, text[i:end])
                tokens.append(Token("word", i, end, word.text, word))
                i = end
        if self.pending:
            self.skip_heredocs(self.n)
        return self.out


def lex(text: str) -> Lexed:
    """The tokens of ``text``; raises FormatError on unbalanced quotes or here-documents."""
    return _Lexer(text).lex()
