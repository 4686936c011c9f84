"""Surgical edits of YAML text at the offsets ruamel's composer reports.

Nothing is ever dumped: the composer (safe, pure: it folds ``>`` scalars as loaders do)
gives nodes with exact source marks, and the formats splice the original text there.

The *value span* of a ``key: value`` pair is everything after the key's colon up to the
end of the scalar's content (for an empty value: the one blank after the colon, if any).
Its text is the value's *source*: put back verbatim, it restores the value byte for
byte (style, quotes, the blanks before it); what follows on the line (a comment) is never
part of the span, so it stays whatever is written.
"""

from __future__ import annotations

import functools
import re

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import MAX_NESTING
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import line_start
from envknobs.formats.yaml.scalar import NULL_TAG

PathStep = str | int
_KEY_RE = re.compile(r"[A-Za-z0-9_-]+\Z")
_STEP_RE = re.compile(r'\.?([A-Za-z0-9_-]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


class _NestingComposer(Composer):
    """ruamel's composer (one recursion per level), refusing mappings and lists nested
    deeper than :data:`MAX_NESTING`."""

    nesting = 0

    def _deeper(self, compose, anchor):  # type: ignore[no-untyped-def]
        if self.nesting >= MAX_NESTING:
            mark = self.parser.peek_event().start_mark
            raise FormatError(f"line {mark.line + 1}: mappings and lists nested more than "
                              f"{MAX_NESTING} deep")
        self.nesting += 1
        try:
            return compose(anchor)
        finally:
            self.nesting -= 1

    def compose_sequence_node(self, anchor):  # type: ignore[no-untyped-def]
        return self._deeper(super().compose_sequence_node, anchor)

    def compose_mapping_node(self, anchor):  # type: ignore[no-untyped-def]
        return self._deeper(super().compose_mapping_node, anchor)


def compose_all(text: str) -> tuple[Node | None, ...]:
    """Every document of ``text`` as a node tree (None for an empty document); nesting
    deeper than :data:`MAX_NESTING` is refused (the walks over the tree recurse too).

    The trees are shared by every caller of the same text and must not be changed (no
    format does: edits splice the text at the nodes' marks).  A format reads one text
    many times over (its path, its env list, its argument list, each with its own walk):
    composing once per text made a summary of a 600-byte manifest ~20 times cheaper."""
    return _composed(text)


@functools.lru_cache(maxsize=8)
def _composed(text: str) -> tuple[Node | None, ...]:
    yaml = YAML(typ="safe", pure=True)
    yaml.Composer = _NestingComposer
    try:
        return tuple(yaml.compose_all(text))
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise FormatError(f"{where}invalid YAML: {e.problem or e.context}") from None
    except YAMLError as e:
        raise FormatError(f"invalid YAML: {e}") from None


def get(node: Node | None, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) pair of ``key`` in a mapping node, or None."""
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return k, v
    return None


def get_value(node: Node | None, key: str) -> Node | None:
    pair = get(node, key)
    return pair[1] if pair else None


def scalar_text(node: Node | None) -> str | None:
    """A scalar's string value (a plain null reads as ``""``); None for other nodes."""
    if isinstance(node, ScalarNode):
        if node.tag == NULL_TAG and node.style is None:
            return ""
        return node.value
    return None


def line(node: Node) -> int:
    return node.start_mark.line + 1


def column(text: str, pos: int) -> int:
    return pos - line_start(text, pos)


def last_content_end(text: str, node: Node) -> int:
    """Offset just past the last character of ``node``'s source (trailing blanks excluded)."""
    while isinstance(node, (MappingNode, SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        if isinstance(last, tuple):
            key, value = last
            empty = isinstance(value, ScalarNode) and value.start_mark.index == value.end_mark.index
            node = key if empty else value
        else:
            node = last
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":
        end -= 1
    return end


def dash_before(text: str, pos: int) -> int:
    """Offset of the '-' that introduces the block sequence item starting at ``pos``."""
    i = pos - 1
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    if i < 0 or text[i] != "-":
        raise FormatError(f"line {line_of(text, pos)}: cannot find the '-' of this list item")
    return i


def value_span(text: str, key: ScalarNode, value: Node) -> tuple[int, int]:
    """[start, end) of the value span of ``key: value`` (see the module docstring)."""
    start = text.index(":", key.end_mark.index) + 1
    if value.start_mark.index == value.end_mark.index:  # empty: its mark is elsewhere
        return start, start + 1 if text[start : start + 1] == " " else start
    if isinstance(value, ScalarNode) and value.style in ("|", ">"):
        return start, last_content_end(text, value)
    return start, value.end_mark.index


def splice_value(text: str, key: ScalarNode, value: Node, rendered: str) -> str:
    """``text`` with the scalar of ``key: value`` replaced by ``rendered``.

    The blanks between the colon and the old scalar stay; an empty value gets one.
    """
    start, end = value_span(text, key, value)
    if value.start_mark.index == value.end_mark.index:
        return text[:start] + " " + rendered + text[end:]
    return text[:start] + text[start : value.start_mark.index] + rendered + text[end:]


def splice_source(text: str, key: ScalarNode, value: Node, source: str) -> str:
    """``text`` with the value span of ``key: value`` replaced by ``source`` verbatim."""
    start, end = value_span(text, key, value)
    return text[:start] + source + text[end:]


def insert_at_line(text: str, pos: int, lines: str, eol: str) -> str:
    """Insert whole ``lines`` at a line start ``pos`` (at EOF without a final newline,
    the new lines go after a line break and the file still ends without one)."""
    if pos >= len(text) and text and not text.endswith("\n"):
        return text + eol + lines[: -len(eol)]
    return text[:pos] + lines + text[pos:]


def format_path(steps: tuple[PathStep, ...]) -> str:
    """``spec.roles[1].template`` from ("spec", "roles", 1, "template")."""
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _KEY_RE.match(step):
            out += f".{step}" if out else step
        else:
            escaped = step.replace("\\", "\\\\").replace('"', '\\"')
            out += f'["{escaped}"]'
    return out


def parse_path(path: str) -> tuple[PathStep, ...]:
    """The steps of a path written by :func:`format_path`; FormatError if malformed."""
    steps: list[PathStep] = []
    pos = 0
    while pos < len(path):
        m = _STEP_RE.match(path, pos)
        if m is None or (m.group(0).startswith(".") and not steps):
            raise FormatError(
                f"invalid YAML path {path!r} at {path[pos:]!r}: "
                'use keys joined by dots, [N] for list items, ["key"] for odd keys'
            )
        key, index, quoted = m.groups()
        if index is not None:
            steps.append(int(index))
        elif quoted is not None:
            steps.append(re.sub(r"\\(.)", r"\1", quoted))
        else:
            steps.append(key)
        pos = m.end()
    return tuple(steps)


def remove_pair(text: str, mapping: MappingNode, key: ScalarNode, node: Node) -> str:
    """``text`` without the pair ``key: node`` of ``mapping``: its lines in a block map
    (a file's last line keeps the file's missing final newline), its item and one comma
    in a flow map."""
    if mapping.flow_style:
        items = list(mapping.value)
        k = next(i for i, (kk, _) in enumerate(items) if kk is key)
        if k + 1 < len(items):
            start, end = key.start_mark.index, items[k + 1][0].start_mark.index
        elif k > 0:
            start, end = items[k - 1][1].end_mark.index, node.end_mark.index
        else:
            start, end = key.start_mark.index, node.end_mark.index
    else:
        last = node if node.end_mark.index > node.start_mark.index else key
        start = line_start(text, key.start_mark.index)
        end = line_end(text, last_content_end(text, last))
        if end >= len(text) and not text.endswith("\n") and start > 0:
            start -= 2 if start > 1 and text[start - 2] == "\r" else 1
    return text[:start] + text[end:]


def item_spans(text: str, key: ScalarNode | None, seq: SequenceNode, doomed: list[Node]
               ) -> list[tuple[int, int]]:
    """The spans of text that removing the ``doomed`` items of the list ``seq`` (under
    ``key``) takes out: each item's lines, or the key with the list when all go; in a
    flow list the item with one separator."""
    if seq.flow_style:
        spans = []
        for it in doomed:
            k = seq.value.index(it)
            if k + 1 < len(seq.value):
                spans.append((it.start_mark.index, seq.value[k + 1].start_mark.index))
            elif k > 0:
                spans.append((seq.value[k - 1].end_mark.index, it.end_mark.index))
            else:
                spans.append((it.start_mark.index, it.end_mark.index))
        return spans
    if len(doomed) == len(seq.value) and key is not None:
        return [
            (
                line_start(text, key.start_mark.index),
                line_end(text, last_content_end(text, seq)),
            )
        ]
    return [
        (
            line_start(text, dash_before(text, it.start_mark.index)),
            line_end(text, last_content_end(text, it)),
        )
        for it in doomed
    ]


def walk_path(root: Node | None, steps: tuple[PathStep, ...]) -> Node | None:
    """The node at ``steps`` under ``root``, or None if the path leads nowhere."""
    node = root
    for step in steps:
        if isinstance(step, int):
            if not isinstance(node, SequenceNode) or step >= len(node.value):
                return None
            node = node.value[step]
        else:
            node = get_value(node, step)
    return node


__all__ = [
    "PathStep",
    "column",
    "compose_all",
    "dash_before",
    "format_path",
    "get",
    "get_value",
    "insert_at_line",
    "item_spans",
    "last_content_end",
    "line",
    "parse_path",
    "remove_pair",
    "scalar_text",
    "splice_source",
    "splice_value",
    "value_span",
    "walk_path",
]
