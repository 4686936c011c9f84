"""A parser for the structure of bash scripts: which commands run where.

From the tokens of :mod:`envknobs.formats.common.shell_lexer` it builds a small tree: sequences,
``&&``/``||`` lists, pipelines, background jobs, ``if``/``elif``/``else``, ``case``,
``for``/``select``/``while``/``until`` loops, ``( subshells )``, ``{ groups; }`` and
function definitions, down to simple commands.  Every simple command knows its *scope*:
the compound commands around it, innermost last, each as ``(kind, line)`` where kind is
one of ``if``, ``case``, ``loop``, ``function``, ``subshell``, ``list`` (a later part of an
``&&``/``||`` list), ``pipeline`` or ``background``.  An empty scope means the command runs
unconditionally at top level.

A script bash would reject (``fi`` without ``if``, an unclosed ``do``) is a FormatError
naming the line: reading such a script as straight-line code would guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from envknobs.formats.common import FormatError
from envknobs.formats.common.shell_lexer import Token
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common.shell_lexer import lex
from envknobs.formats.common.text import MAX_NESTING
from envknobs.formats.common.text import line_of

Scope = tuple[tuple[str, int], ...]
_CLOSERS = frozenset({"then", "elif", "else", "fi", "do", "done", "esac", "}"})
_STARTERS = {"if", "case", "for", "select", "while", "until", "{", "function"}


@dataclass
class Simple:
    words: list[Word]
    redirs: list[Token]
    scope: Scope
    start: int
    end: int


@dataclass
class Seq:
    items: list = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # offset of each item's first token


@dataclass
class AndOr:
    first: object
    rest: list


@dataclass
class Pipe:
    parts: list


@dataclass
class Background:
    body: object


@dataclass
class If:
    arms: list  # [(condition Seq, body Seq)]
    orelse: Seq | None


@dataclass
class Case:
    arms: list  # [Seq]
    has_default: bool


@dataclass
class Loop:
    kind: str  # for | select | while | until
    cond: Seq | None  # while/until only
    body: Seq


@dataclass
class Group:
    body: Seq
    subshell: bool


@dataclass
class FuncDef:
    name: str
    body: object


@dataclass
class Tree:
    root: Seq
    simples: list[Simple]
    heredocs: list[tuple[int, int]]
    functions: dict[str, FuncDef]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        lexed = lex(text)
        self.tokens = lexed.tokens
        self.heredocs = lexed.heredocs
        self.i = 0
        self.scope: list[tuple[str, int]] = []
        self.simples: list[Simple] = []
        self.functions: dict[str, FuncDef] = {}
        self.depth = 0  # compound commands open around the parse position

    # -- helpers ----------------------------------------------------------------------
    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def line(self, tok: Token | None = None) -> int:
        tok = tok or self.peek()
        return line_of(self.text, tok.start if tok else len(self.text))

    def fail(self, what: str) -> FormatError:
        tok = self.peek()
        found = "the end of the script" if tok is None else repr(tok.text.strip() or "newline")
        return FormatError(f"line {self.line()}: {what}, found {found}")

    def is_word(self, *texts: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "word" and tok.text in texts

    def is_op(self, *texts: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "op" and tok.text in texts

    def expect_word(self, text: str) -> Token:
        self.skip_newlines()
        if not self.is_word(text):
            raise self.fail(f"expected {text!r}")
        return self.take()

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def skip_newlines(self) -> None:
        while self.peek() is not None and self.peek().kind == "nl":  # type: ignore[union-attr]
            self.i += 1

    def scoped(self, kind: str, line: int):
        parser = self

        class _Frame:
            def __enter__(self) -> None:
                parser.scope.append((kind, line))

            def __exit__(self, *exc: object) -> None:
                parser.scope.pop()

        return _Frame()

    # -- grammar ----------------------------------------------------------------------
    def parse_list(self, stop_words: frozenset[str], stop_ops: frozenset[str] = frozenset()) -> Seq:
        seq = Seq()
        while True:
            while self.peek() is not None and (self.peek().kind == "nl" or self.is_op(";")):  # type: ignore[union-attr]
                self.i += 1
            tok = self.peek()
            if tok is None or (tok.kind == "word" and tok.text in stop_words):
                return seq
            if tok.kind == "op" and tok.text in stop_ops:
                return seq
            if tok.kind == "op" and tok.text != "(" or tok.kind == "word" and tok.text in _CLOSERS:
                raise self.fail("expected a command")
            start = self.i
            node = self.parse_and_or()
            node_start = self.tokens[start].start
            if self.is_op("&"):
                self.i += 1
                self._rescope(start, "background")
                node = Background(node)
            elif self.peek() is not None and not (self.peek().kind == "nl" or self.is_op(";")):  # type: ignore[union-attr]
                tok = self.peek()
                ends = tok.kind == "op" and tok.text in stop_ops or tok.kind == "word" and tok.text in stop_words
                if not ends:
                    raise self.fail("expected the end of the command")
            seq.items.append(node)
            seq.starts.append(node_start)

    def _rescope(self, first_token: int, kind: str) -> None:
        """Mark the simple commands parsed from ``first_token`` on as inside ``kind``."""
        line = line_of(self.text, self.tokens[first_token].start)
        depth = len(self.scope)
        for simple in self.simples:
            if simple.start >= self.tokens[first_token].start:
                simple.scope = simple.scope[:depth] + ((kind, line),) + simple.scope[depth:]

    def parse_and_or(self) -> object:
        first = self.parse_pipeline()
        rest = []
        while self.is_op("&&", "||"):
            self.i += 1
            self.skip_newlines()
            with self.scoped("list", self.line()):
                rest.append(self.parse_pipeline())
        return AndOr(first, rest) if rest else first

    def parse_pipeline(self) -> object:
        while self.is_word("!", "time"):
            self.i += 1
        start = self.i
        parts = [self.parse_command()]
        while self.is_op("|", "|&"):
            self.i += 1
            self.skip_newlines()
            parts.append(self.parse_command())
        if len(parts) == 1:
            return parts[0]
        self._rescope(start, "pipeline")
        return Pipe(parts)

    def parse_command(self) -> object:
        """One command; compound commands nested deeper than :data:`MAX_NESTING` (each
        level a recursion of this parser) are refused, as the lexer refuses ``$(...)``."""
        if self.depth > MAX_NESTING:
            raise FormatError(f"line {self.line()}: compound commands (if, loops, case, "
                              f"( ), {{ }}, functions) nested more than {MAX_NESTING} deep")
        self.depth += 1
        try:
            return self._parse_command()
        finally:
            self.depth -= 1

    def _parse_command(self) -> object:
        tok = self.peek()
        if tok is None:
            raise self.fail("expected a command")
        if tok.kind == "op" and tok.text == "(":
            self.i += 1
            with self.scoped("subshell", self.line(tok)):
                body = self.parse_list(frozenset(), frozenset({")"}))
            if not self.is_op(")"):
                raise self.fail("expected ')'")
            self.i += 1
            self.skip_redirs()
            return Group(body, subshell=True)
        if tok.kind == "word" and tok.text in _STARTERS:
            node = getattr(self, "parse_" + {"{": "group"}.get(tok.text, tok.text))()
            self.skip_redirs()
            return node
        nxt = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
        if tok.kind == "word" and nxt is not None and nxt.kind == "op" and nxt.text == "(":
            return self.parse_funcdef(tok.text)
        return self.parse_simple()

    def skip_redirs(self) -> None:
        while self.peek() is not None and self.peek().kind == "redir":  # type: ignore[union-attr]
            self.i += 1

    def parse_simple(self) -> Simple:
        words: list[Word] = []
        redirs: list[Token] = []
        tokens, i, n = self.tokens, self.i, len(self.tokens)
        while i < n:  # the hot loop of every parse: plain indexing, no helper calls
            tok = tokens[i]
            if tok.kind == "word":
                words.append(tok.word)  # type: ignore[arg-type]
            elif tok.kind == "redir":
                redirs.append(tok)
            else:
                break
            i += 1
        self.i = i
        if not words and not redirs:
            raise self.fail("expected a command")
        # Tokens come in text order: each list's first starts and its last ends it.
        parts = [p for p in (words, redirs) if p]
        start = min(p[0].start for p in parts)
        end = max(p[-1].end for p in parts)
        simple = Simple(words, redirs, tuple(self.scope), start, end)
        self.simples.append(simple)
        return simple

    def parse_if(self) -> If:
        line = self.line()
        self.take()
        arms = []
        orelse = None
        with self.scoped("if", line):
            cond = self.parse_list(frozenset({"then"}))
            self.expect_word("then")
            body = self.parse_list(frozenset({"elif", "else", "fi"}))
            arms.append((cond, body))
            while self.is_word("elif"):
                self.take()
                cond = self.parse_list(frozenset({"then"}))
                self.expect_word("then")
                arms.append((cond, self.parse_list(frozenset({"elif", "else", "fi"}))))
            if self.is_word("else"):
                self.take()
                orelse = self.parse_list(frozenset({"fi"}))
            self.expect_word("fi")
        return If(arms, orelse)

    def parse_case(self) -> Case:
        line = self.line()
        self.take()
        if self.peek() is None or self.peek().kind != "word":  # type: ignore[union-attr]
            raise self.fail("expected a word after 'case'")
        self.take()
        self.expect_word("in")
        arms, has_default = [], False
        with self.scoped("case", line):
            while True:
                self.skip_newlines()
                if self.is_word("esac"):
                    self.take()
                    return Case(arms, has_default)
                if self.is_op("("):
                    self.take()
                while True:
                    if self.peek() is None or self.peek().kind != "word":  # type: ignore[union-attr]
                        raise self.fail("expected a case pattern")
                    has_default |= self.take().text == "*"
                    if not self.is_op("|"):
                        break
                    self.take()
                if not self.is_op(")"):
                    raise self.fail("expected ')' after a case pattern")
                self.take()
                arms.append(self.parse_list(frozenset({"esac"}), frozenset({";;", ";&", ";;&"})))
                if self.is_op(";;", ";&", ";;&"):
                    self.take()

    def parse_for(self, kind: str = "for") -> Loop:
        line = self.line()
        self.take()
        if self.peek() is None or self.peek().kind != "word":  # type: ignore[union-attr]
            raise self.fail(f"expected a name after {kind!r}")
        self.take()
        self.skip_newlines()
        if self.is_word("in"):
            self.take()
            while self.peek() is not None and self.peek().kind == "word":  # type: ignore[union-attr]
                self.take()
        if self.is_op(";"):
            self.take()
        self.expect_word("do")
        with self.scoped("loop", line):
            body = self.parse_list(frozenset({"done"}))
        self.expect_word("done")
        return Loop(kind, None, body)

    def parse_select(self) -> Loop:
        return self.parse_for("select")

    def parse_while(self) -> Loop:
        line = self.line()
        kind = self.take().text
        with self.scoped("loop", line):
            cond = self.parse_list(frozenset({"do"}))
            self.expect_word("do")
            body = self.parse_list(frozenset({"done"}))
        self.expect_word("done")
        return Loop(kind, cond, body)

    parse_until = parse_while

    def parse_group(self) -> Group:
        self.take()
        body = self.parse_list(frozenset({"}"}))
        self.expect_word("}")
        return Group(body, subshell=False)

    def parse_function(self) -> FuncDef:
        self.take()
        if self.peek() is None or self.peek().kind != "word":  # type: ignore[union-attr]
            raise self.fail("expected a function name")
        name = self.take().text
        if self.is_op("("):
            self.take()
            if not self.is_op(")"):
                raise self.fail("expected ')'")
            self.take()
        return self._function_body(name)

    def parse_funcdef(self, name: str) -> FuncDef:
        self.i += 2  # name (
        if not self.is_op(")"):
            raise self.fail("expected ')' of a function definition")
        self.take()
        return self._function_body(name)

    def _function_body(self, name: str) -> FuncDef:
        self.skip_newlines()
        with self.scoped("function", self.line()):
            body = self._parse_command()  # one level with its definition
        node = FuncDef(name, body)
        self.functions[name] = node
        return node


def parse_tree(text: str) -> Tree:
    """The structure of ``text``; raises FormatError on what bash would reject."""
    parser = _Parser(text)
    root = parser.parse_list(frozenset())
    if parser.peek() is not None:
        raise parser.fail("unexpected")
    return Tree(root, parser.simples, parser.heredocs, parser.functions)
