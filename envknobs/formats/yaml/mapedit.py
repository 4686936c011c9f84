"""Writing a pair of a ``yaml-map`` target's map: the located map, a new value in the old
scalar's type (the format's docstring), a new pair in the map's flow or block style, and
which values are no scalar of their own to edit."""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import newline_of
from envknobs.formats.yaml.edit import column
from envknobs.formats.yaml.edit import insert_at_line
from envknobs.formats.yaml.edit import last_content_end
from envknobs.formats.yaml.scalar import DOUBLE
from envknobs.formats.yaml.scalar import NULL_TAG
from envknobs.formats.yaml.scalar import SINGLE
from envknobs.formats.yaml.scalar import STR_TAG
from envknobs.formats.yaml.scalar import check_yaml_text
from envknobs.formats.yaml.scalar import plain_tag
from envknobs.formats.yaml.scalar import quoted
from envknobs.formats.yaml.scalar import render
from envknobs.formats.yaml.scalar import resolved_tag

@dataclass
class MapAt:
    """The map a key path names, located in the file."""

    node: MappingNode | None  # None: an empty file, or a null value at the key path
    holder: ScalarNode | None  # the key the map sits under (None: the whole file)
    holder_value: Node | None  # the null scalar there, when the map is empty
    service: MappingNode | None = None  # a compose service, for services.NAME.command


def typed_value(value: str, old: ScalarNode, quote: str | None) -> str:
    """``value`` replacing the scalar ``old``, keeping its type (:mod:`envknobs.formats.yaml.map`);
    a new key's value: :func:`envknobs.formats.yaml.newvalue.new_scalar`."""
    check_yaml_text(value)
    if old.style in (SINGLE, DOUBLE):
        return quoted(value, old.style)
    tag = plain_tag(value)
    if tag == NULL_TAG:  # `~` or `null` asked for as text: plain, it would read back as ""
        tag = None
    if tag is None or (resolved_tag(old) == STR_TAG and tag != STR_TAG):
        return quoted(value, quote)
    return value


def check_editable(text: str, key: ScalarNode, node: Node, knob: str) -> None:
    """FormatError where the value of ``knob`` (at ``key``) is no scalar of its own."""
    line = line_of(text, key.start_mark.index)
    if not isinstance(node, ScalarNode):
        raise FormatError(f"line {line}: {knob} holds a list or a map, not a value")
    if node.anchor or node.start_mark.index < key.end_mark.index:
        raise FormatError(
            f"line {line}: {knob} is shared through a YAML anchor; edit it by hand"
        )

def add_pair(text: str, m: MapAt, knob: str, tail: str) -> str:
    """``text`` with the pair ``knob`` + ``tail`` (``: value``) last in the map ``m``, in
    its flow or block style (under its key, or a new file's first line)."""
    eol = newline_of(text)
    entry = f"{render(knob)}{tail}"
    node = m.node
    if node is not None and node.flow_style:
        if node.value:
            pos = node.value[-1][1].end_mark.index
            return text[:pos] + ", " + entry + text[pos:]
        close = text.rfind("}", node.start_mark.index, node.end_mark.index)
        return text[:close] + entry + text[close:]
    if node is not None:
        col = column(text, node.start_mark.index)
        pos = line_end(text, last_content_end(text, node))
        return insert_at_line(text, pos, f"{' ' * col}{entry}{eol}", eol)
    if m.holder is None:  # an empty file (comments at most): the map starts at the end
        if text and not text.endswith("\n"):
            text += eol
        return text + entry + eol
    col = column(text, m.holder.start_mark.index) + 2
    hv = m.holder_value
    if hv is not None and hv.end_mark.index > hv.start_mark.index:  # `key: ~`
        text = text[: hv.start_mark.index].rstrip(" \t") + text[hv.end_mark.index :]
    pos = line_end(text, m.holder.start_mark.index)
    return insert_at_line(text, pos, f"{' ' * col}{entry}{eol}", eol)
