"""Keys a YAML map gets through ``<<: *anchor`` merges (issue 50 item 4).

Compose files and Helm values share settings with ``x-common: &common`` and ``<<:
*common``: the program reading the map sees the merged keys as its own.  They are read as
knobs of the map (an explicit key wins over a merged one; of several merged maps the
first that has the key wins, as YAML's merge rule says), and ``target show`` says where
each comes from.  An edit of a merged key is refused, naming both places: writing at the
anchor changes every map that merges it, writing here adds an override for this map
only; which one the operator means is theirs to say, by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError


@dataclass(frozen=True)
class Merged:
    key: ScalarNode  # the key in the anchored map
    value: Node
    merge: ScalarNode  # the `<<` key that brings it in
    source: Node  # the anchored map

    def said(self) -> str:
        anchor = f"&{self.source.anchor} " if getattr(self.source, "anchor", None) else ""
        return (f"line {self.key.start_mark.line + 1} (in {anchor}merged with `<<:` at line "
                f"{self.merge.start_mark.line + 1})")


def merged_keys(mapping: Node | None) -> dict[str, Merged]:
    """The keys ``mapping`` gets only through its ``<<`` merges."""
    if not isinstance(mapping, MappingNode):
        return {}
    own = {str(k.value) for k, _ in mapping.value if isinstance(k, ScalarNode) and k.value != "<<"}
    out: dict[str, Merged] = {}
    for k, v in mapping.value:
        if not (isinstance(k, ScalarNode) and k.value == "<<"):
            continue
        for src in v.value if isinstance(v, SequenceNode) else [v]:
            inner = merged_keys(src)
            pairs = [(kk, vv) for kk, vv in src.value if isinstance(kk, ScalarNode)
                     and kk.value != "<<"] if isinstance(src, MappingNode) else []
            for kk, vv in pairs:
                if str(kk.value) not in own and str(kk.value) not in out:
                    out[str(kk.value)] = Merged(kk, vv, k, src)
            for name, m in inner.items():
                out.setdefault(name, m)
    return out


def merged_values(mapping: Node | None) -> dict[str, str]:
    return {k: str(m.value.value) for k, m in merged_keys(mapping).items()
            if isinstance(m.value, ScalarNode)}


def merged_notes(mapping: Node | None) -> list[str]:
    return [f"{k} comes from {m.said()}" for k, m in merged_keys(mapping).items()]


def refuse_merged(mapping: Node | None, knob: str) -> None:
    """FormatError for an edit of a key the map has only through a merge."""
    m = merged_keys(mapping).get(knob)
    if m is not None:
        raise FormatError(
            f"{knob} comes from {m.said()}: writing it at line {m.key.start_mark.line + 1} "
            f"changes every map that merges it, adding it to this map overrides it here "
            "only; make the change you mean by hand, then record it with --adopt")
