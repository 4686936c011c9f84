"""A serve script whose server runs inside a ``bash -lc "..."`` / ``sh -c '...'`` string
(issue 50 item 2): Slurm jobs ``apptainer exec --cleanenv ... IMG bash -lc "vllm serve
$MODEL --tensor-parallel-size 4"``, ``srun bash -c '...'``, ``docker run IMG sh -c '...'``.

The flags of the launch inside the string are knobs of the script: read by the bash
format on the string's content, edited there, and written back into the word with its
outer quoting kept (every byte outside the change stays).  The content of a quoted word
is the inner script line for line, so lines are the file's.

Which string: where the script has no launch of its own whose flags the reader sees,
the ``sh``/``bash`` ``-c`` word of a command whose content launches a server.  Only a
word quoted whole is read: ``'...'`` (its content is the inner script exactly) or
``"..."`` without ``\\``, a backtick or an inner ``"`` (the outer shell would change
those before the inner one reads them); ``$VAR`` in double quotes is the outer shell's,
and is read as a computed value, as the inner shell would see it.  Several such strings
are refused for flags, naming each line.  A value is written only where the outer
quoting can hold it (no ``'`` inside ``'...'``; no ``"``, ``\\`` or backtick inside
``"..."``); otherwise the edit is refused, naming the line.  Env knobs stay the outer
script's (exports reach the inner shell; under ``--cleanenv`` they are ``--env`` options).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping
from typing import Sequence

from envknobs.flags import is_flag_name
from envknobs.formats.bash import BashFormat
from envknobs.formats.bash.analysis import analyse
from envknobs.formats.common.launch import word_text
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common.wrappers import script_index
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import shifted

_HELD = {"'": "'", '"': '"\\`'}  # what each outer quoting cannot hold


def inner_word(text: str) -> Word | None:
    """The ``-c`` string whose content launches the server (see the module docstring)."""
    a = analyse(text)
    if any(l.shape is not None and l.shape.args for l in a.launches):
        return None
    found = []
    for s in a.tree.simples:
        i = script_index([word_text(w) or "" for w in s.words])
        w = s.words[i] if i is not None else None
        if w is None or len(w.text) < 2 or w.text[0] not in _HELD or w.text[-1] != w.text[0]:
            continue
        content = w.text[1:-1]
        if any(c in content for c in _HELD[w.text[0]]):
            continue
        try:
            inner = analyse(content)
        except FormatError:
            continue
        if any(l.shape is not None and l.shape.args for l in inner.launches):
            found.append(w)
    if len(found) > 1:
        lines = ", ".join(f"line {line_of(text, w.start)}" for w in found)
        raise FormatError(f"the server's flags are in {len(found)} `sh -c` strings ({lines}); "
                          "edit the one you mean by hand and record it with --adopt")
    return found[0] if found else None


class WithInnerScript(BashFormat):
    """The bash format, with the flags of a ``bash -lc "..."`` string's launch."""

    def _inner(self, text: str, knob: str | None = None) -> Word | None:
        if knob is not None and not is_flag_name(knob):
            return None
        return inner_word(text)

    def _shift(self, text: str, w: Word) -> int:
        return line_of(text, w.start) - 1

    def _in(self, text: str, w: Word, action):
        return shifted(action, w.text[1:-1], self._shift(text, w))

    def _edit(self, text: str, w: Word, action) -> str:
        new = self._in(text, w, action)
        old = w.text[1:-1]
        if new == old:
            return text
        bad = [c for c in _HELD[w.text[0]] if new.count(c) > old.count(c)]
        if bad:
            raise FormatError(f"line {line_of(text, w.start)}: the value needs {bad[0]!r}, which "
                              f"the {w.text[0]}...{w.text[0]} string around the server's "
                              "command cannot hold; edit that line by hand")
        return text[: w.start + 1] + new + text[w.end - 1 :]

    # -- reads ------------------------------------------------------------------------
    def _with_flags(self, text: str, read) -> dict[str, str]:
        """``read(text)`` and the flags ``read`` finds in the string's content."""
        w = self._inner(text)
        found = read(text)
        if w is None:
            return found
        return {**found, **{k: v for k, v in self._in(text, w, read).items() if is_flag_name(k)}}

    def parse(self, text: str) -> dict[str, str]:
        return self._with_flags(text, super().parse)

    def parse_exact(self, text: str) -> dict[str, str]:
        return self._with_flags(text, super().parse_exact)

    def summary(self, text: str) -> Summary:
        found = super().summary(text)
        w = self._inner(text)
        if w is None:
            return found
        shift = self._shift(text, w)
        inner = self._in(text, w, super().summary)
        flags = tuple(replace(k, places=tuple(replace(p, line=p.line + shift) for p in k.places))
                      for k in inner.knobs if k.is_flag)
        return replace(found, knobs=(*found.knobs, *flags))

    def knob(self, text: str, knob: str):
        w = self._inner(text, knob)
        if w is None:
            return super().knob(text, knob)
        found = self._in(text, w, lambda s: super(WithInnerScript, self).knob(s, knob))
        shift = self._shift(text, w)
        return None if found is None else replace(
            found, places=tuple(replace(p, line=p.line + shift) for p in found.places))

    def canonical(self, text: str, knob: str) -> str:
        w = self._inner(text, knob)
        return super().canonical(text, knob) if w is None else \
            self._in(text, w, lambda s: super(WithInnerScript, self).canonical(s, knob))

    def source(self, text: str, knob: str) -> str | None:
        w = self._inner(text, knob)
        return super().source(text, knob) if w is None else \
            self._in(text, w, lambda s: super(WithInnerScript, self).source(s, knob))

    def select_places(self, text: str, knob: str, at, action: str = "set"):
        w = self._inner(text, knob)
        if w is None:
            return super().select_places(text, knob, at, action)
        shift = self._shift(text, w)
        at = at - shift if isinstance(at, int) and not isinstance(at, bool) else at
        found = self._in(text, w, lambda s: super(WithInnerScript, self).select_places(
            s, knob, at, action))
        return tuple(replace(p, line=p.line + shift) for p in found)

    # -- edits ------------------------------------------------------------------------
    def set(self, text: str, knob: str, value: str, at=None, source: str | None = None) -> str:
        w = self._inner(text, knob)
        if w is None:
            return super().set(text, knob, value, at=at, source=source)
        at = at - self._shift(text, w) if isinstance(at, int) and not isinstance(at, bool) else at
        return self._edit(text, w, lambda s: super(WithInnerScript, self).set(
            s, knob, value, at=at, source=source))

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        w = self._inner(text, knob)
        return super().set_exact(text, knob, value, source) if w is None else \
            self._edit(text, w, lambda s: super(WithInnerScript, self).set_exact(
                s, knob, value, source))

    def unset(self, text: str, knob: str, at=None) -> str:
        w = self._inner(text, knob)
        if w is None:
            return super().unset(text, knob, at=at)
        at = at - self._shift(text, w) if isinstance(at, int) and not isinstance(at, bool) else at
        return self._edit(text, w, lambda s: super(WithInnerScript, self).unset(s, knob, at=at))

    def removed(self, text: str, knob: str) -> str:
        w = self._inner(text, knob)
        return super().removed(text, knob) if w is None else self.unset(text, knob)

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        w = self._inner(text, knob)
        return super().edit_places(text, knob, edits) if w is None else \
            self._edit(text, w, lambda s: super(WithInnerScript, self).edit_places(
                s, knob, edits))

    def edit_many(self, text: str, edits: Mapping[str, str | None],
                  sources: Mapping[str, str | None] | None = None) -> str:
        if not any(is_flag_name(k) for k in edits) or self._inner(text) is None:
            return super().edit_many(text, edits, sources)
        for knob, value in edits.items():  # one at a time: each in its own script
            text = self.unset(text, knob) if value is None else \
                self.set_exact(text, knob, value, (sources or {}).get(knob))
        return text

    def add_many(self, text: str, values: Mapping[str, str]) -> str:
        if not any(is_flag_name(k) for k in values) or self._inner(text) is None:
            return super().add_many(text, values)
        for knob, value in values.items():
            text = self.set(text, knob, value)
        return text
