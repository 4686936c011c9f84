"""Launch flags in a container's ``command:`` and ``args:`` lists (k8s targets).

Most real deployments keep their server flags in YAML: the container's argv is its
``command:`` list followed by its ``args:`` list, one YAML scalar per word.  The shapes
found in public manifests (KServe, AIBrix, Dynamo, llm-d, production-stack) and read here:

* a list of ``--x=v`` items, split tokens (``- --x`` then ``- "16"``), quoted tokens, and
  flow lists (``args: ["--x", "256"]``);
* a shell launch: ``command: [sh, -c]`` (or ``bash -c``, ``-ec``, ``-lc``) with the script
  as the next word, often a ``- |`` block (``python3 -m sglang.launch_server ... --x v``).
  The script is read by the bash format (:mod:`envknobs.formats.bash`), flags, launch
  lines and all, and an edit rewrites only the changed lines of the block in the YAML
  text: the other lines keep their bytes.

Flags are read as argparse reads them (:func:`envknobs.formats.common.launch.scan_flags`,
the same code as serve scripts, with the engine's flag catalog when the argv starts a
known server: ``python3 -m sglang.launch_server``, ``vllm serve``, or an image whose
entrypoint is one).  The last occurrence wins, as in argparse; ``unset`` removes every
occurrence, ``set`` edits the one that takes effect.

Writing: a value is replaced in its own scalar, keeping its quoting where it can carry
the value (a number stays a quoted string: Kubernetes takes only strings there); a new
flag goes at the end of ``args:`` (or of ``command:`` when there is no ``args:``) in the
form most of the list's flags use (``--x=v`` items, or ``--x`` and its value as two
items); a switch is one item.  Every edit is re-read and verified by the caller.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import launch_shape
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.common.wrappers import script_index
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import line_start
from envknobs.formats.yaml.edit import dash_before
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import last_content_end
from envknobs.formats.yaml.scalar import neighbour_style
from envknobs.formats.yaml.scalar import node_style
from envknobs.formats.yaml.scalar import render
from envknobs.formats.yaml.strwords import refolded



@dataclass
class Token:
    node: ScalarNode
    seq: SequenceNode

    @property
    def value(self) -> str:
        return self.node.value


@dataclass
class Argv:
    """A container's argv as its YAML writes it."""

    tokens: list[Token]
    lists: dict[str, SequenceNode]  # "command" / "args" -> its list
    engine: str | None
    uses: list[FlagUse]  # word.start: the index of the flag's token
    script: Token | None = None  # the `sh -c` script, read by the bash format

    def line(self, text: str, use: FlagUse) -> int:
        return line_of(text, self.tokens[use.word.start].node.start_mark.index)


def argv_tokens(key: str, node, label: str) -> list[Token]:
    if node is None or (isinstance(node, ScalarNode) and node.value in ("", "~", "null")):
        return []
    if not isinstance(node, SequenceNode):
        raise FormatError(f"line {node.start_mark.line + 1}: {key} of container {label} is "
                          "not a list; the ledger reads launch flags from a list of words")
    out = []
    for item in node.value:
        if not isinstance(item, ScalarNode):
            raise FormatError(f"line {item.start_mark.line + 1}: {key} of container {label} "
                              "holds a non-string item")
        out.append(Token(item, node))
    return out


def read_argv(container: MappingNode, label: str) -> Argv:
    """The argv of a container node: its tokens, its launch and the flags on it."""
    lists: dict[str, SequenceNode] = {}
    tokens: list[Token] = []
    for key in ("command", "args"):
        pair = get(container, key)
        found = argv_tokens(key, pair[1] if pair else None, label)
        if pair and isinstance(pair[1], SequenceNode):
            lists[key] = pair[1]
        tokens += found
    script = _script(tokens)
    if script is not None:
        return Argv(tokens, lists, None, [], script)
    words = [Word(i, i, quote_value(t.value)) for i, t in enumerate(tokens)]
    image = (get(container, "image") or (None, None))[1]
    engine, uses = launch_flags(words, image.value if isinstance(image, ScalarNode) else "")
    return Argv(tokens, lists, engine, uses)


def launch_flags(words: list[Word], image: str) -> tuple[str | None, list[FlagUse]]:
    """The engine and the flags of a launch's words (``Word.start``: the word's index):
    a known server start (``vllm serve``, ``python3 -m sglang.launch_server``), else the
    image's entrypoint is the server (``vllm/vllm-openai``) and the flags start at the
    first ``-`` word."""
    from envknobs.formats.common.launch import flag_lookup

    shape = launch_shape(words)
    if shape is not None and not shape.docker:
        engine, args = shape.engine, shape.args
    else:
        engine = "vllm" if "vllm" in image else ("sglang" if "sglang" in image else None)
        first = next((i for i, w in enumerate(words) if w.text.startswith("-")), len(words))
        args = words[first:]
    return engine, scan_flags(args, flag_lookup(engine))


def _script(tokens: list[Token]) -> Token | None:
    i = script_index([t.value for t in tokens])
    return tokens[i] if i is not None else None


def flag_values(argv: Argv) -> dict[str, str]:
    """Flag knob -> value (the last occurrence wins); computed values left out."""
    out: dict[str, str] = {}
    for use in argv.uses:
        if use.value is None:
            out.pop(use.knob, None)
        else:
            out[use.knob] = use.value
    return out


# -- edits ------------------------------------------------------------------------------
def _spans(text: str, toks: list[Token]) -> set[tuple[int, int]]:
    """The text of the items ``toks``: whole lines in a block list; in a flow list each
    run of neighbouring items with the comma that joins it to the rest."""
    spans: set[tuple[int, int]] = set()
    block = sorted((line_start(text, dash_before(text, t.node.start_mark.index)),
                    line_end(text, last_content_end(text, t.node)))
                   for t in toks if not t.seq.flow_style)
    for start, end in block:
        # A flag and its value item with only comment lines between them (SGLang's LWS
        # example: `- --disaggregation-ib-device`, `# should modify ...`, `- mlx5_...`) go
        # as one cut, the comment with them, so a revert puts back that one cut whole.
        prev = max(spans, default=None)
        if prev is not None and all(not ln.strip() or ln.strip().startswith("#")
                                    for ln in text[prev[1]:start].splitlines()):
            spans.discard(prev)
            spans.add((prev[0], end))
        else:
            spans.add((start, end))
    for seq in {id(t.seq): t.seq for t in toks if t.seq.flow_style}.values():
        items = seq.value
        doomed = sorted(k for k, n in enumerate(items) if any(t.node is n for t in toks))
        runs: list[list[int]] = []
        for k in doomed:
            if runs and runs[-1][-1] == k - 1:
                runs[-1].append(k)
            else:
                runs.append([k])
        for run in runs:
            i, j = run[0], run[-1]
            if j + 1 < len(items):
                spans.add((items[i].start_mark.index, items[j + 1].start_mark.index))
            elif i > 0:
                spans.add((items[i - 1].end_mark.index, items[j].end_mark.index))
            else:
                spans.add((items[i].start_mark.index, items[j].end_mark.index))
    return spans


def _rendered(value: str, like: ScalarNode | None, seq: SequenceNode) -> str:
    style, quote = neighbour_style(n for n in seq.value if isinstance(n, ScalarNode))
    return render(value, node_style(like) if like is not None else style, quote)


def _replace(text: str, tok: Token, value: str) -> str:
    if tok.node.style in ("|", ">"):
        raise FormatError(f"line {line_of(text, tok.node.start_mark.index)}: a block scalar "
                          "argument; edit it by hand")
    rendered = _rendered(value, tok.node, tok.seq)
    return text[: tok.node.start_mark.index] + rendered + text[tok.node.end_mark.index :]


def insert_after(text: str, tok: Token, values: list[str]) -> str:
    """New items right after ``tok`` in its list, each in its neighbours' style."""
    rendered = [_rendered(v, None, tok.seq) for v in values]
    if tok.seq.flow_style:
        pos = tok.node.end_mark.index
        return text[:pos] + "".join(", " + r for r in rendered) + text[pos:]
    dash = dash_before(text, tok.node.start_mark.index)
    lead = text[line_start(text, dash) : dash]
    gap = text[dash + 1 : tok.node.start_mark.index] if lead.strip() == "" else " "
    eol = "\r\n" if text.endswith("\r\n") or "\r\n" in text[:200] else "\n"
    pos = line_end(text, last_content_end(text, tok.node))
    lines = "".join(f"{lead}-{gap}{r}{eol}" for r in rendered)
    if pos >= len(text) and not text.endswith("\n"):
        return text + eol + lines[: -len(eol)]
    return text[:pos] + lines + text[pos:]


def remove_items(text: str, toks: list[Token]) -> str:
    """``text`` without the list items ``toks`` (see :func:`_spans`)."""
    spans = sorted(_spans(text, toks), reverse=True)
    for start, end in spans:
        text = text[:start] + text[end:]
    return text


def _empty_list_check(toks: list[Token], text: str) -> None:
    """A block list emptied by a removal leaves its key null: refused where the list names
    a program (its first word is no flag: a container's ``command:``), which would then
    be the image's; a list of arguments only (Helm ``extraArgs:`` holding
    ``- "--enforce-eager"``) is emptied, its key then null, which reads as no arguments
    (and a revert puts the item back where it was)."""
    for seq in {id(t.seq): t.seq for t in toks}.values():
        first = seq.value[0] if seq.value else None
        if isinstance(first, ScalarNode) and str(first.value).startswith("-"):
            continue
        if all(any(t.node is n for t in toks) for n in seq.value) and not seq.flow_style:
            raise FormatError(f"line {line_of(text, seq.start_mark.index)}: removing every "
                              "word of this list would leave its key empty; edit it by hand")


class ListWords:
    """The :class:`~envknobs.formats.yaml.flagedit.Words` editor of words that are YAML
    list items (``command:``/``args:``, a Helm values list)."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.count = len(tokens)

    def value(self, i: int) -> str:
        return self.tokens[i].value

    def line(self, text: str, i: int) -> int:
        return line_of(text, self.tokens[i].node.start_mark.index)

    def replace(self, text: str, i: int, value: str) -> str:
        return _replace(text, self.tokens[i], value)

    def insert_after(self, text: str, i: int, values: list[str]) -> str:
        return insert_after(text, self.tokens[i], values)

    def replace_run(self, text: str, indices: list[int], values: list[str]) -> str:
        run = [self.tokens[k] for k in indices]
        return remove_items(insert_after(text, run[-1], values), run)

    def remove(self, text: str, indices: list[int]) -> str:
        toks = [self.tokens[k] for k in indices]
        _empty_list_check(toks, text)
        return remove_items(text, toks)


def set_flag(text: str, argv: Argv, knob: str, value: str, flag) -> str:
    """``text`` with flag ``knob`` set to ``value`` in the list argv
    (:func:`envknobs.formats.yaml.flagedit.set_flag`)."""
    from envknobs.formats.yaml import flagedit

    return flagedit.set_flag(text, ListWords(argv.tokens), argv.uses, knob, value, flag)


def unset_flag(text: str, argv: Argv, knob: str) -> str:
    """``text`` without any occurrence of flag ``knob`` (its value words too)."""
    from envknobs.formats.yaml import flagedit

    return flagedit.unset_flag(text, ListWords(argv.tokens), argv.uses, knob)


# -- a shell script item ------------------------------------------------------------------
def replace_script(text: str, tok: Token, new: str) -> str:
    """``text`` with the script item ``tok`` holding ``new``: a literal block keeps every
    line that did not change byte for byte; a one-line scalar is re-rendered."""
    node = tok.node
    if node.style == "|":
        start, end = node.start_mark.index, last_content_end(text, node)
        header_end = text.index("\n", start) + 1
        body = text[header_end:end].split("\n")
        old = node.value.split("\n")
        indent = min((len(b) - len(b.lstrip(" ")) for b in body if b.strip()), default=0)
        pad = " " * indent
        lines = new.rstrip("\n").split("\n") if node.value.endswith("\n") else new.split("\n")
        old = old[: len(body)]
        out: list[str] = []
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, lines, autojunk=False).get_opcodes():
            out += body[i1:i2] if op == "equal" else [pad + ln if ln else "" for ln in lines[j1:j2]]
        return text[:header_end] + "\n".join(out) + text[end:]
    if node.style == ">" or (node.style is None and "\n" in text[
            node.start_mark.index:node.end_mark.index]):
        return refolded(text, node, new, "the shell script")
    if "\n" in node.value:
        raise FormatError(f"line {line_of(text, node.start_mark.index)}: the shell script "
                          "is a quoted string over several lines; write it as a `|` block "
                          "to edit it")
    return _replace(text, tok, new)


# -- what the k8s format calls ------------------------------------------------------------
def _bash():
    from envknobs.formats.bash import BashFormat

    return BashFormat()


def _in_script(text: str, tok: Token, action):
    """Run a bash-format action on the script; its errors name the item's line."""
    try:
        return action(tok.value)
    except FormatError as e:
        line = line_of(text, tok.node.start_mark.index)
        raise FormatError(f"in the shell script of line {line}: {e}") from e


def container_flags(container: MappingNode, label: str) -> dict[str, str]:
    """The flags a container's argv gives its server (none when its argv is unreadable:
    an edit of a flag then says why)."""
    try:
        argv = read_argv(container, label)
    except FormatError:
        return {}
    if argv.script is not None:
        try:
            found = _bash().parse(argv.script.value)
        except FormatError:
            return {}
        return {k: v for k, v in found.items() if k.startswith("-")}
    return flag_values(argv)


def script_env(container: MappingNode, label: str) -> set[str]:
    """Env knobs the container's shell script sets itself (they shadow its ``env:`` list)."""
    try:
        argv = read_argv(container, label)
        if argv.script is None:
            return set()
        return {k for k in _bash().parse(argv.script.value) if not k.startswith("-")}
    except FormatError:
        return set()


def canonical_flag_in(container: MappingNode, label: str, text: str, knob: str) -> str:
    """``knob`` as the container's engine spells it in its catalog (``--tp`` -> ``--tp-size``)."""
    from envknobs.flags import canonical_flag
    from envknobs.formats.common.launch import flag_lookup

    argv = read_argv(container, label)
    if argv.script is not None:
        return _in_script(text, argv.script, lambda s: _bash().canonical(s, knob))
    flag = flag_lookup(argv.engine)(knob)
    return flag.name if flag is not None else (canonical_flag(knob) if knob.startswith("--") else knob)  # type: ignore[attr-defined]


def edit_container_flag(
    text: str, container: MappingNode, label: str, knob: str, value: str | None
) -> str:
    """``text`` with flag ``knob`` set to ``value`` (None: removed) in the container's argv."""
    from envknobs.formats.common.launch import flag_lookup

    argv = read_argv(container, label)
    if argv.script is not None:
        tok = argv.script
        bash = _bash()
        new = _in_script(text, tok, lambda s: bash.unset(s, knob) if value is None
                         else bash.set(s, knob, value))
        return text if new == tok.value else replace_script(text, tok, new)
    knob = canonical_flag_in(container, label, text, knob)
    if value is None:
        return unset_flag(text, argv, knob)
    return set_flag(text, argv, knob, value, flag_lookup(argv.engine)(knob))


def flag_lines(text: str, container: MappingNode, label: str) -> dict[str, int]:
    """The file line of the occurrence of each flag that takes effect (``target show``)."""
    try:
        argv = read_argv(container, label)
        if argv.script is None:
            return {u.knob: argv.line(text, u) for u in argv.uses}
        summary = _bash().summary(argv.script.value)
    except FormatError:
        return {}
    node = argv.script.node
    first = line_of(text, node.start_mark.index) + (1 if node.style in ("|", ">") else 0) - 1
    found = {k.knob: first + k.places[-1].line for k in summary.knobs
             if k.knob.startswith("-") and k.places}
    if node.style != "|" and "\n" in text[node.start_mark.index:node.end_mark.index].strip():
        found.update(_folded_lines(text, node, set(found)))
    return found


def _folded_lines(text: str, node: ScalarNode, knobs: set[str]) -> dict[str, int]:
    """The lines of flags in a folded (``>``) or plain multi-line script: folding joins
    its lines into one, so the bash reader's line is the first; each flag word is found
    where it is written (a script the word reader cannot map keeps those lines)."""
    from envknobs.formats.yaml.strwords import ScalarWords

    try:
        words = ScalarWords(text, node, "the shell script")
        return {w.raw.partition("=")[0]: words.line(i) for i, w in enumerate(words.words)
                if w.raw.partition("=")[0] in knobs}
    except FormatError:
        return {}


def _value_token(argv: Argv, knob: str) -> Token | None:
    """The list item holding the value of ``knob``'s occurrence that takes effect: its
    value word (``- --x`` ``- v``), or the flag word itself (``- --x=v``)."""
    use = next((u for u in reversed(argv.uses) if u.knob == knob), None)
    if use is None:
        return None
    if use.form == "space" and len(use.values) == 1:
        tok = argv.tokens[use.values[0].start]
    elif use.form == "equals":
        tok = argv.tokens[use.word.start]
    else:
        return None
    return None if tok.node.style in ("|", ">") else tok


def argv_value_source(text: str, argv: Argv, knob: str) -> str | None:
    """The exact text of the list item holding ``knob``'s value (``mlx5_bond_0,...``
    plain, ``"0.8"`` quoted, ``'--x=v'``): what an entry keeps, so that a revert writes
    the item back in its own style, whatever its neighbours' (issue 50)."""
    tok = _value_token(argv, knob) if argv.script is None else None
    return None if tok is None else text[tok.node.start_mark.index : tok.node.end_mark.index]


def with_argv_source(text: str, argv: Argv, knob: str, source: str) -> str | None:
    """``text`` with the item :func:`argv_value_source` names written as ``source``
    (None: no such item); the caller checks that the file then reads as intended."""
    tok = _value_token(argv, knob) if argv.script is None else None
    if tok is None or "\n" in source:
        return None
    return text[: tok.node.start_mark.index] + source + text[tok.node.end_mark.index :]


def list_argv(seq: SequenceNode, engine: str | None = None) -> Argv:
    """A bare list of argument words (Helm values ``extraArgs``, ``vllm_args``) as an argv."""
    from envknobs.formats.common.launch import flag_lookup

    tokens = argv_tokens("the list", seq, "at this key path")
    words = [Word(i, i, quote_value(t.value)) for i, t in enumerate(tokens)]
    return Argv(tokens, {"args": seq}, engine, scan_flags(words, flag_lookup(engine)))


def edit_list_flag(text: str, seq: SequenceNode, knob: str, value: str | None,
                   engine: str | None = None) -> str:
    """``text`` with flag ``knob`` set (None: removed) in a bare list of argument words,
    spelled and typed by ``engine``'s catalog (None: any engine's)."""
    from envknobs.flags import canonical_flag
    from envknobs.formats.common.launch import flag_lookup

    argv = list_argv(seq, engine)
    flag = flag_lookup(engine)(knob)
    knob = flag.name if flag is not None else canonical_flag(knob)  # type: ignore[attr-defined]
    return unset_flag(text, argv, knob) if value is None else set_flag(text, argv, knob, value, flag)
