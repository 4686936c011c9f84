"""Shell words inside one YAML string scalar, edited where they are written.

A docker-compose ``command:`` or ``entrypoint:`` given as a string is split into words the
way a shell splits them (compose uses shell-word splitting: go-shellwords, Python's shlex;
no shell runs and nothing is expanded but compose's own ``$VAR`` interpolation).  Real files
write it folded (``>``), plain over several lines, as a ``|`` block, or on one line.

Reading: the scalar's value (as YAML readers give it) is lexed into shell words, each with
its span in the value.  A value a shell would read as more than words (``;``, ``&&``,
``|``, redirections, a ``#`` comment) or with a backslash at a line end is refused: compose
reads those differently from a shell, and the ledger does not guess which.

Writing: a one-line scalar is rendered again from its new value, in its own quoting (plain
stays plain where YAML still reads the same string).  A scalar over several lines (plain,
``>`` or ``|``) is edited in its source: every content line of it appears in the value
verbatim (folding only joins lines), so a word maps to its exact source span; a changed
word is replaced there, a removed flag takes its own lines (or its span on a shared line),
and a new one goes on a new line in the indentation of the line it follows when the flags
are written one a line, else after the last word on its line.  Other lines keep their bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml.nodes import ScalarNode

from envknobs.formats.common.shell_lexer import lex
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import line_start
from envknobs.formats.common.text import newline_of
from envknobs.formats.yaml.edit import last_content_end
from envknobs.formats.yaml.scalar import SINGLE
from envknobs.formats.yaml.scalar import DOUBLE
from envknobs.formats.yaml.scalar import quoted
from envknobs.formats.yaml.scalar import render


@dataclass(frozen=True)
class StrWord:
    """One shell word of the value: its span there and its raw (shell-quoted) text."""

    start: int
    end: int
    raw: str


@dataclass(frozen=True)
class _Segment:
    at: int  # offset of the content in the value
    src: int  # offset of the content in the file
    size: int


def _lex_words(value: str, where: str) -> list[StrWord]:
    if "\\\n" in value or "\\\r\n" in value:
        raise FormatError(f"{where}: a backslash at a line end in a string command; compose "
                          "splits that differently from a shell: write the words without it")
    lexed = lex(value)
    odd = [t for t in lexed.tokens if t.kind in ("op", "redir")]
    words = [StrWord(t.start, t.end, t.text) for t in lexed.tokens if t.kind == "word"]
    covered = {i for w in words for i in range(w.start, w.end)}
    comment = any(not c.isspace() and i not in covered for i, c in enumerate(value))
    if odd or lexed.heredocs or comment:
        what = repr(odd[0].text) if odd else "a '#' comment"
        raise FormatError(f"{where}: the string command holds {what}, which compose passes "
                          "as a word but a shell would not; write it as a list of words")
    return words


class ScalarWords:
    """The shell words of a string scalar and edits of them (see the module docstring)."""

    def __init__(self, text: str, node: ScalarNode, what: str, lex: bool = True) -> None:
        self.text, self.node = text, node
        self.value: str = node.value
        self.where = f"line {node.start_mark.line + 1}: {what}"
        # lex=False: only where the value's characters are written (a shell script)
        self.words = _lex_words(self.value, self.where) if lex else []
        self.end = last_content_end(text, node) if node.style in ("|", ">") else node.end_mark.index
        self.multi = line_of(text, node.start_mark.index) != line_of(text, max(self.end - 1, 0))
        self._segments: list[_Segment] | None = None

    # -- where words are in the file ------------------------------------------------
    @property
    def segments(self) -> list[_Segment]:
        if self._segments is None:
            self._segments = self._map()
        return self._segments

    def _contents(self) -> list[tuple[int, str]]:
        text, start = self.text, self.node.start_mark.index
        if self.node.style in ("|", ">"):
            header_end = text.index("\n", start) + 1
            header = text[start:header_end].split("#")[0]
            if any(c.isdigit() for c in header):
                raise FormatError(f"{self.where}: a block scalar with an indentation "
                                  "indicator; edit it by hand")
            lines = _lines_at(text, header_end, self.end)
            indent = min((len(s) - len(s.lstrip(" ")) for _, s in lines if s.strip()), default=0)
            return [(off + indent, s[indent:].rstrip("\r")) for off, s in lines]
        if self.node.style in (SINGLE, DOUBLE):
            raise FormatError(f"{self.where}: a quoted string over several lines; write it "
                              "on one line or as a `>` block to edit it")
        out = []
        for off, s in _lines_at(text, start, self.end):
            stripped = s.strip(" \t\r")
            out.append((off + len(s) - len(s.lstrip(" \t")), stripped))
        return out

    def _map(self) -> list[_Segment]:
        segments, cursor = [], 0
        for src, content in self._contents():
            if not content:
                continue
            at = self.value.find(content, cursor)
            if at < 0 or self.value[cursor:at].strip():
                raise FormatError(f"{self.where}: cannot tell where its words are written; "
                                  "edit it by hand")
            segments.append(_Segment(at, src, len(content)))
            cursor = at + len(content)
        return segments

    def src(self, pos: int) -> int:
        """The file offset of value offset ``pos`` (a word boundary)."""
        for s in self.segments:
            if s.at <= pos <= s.at + s.size:
                return s.src + pos - s.at
        raise FormatError(f"{self.where}: a word spans lines; edit it by hand")

    def line(self, i: int) -> int:
        """The file line of word ``i``."""
        if not self.multi:
            return line_of(self.text, self.node.start_mark.index)
        return line_of(self.text, self.src(self.words[i].start))

    def own_line(self, first: int, last: int) -> bool:
        """Whether words ``first..last`` fill their source lines alone."""
        if not self.multi:
            return False
        a, b = self.src(self.words[first].start), self.src(self.words[last].end)
        before = self.text[line_start(self.text, a) : a]
        after = self.text[b : line_end(self.text, b)]
        return not before.strip() and not after.strip(" \t\r\n")

    # -- edits ----------------------------------------------------------------------
    def replaced(self, edits: list[tuple[int, int, str]]) -> str:
        """The file with the value spans of ``edits`` (start, end, new text) replaced."""
        if not self.multi:
            value = self.value
            for start, end, new in sorted(edits, reverse=True):
                value = value[:start] + new + value[end:]
            return self._rendered(value)
        out = self.text
        for start, end, new in sorted(edits, reverse=True):
            if "\n" in new:
                raise FormatError(f"{self.where}: a word with a line break; edit it by hand")
            out = out[: self.src(start)] + new + out[self.src(end) :]
        return out

    def _rendered(self, value: str) -> str:
        node = self.node
        style = node.style if node.style in (SINGLE, DOUBLE) else None
        new = quoted(value, style) if style else render(value)
        return self.text[: node.start_mark.index] + new + self.text[node.end_mark.index :]

    def insert_after(self, i: int, raw: str) -> str:
        """The file with the shell words ``raw`` after word ``i``: on a new line of its
        own where word ``i`` begins its line in a scalar over several lines, else after it."""
        if i < 0:
            first = self.words[0].start if self.words else len(self.value.rstrip())
            return self.replaced([(first, first, raw + (" " if self.words else ""))])
        w = self.words[i]
        starts = self._starts_line(i)
        if self.multi and starts:
            pos = self.src(w.end)
            lead = self.text[line_start(self.text, self.src(self._first_on_line(i))) :]
            indent = lead[: len(lead) - len(lead.lstrip(" \t"))]
            end = line_end(self.text, pos)
            eol = newline_of(self.text)
            if end >= len(self.text) and not self.text.endswith("\n"):
                return self.text + eol + indent + raw
            return self.text[:end] + indent + raw + eol + self.text[end:]
        return self.replaced([(w.end, w.end, " " + raw)])

    def _first_on_line(self, i: int) -> int:
        line = self.line(i)
        return next(self.words[k].start for k in range(len(self.words)) if self.line(k) == line)

    def _starts_line(self, i: int) -> bool:
        """Whether the flags are one a line here: the line of word ``i`` starts with a flag."""
        if not self.multi:
            return False
        pos = self.src(self._first_on_line(i))
        return not self.text[line_start(self.text, pos) : pos].strip() and \
            self.value[self._first_on_line(i)] == "-"

    def removed(self, groups: list[tuple[int, int]]) -> str:
        """The file without the word runs ``groups`` (first, last index), each with the
        blank that joins it to its neighbours, or its whole lines where it fills them."""
        out = self.text
        spans = []
        for first, last in groups:
            if self.own_line(first, last):
                a = line_start(self.text, self.src(self.words[first].start))
                b = line_end(self.text, self.src(self.words[last].end))
                spans.append((a, b))
                continue
            start, end = self._cut(first, last)
            spans.append((start, end) if not self.multi else (self.src(start), self.src(end)))
        if not self.multi:
            value = self.value
            for start, end in sorted(spans, reverse=True):
                value = value[:start] + value[end:]
            return self._rendered(value)
        for start, end in sorted(spans, reverse=True):
            out = out[:start] + out[end:]
        return out

    def _cut(self, first: int, last: int) -> tuple[int, int]:
        words = self.words
        same = (lambda a, b: self.line(a) == self.line(b)) if self.multi else (lambda a, b: True)
        if last + 1 < len(words) and same(last, last + 1):
            return words[first].start, words[last + 1].start
        if first > 0 and same(first - 1, first):
            return words[first - 1].end, words[last].end
        if first == 0 and last + 1 == len(words):
            raise FormatError(f"{self.where}: removing every word would leave the command "
                              "empty; edit it by hand")
        raise FormatError(f"{self.where}: the words to remove share no line with their "
                          "neighbours; edit it by hand")


def refolded(text: str, node: ScalarNode, new: str, what: str) -> str:
    """``text`` with the folded (``>``) or plain multi-line scalar ``node`` holding ``new``:
    each change of the value (a character diff) is made where those characters are
    written, so the lines it does not touch keep their bytes.  A change that starts on the
    blank folding made of a line break starts at the end of the line before it (a removed
    flag takes its line break with it); one that ends there ends at the next line's start.
    A new line break cannot be written into a folded scalar: refused."""
    import difflib

    sw = ScalarWords(text, node, what, lex=False)
    segs = sw.segments

    def at(pos: int, start: bool) -> int:
        for seg in segs:
            if seg.at <= pos <= seg.at + seg.size:
                return seg.src + pos - seg.at
        before = [g for g in segs if g.at + g.size < pos]
        after = [g for g in segs if g.at > pos]
        if (start or not after) and before:
            return before[-1].src + before[-1].size
        if after:
            return after[0].src
        raise FormatError(f"{sw.where}: cannot tell where its words are written; edit it by hand")

    out = text
    ops = difflib.SequenceMatcher(None, node.value, new, autojunk=False).get_opcodes()
    for _, i1, i2, j1, j2 in reversed([op for op in ops if op[0] != "equal"]):
        piece = new[j1:j2]
        if "\n" in piece:
            raise FormatError(f"{sw.where}: the edit would add a line break to a folded "
                              "scalar; write it as a `|` block to edit it")
        a = at(i1, True)
        b = at(i2, False) if i2 > i1 else a
        out = out[:a] + piece + out[max(a, b):]
    return out


def _lines_at(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """(offset, line without its break) of each line of ``text[start:end]``."""
    out, pos = [], start
    for chunk in text[start:end].split("\n"):
        out.append((pos, chunk))
        pos += len(chunk) + 1
    return out


def shell_word(value: str, like: str | None = None) -> str:
    """``value`` as one shell word that compose splits back exactly (no ``$``: compose
    would interpolate it): bare where it can be, else in the quotes of ``like``."""
    from envknobs.formats.common.shellwords import quote_value

    if "$" in value:
        raise FormatError(f"value {value!r} holds '$', which compose interpolates; "
                          "write it by hand ($$ for a literal $)")
    if like and like.startswith('"') and not set(value) & set('"\\`'):
        return f'"{value}"'
    return quote_value(value, like if like and like.startswith("'") else None)


def requoted(value: str, like: str) -> str:
    """``value`` (a script, say) as one shell word in the quotes ``like`` uses."""
    if like.startswith("'") and "'" not in value:
        return f"'{value}'"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["ScalarWords", "StrWord", "requoted", "shell_word"]
