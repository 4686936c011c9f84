"""Launch flags in a docker-compose service's ``command:`` (and ``entrypoint:``).

A yaml-map target whose key path is ``services.NAME.command`` (or ``.entrypoint``) is the
service's launch: its argv is the ``entrypoint:`` words followed by the ``command:``
words, each of them a list (``["--model", "x"]``, a block list) or a string that compose
splits into shell words (folded ``>``, plain over several lines, ``|``, one line; see
:mod:`envknobs.formats.yaml.strwords`).  The shapes of real files:

* the ``vllm/vllm-openai`` image (its entrypoint is the server) with ``command:`` holding
  only flags, folded or on one line;
* ``entrypoint: python3 -m sglang.launch_server`` and the flags in ``command:`` (the
  SGLang repo's compose file);
* ``command: /bin/sh -c "... python3 -m vllm.entrypoints.openai.api_server ..."`` (OPEA)
  or ``["sh", "-c", "vllm serve ..."]``: a shell runs the script, which the bash format
  reads and edits (its flags, launch lines and all).

Knobs are ``--flag`` names; the engine (its flag catalog) is the launch's (``vllm serve``,
``python3 -m sglang.launch_server``), else the image's.  Values compose would interpolate
(``${MAX_NUM_SEQS:-128}``) are computed: shown as such; ``set`` replaces the word and
``unset`` removes the flag (as the bash format does with a shell-computed value), and a new
value with a ``$`` is refused.  The edit rules are :mod:`envknobs.formats.yaml.flagedit`'s; a flag given twice
is noted in ``summary`` (the last takes effect, as argparse reads it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common.shellwords import literal_word
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of
from envknobs.formats.yaml import flagedit
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.yaml.argv import ListWords
from envknobs.formats.yaml.argv import Token
from envknobs.formats.yaml.argv import argv_tokens
from envknobs.formats.yaml.argv import launch_flags
from envknobs.formats.yaml.argv import replace_script
from envknobs.formats.yaml.argv import script_index
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.strwords import ScalarWords
from envknobs.formats.yaml.strwords import refolded
from envknobs.formats.yaml.strwords import requoted
from envknobs.formats.yaml.strwords import shell_word

PARTS = ("entrypoint", "command")


def is_command_path(steps: tuple) -> bool:
    """Whether a yaml-map key path names a compose service's launch."""
    return len(steps) == 3 and steps[0] == "services" and steps[2] in PARTS


@dataclass
class _Part:
    key: str
    node: Node
    tokens: list[Token] | None = None  # a list
    words: ScalarWords | None = None  # a string


@dataclass
class _CWord:
    part: _Part
    index: int  # within its part
    text: str  # as the process gets it ($ kept)
    raw: str  # as a shell word, for the flag reader


_ALL_ARGS = re.compile(r'"\$@"|"\$\{@\}"|\$@|\$\{@\}')


def _passes_args(script: str) -> bool:
    """Whether a ``sh -c`` script hands its arguments to a command (``"$@"``)."""
    return bool(_ALL_ARGS.search(script))


def _bash_launches(script: str):
    from envknobs.formats.bash.analysis import analyse

    try:
        return analyse(script).launches
    except FormatError:
        return []


def _interpolated(value: str) -> bool:
    return "$" in value.replace("$$", "")


class ComposeArgv:
    """The argv of one compose service (see the module docstring)."""

    def __init__(self, text: str, service: MappingNode, label: str) -> None:
        self.text, self.label = text, f"service {label}"
        self.parts: list[_Part] = []
        for key in PARTS:
            pair = get(service, key)
            node = pair[1] if pair else None
            if node is None or scalar_text(node) == "" and not isinstance(node, SequenceNode):
                continue
            if isinstance(node, SequenceNode):
                self.parts.append(_Part(key, node, tokens=argv_tokens(key, node, self.label)))
            elif isinstance(node, ScalarNode):
                self.parts.append(_Part(key, node, words=ScalarWords(text, node, f"{key} of {self.label}")))
            else:
                raise FormatError(f"line {node.start_mark.line + 1}: {key} of {self.label} "
                                  "is a map, not a command")
        self.words = [w for p in self.parts for w in _part_words(p)]
        self.script = script_index([w.text for w in self.words])
        image = scalar_text((get(service, "image") or (None, None))[1]) or ""
        words = [Word(i, i, w.raw) for i, w in enumerate(self.words)]
        self.engine, self.uses = (None, []) if self.script is not None else launch_flags(words, image)
        # ``sh -c 'exec vllm serve "$@"' -- ARGS...``: the words after the script's $0 are
        # its "$@", the launch's own flags (issue 50): read and edited there.
        self.params: list[FlagUse] | None = None
        if self.script is not None and _passes_args(self.words[self.script].text):
            from envknobs.formats.common.launch import flag_lookup

            launches = _bash_launches(self.words[self.script].text)
            self.engine = next((l.engine for l in launches if l.engine), None) or (
                "vllm" if "vllm" in image else ("sglang" if "sglang" in image else None))
            self.params = scan_flags(words[self.script + 2:], flag_lookup(self.engine))

    # -- the Words editor (flagedit) ------------------------------------------------
    @property
    def count(self) -> int:
        return len(self.words)

    def value(self, i: int) -> str:
        return self.words[i].text

    def line(self, text: str, i: int) -> int:
        w = self.words[i]
        if w.part.tokens is not None:
            return line_of(text, w.part.tokens[w.index].node.start_mark.index)
        return w.part.words.line(w.index)  # type: ignore[union-attr]

    def replace(self, text: str, i: int, value: str) -> str:
        w = self.words[i]
        if w.part.tokens is not None:
            shell_word(value)  # refuses a '$'
            return ListWords(w.part.tokens).replace(text, w.index, value)
        sw = w.part.words.words[w.index]  # type: ignore[union-attr]
        return w.part.words.replaced([(sw.start, sw.end, shell_word(value, sw.raw))])  # type: ignore[union-attr]

    def insert_after(self, text: str, i: int, values: list[str]) -> str:
        w = self.words[i]
        if w.part.tokens is not None:
            for v in values:
                shell_word(v)
            return ListWords(w.part.tokens).insert_after(text, w.index, values)
        return w.part.words.insert_after(w.index, " ".join(shell_word(v) for v in values))  # type: ignore[union-attr]

    def replace_run(self, text: str, indices: list[int], values: list[str]) -> str:
        first, last = self.words[indices[0]], self.words[indices[-1]]
        if first.part.tokens is not None:
            for v in values:
                shell_word(v)
            return ListWords(first.part.tokens).replace_run(text, [self.words[k].index for k in indices], values)
        sw = first.part.words.words  # type: ignore[union-attr]
        new = " ".join(shell_word(v) for v in values)
        return first.part.words.replaced([(sw[first.index].start, sw[last.index].end, new)])  # type: ignore[union-attr]

    def remove(self, text: str, indices: list[int]) -> str:
        by_part: dict[int, list[int]] = {}
        for k in sorted(set(indices)):
            by_part.setdefault(id(self.words[k].part), []).append(self.words[k].index)
        out = text
        for part in sorted(self.parts, key=lambda p: -p.node.start_mark.index):
            mine = by_part.get(id(part))
            if not mine:
                continue
            if part.tokens is not None:
                out = ListWords(part.tokens).remove(out, mine)
            else:
                out = _with_text(part.words, out).removed(_runs(mine))  # type: ignore[arg-type]
        return out


def _with_text(words: ScalarWords, text: str) -> ScalarWords:
    """``words`` editing ``text`` (the same offsets before its node: later parts went first)."""
    words.text = text
    return words


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    runs: list[list[int]] = []
    for k in indices:
        if runs and runs[-1][-1] == k - 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return [(r[0], r[-1]) for r in runs]


def _part_words(part: _Part) -> list[_CWord]:
    if part.tokens is not None:
        return [_CWord(part, i, t.value, t.value if _interpolated(t.value)
                       else quote_value(t.value.replace("$$", "$")))
                for i, t in enumerate(part.tokens)]
    return [_CWord(part, i, literal_word(w.raw), w.raw) for i, w in enumerate(part.words.words)]  # type: ignore[union-attr]


# -- what the yaml-map format calls ---------------------------------------------------------
def _bash():
    from envknobs.formats.bash import BashFormat

    return BashFormat()


def _script_text(a: ComposeArgv) -> str:
    return a.words[a.script].text  # type: ignore[index]


def compose_flags(text: str, service: MappingNode, label: str) -> dict[str, str]:
    """The flags the service's server gets (last occurrence wins; interpolated left out)."""
    from envknobs.formats.yaml.argv import Argv
    from envknobs.formats.yaml.argv import flag_values

    a = ComposeArgv(text, service, label)
    if a.script is not None:
        own = flag_values(Argv([], {}, a.engine, a.params or []))
        return {**own, **{k: v for k, v in _bash().parse(_script_text(a)).items()
                          if k.startswith("-")}}
    return flag_values(Argv([], {}, a.engine, a.uses))


def canonical_compose_flag(text: str, service: MappingNode, label: str, knob: str) -> str:
    """``knob`` as the service's engine spells it (``--tp`` -> ``--tp-size``)."""
    from envknobs.flags import canonical_flag
    from envknobs.formats.common.launch import flag_lookup

    a = ComposeArgv(text, service, label)
    if a.script is not None and a.params is None:
        return _bash().canonical(_script_text(a), knob)
    flag = flag_lookup(a.engine)(knob)
    return flag.name if flag is not None else canonical_flag(knob)  # type: ignore[attr-defined]


def edit_compose_flag(text: str, service: MappingNode, label: str, knob: str,
                      value: str | None) -> str:
    """``text`` with flag ``knob`` set to ``value`` (None: removed) in the service's argv."""
    from envknobs.formats.common.launch import flag_lookup

    a = ComposeArgv(text, service, label)
    if value is not None and "$" in value:
        shell_word(value)  # refused: compose would interpolate it
    if a.script is not None and a.params is not None and not _in_script_flags(a, knob):
        return _edit_params(text, a, knob, value, flag_lookup(a.engine)(knob))
    if a.script is not None:
        return _edit_script(text, a, knob, value)
    if value is None:
        return flagedit.unset_flag(text, a, a.uses, knob)
    return flagedit.set_flag(text, a, a.uses, knob, value, flag_lookup(a.engine)(knob))


def _in_script_flags(a: ComposeArgv, knob: str) -> bool:
    return knob in _bash().parse(_script_text(a)) or any(
        k.knob == knob for k in _bash().summary(_script_text(a)).knobs)


def _edit_params(text: str, a: ComposeArgv, knob: str, value: str | None, flag) -> str:
    """A flag of the words the script gets as ``"$@"``: edited where it is; a new one
    goes after the last of them (in ``command:``), where the operator keeps the rest."""
    if value is None:
        return flagedit.unset_flag(text, a, a.params or [], knob)
    return flagedit.set_flag(text, a, a.params or [], knob, value, flag)


def _edit_script(text: str, a: ComposeArgv, knob: str, value: str | None) -> str:
    w = a.words[a.script]  # type: ignore[index]
    bash = _bash()
    try:
        new = bash.unset(w.text, knob) if value is None else bash.set(w.text, knob, value)
    except FormatError as e:
        raise FormatError(f"in the shell script of line {a.line(text, a.script)}: {e}") from e  # type: ignore[arg-type]
    if new == w.text:
        return text
    if w.part.tokens is not None:
        return replace_script(text, w.part.tokens[w.index], new)
    words = w.part.words
    sw = words.words[w.index]  # type: ignore[union-attr]
    if words.multi:  # the quoted script spans lines: change only what changed, in place
        value = words.value[: sw.start] + requoted(new, sw.raw) + words.value[sw.end :]  # type: ignore[union-attr]
        return refolded(text, words.node, value, f"{w.part.key} of {a.label}")  # type: ignore[union-attr]
    return words.replaced([(sw.start, sw.end, requoted(new, sw.raw))])  # type: ignore[union-attr]


def _value_word(a: ComposeArgv, knob: str) -> tuple[int, str] | None:
    """(word index, prefix) of the value word of ``knob``'s occurrence that takes effect,
    where compose interpolates it: ``--x ${X:-8}`` (prefix "") or ``--x=${X:-8}``
    (prefix ``--x=``); None for a literal value, a switch or a list of words."""
    use = next((u for u in reversed(a.uses) if u.knob == knob), None)
    if use is None or use.value is not None:
        return None
    if use.form == "space" and len(use.values) == 1:
        return use.values[0].start, ""
    if use.form == "equals":
        return use.word.start, a.words[use.word.start].raw.partition("=")[0] + "="
    return None


def _word_source(text: str, a: ComposeArgv, i: int) -> str:
    w = a.words[i]
    if w.part.tokens is not None:
        node = w.part.tokens[w.index].node
        return text[node.start_mark.index : node.end_mark.index]
    return w.part.words.words[w.index].raw  # type: ignore[union-attr]


def _expr(text: str, a: ComposeArgv, knob: str) -> str | None:
    found = _value_word(a, knob)
    if found is None:
        return None
    raw = _word_source(text, a, found[0])
    if found[1] and a.words[found[0]].part.tokens is not None:
        return raw  # a list item --x=${X}: the item's text, as compose_source gives it
    return raw[len(found[1]):]


def compose_source(text: str, service: MappingNode, label: str, knob: str) -> str | None:
    """The exact text of flag ``knob``'s value word (a list item as written, ``"8192"``;
    a string's shell word; ``${MAX_MODEL_LEN:-8192}`` where compose interpolates it):
    what an entry keeps, so that a revert writes it back byte for byte (issue 50).  None
    for a switch or a flag of a shell script."""
    a = ComposeArgv(text, service, label)
    uses = a.uses if a.script is None else (a.params or [])
    use = next((u for u in reversed(uses) if u.knob == knob), None)
    if use is None:
        return None
    if use.form == "space" and len(use.values) == 1:
        return _word_source(text, a, use.values[0].start)
    if use.form == "equals":
        raw = _word_source(text, a, use.word.start)
        if a.words[use.word.start].part.tokens is not None:
            return raw
        name = raw.partition("=")[0]
        return None if name.startswith(("'", '"')) else raw[len(name) + 1:]
    return None


def restore_compose_source(text: str, service: MappingNode, label: str, knob: str,
                           source: str) -> str | None:
    """``text`` with flag ``knob``'s value word written back as ``source`` (the text
    :func:`compose_source` gave), in place; None where the flag has no single value word
    to hold it (the caller writes the value instead)."""
    a = ComposeArgv(text, service, label)
    uses = a.uses if a.script is None else (a.params or [])
    use = next((u for u in reversed(uses) if u.knob == knob), None)
    if use is None or "\n" in source:
        return None
    if use.form == "space" and len(use.values) == 1:
        i, prefix = use.values[0].start, ""
    elif use.form == "equals":  # the flag as the process gets it, then the value's text
        i, prefix = use.word.start, a.words[use.word.start].text.partition("=")[0] + "="
    else:
        return None
    w = a.words[i]
    if w.part.tokens is not None:  # a list item: its whole text (the flag too, for --x=v)
        node = w.part.tokens[w.index].node
        return text[: node.start_mark.index] + source + text[node.end_mark.index :]
    sw = w.part.words.words[w.index]  # type: ignore[union-attr]
    return w.part.words.replaced([(sw.start, sw.end, prefix + source)])  # type: ignore[union-attr]


def compose_places(text: str, service: MappingNode, label: str):
    """(knob, file line, value or None where computed) of the occurrence of each flag that
    takes effect, and notes (a flag given twice, a script inside a string)."""
    a = ComposeArgv(text, service, label)
    if a.script is None:
        last = {u.knob: u for u in a.uses}
        rows = [(k, a.line(text, u.word.start), u.value, _expr(text, a, k))
                for k, u in last.items()]
        return rows, flagedit.repeated_note(a.uses, lambda i: a.line(text, i), f"the {a.label}")
    w = a.words[a.script]
    bash = _bash()
    values, summary = bash.parse(w.text), bash.summary(w.text)
    flags = [k for k in summary.knobs if k.knob.startswith("-") and k.places]
    params = {u.knob: u for u in a.params or [] if u.knob not in {k.knob for k in flags}}
    own = [(k, a.line(text, u.word.start), u.value) for k, u in params.items()]
    notes = flagedit.repeated_note(a.params or [], lambda i: a.line(text, i),
                                   f"the arguments of {a.label}") if a.params else []
    if w.part.tokens is None:
        first = a.line(text, a.script)
        return own + [(k.knob, first, values.get(k.knob)) for k in flags], notes
    node = w.part.tokens[w.index].node
    first = line_of(text, node.start_mark.index) + (1 if node.style in ("|", ">") else 0) - 1
    return own + [(k.knob, first + k.places[-1].line, values.get(k.knob)) for k in flags], notes


__all__ = ["ComposeArgv", "PARTS", "canonical_compose_flag", "compose_flags", "compose_places",
           "compose_source", "edit_compose_flag", "is_command_path", "restore_compose_source"]
