"""Strings of flags in an env map at a key path (issue 50 item 4): a compose service's
``environment: {VLLM_ARGS: "--max-model-len 8192 ..."}`` that the image's entrypoint
expands, a Helm values env map.

The env map is the ``yaml-map`` format's (:mod:`.map`); this wrapper reads a value that
is a string of flags the way the k8s format reads one in an env item
(:mod:`.envargs`: the same strings, splices and refusals): its flags are knobs named
``--flag``, the variable holding them is not edited whole, and a new flag goes into the
map's one string.  A map with no such string is the plain format's, untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import ScalarNode

from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import verified
from envknobs.formats.yaml.envargs import edit_in_strings
from envknobs.formats.yaml.envargs import env_strings
from envknobs.formats.yaml.envargs import holder_refusal
from envknobs.formats.yaml.envargs import string_uses
from envknobs.formats.yaml.envargs import with_strings
from envknobs.formats.yaml.putback import FlagPlaces
from envknobs.formats.yaml.putback import line_summary


@dataclass(frozen=True)
class _Item:  # what envargs reads of an env item
    name: str
    node: ScalarNode
    value: ScalarNode | None
    from_ref: bool = False


class EnvMapStrings(FlagPlaces, TargetFormat):
    """An env map whose values may be strings of flags; see the module docstring."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.label = f"the env map at {inner.key_path or 'the file'}"

    def _items(self, text: str) -> list[_Item]:
        try:
            node = self.inner._locate(text).node
        except FormatError:
            return []
        if not isinstance(node, MappingNode):
            return []
        return [_Item(str(k.value), k, v if isinstance(v, ScalarNode) else None)
                for k, v in node.value if isinstance(k, ScalarNode) and k.value != "<<"]

    def _strings(self, text: str) -> list[_Item]:
        items = self._items(text)
        return items if env_strings(text, items, self.label) else []

    # -- reads ------------------------------------------------------------------------
    def parse(self, text: str) -> dict[str, str]:
        items = self._strings(text)
        found = self.inner.parse(text)
        return with_strings(text, items, self.label, found, {}, None) if items else found

    def parse_exact(self, text: str) -> dict[str, str]:
        return self.parse(text) if self._strings(text) else self.inner.parse_exact(text)

    def summary(self, text: str) -> Summary | None:
        items = self._strings(text)
        if not items:
            return self.inner.summary(text)
        plain = self.inner.summary(text)
        rows = [(k.knob, k.places[0].line, k.places[0].value) for k in plain.knobs
                if k.knob not in {s.name for s in env_strings(text, items, self.label)}]
        rows += [(knob, line_of(text, held[-1][1].word.start), held[-1][1].value)
                 for knob, held in string_uses(text, items, self.label, None).items()]
        return line_summary(text, rows, self.label, notes=plain.notes)

    def canonical(self, text: str, knob: str) -> str:
        return self.inner.canonical(text, knob)

    def source(self, text: str, knob: str) -> str | None:
        return None if is_flag_name(knob) and self._strings(text) else \
            self.inner.source(text, knob)

    def select_places(self, text: str, knob: str, at, action: str = "set"):
        return self.inner.select_places(text, knob, at, action)

    # -- edits ------------------------------------------------------------------------
    def _flag(self, text: str, knob: str, value: str | None) -> str | None:
        items = self._strings(text)
        if not items or not is_flag_name(knob):
            holder = holder_refusal(text, items, self.label, knob) if items else None
            if holder is not None:
                raise FormatError(holder)
            return None
        before = self.parse(text)
        out = edit_in_strings(text, items, self.label, None, knob, value, None, True)
        if out is None:
            return text  # an unset of a flag no string holds
        return out if out == text else verified(before, self.parse(out), knob, value, out)

    def set(self, text: str, knob: str, value: str, source: str | None = None) -> str:
        out = self._flag(text, knob, value)
        return out if out is not None else self.inner.set(text, knob, value, source=source)

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        return self.set(text, knob, value, source)

    def unset(self, text: str, knob: str) -> str:
        out = self._flag(text, knob, None)
        return out if out is not None else self.inner.unset(text, knob)

    def removed(self, text: str, knob: str) -> str:
        return self.unset(text, knob)

    def knob(self, text: str, knob: str):
        return FlagPlaces.knob(self, text, knob) if self._strings(text) else \
            self.inner.knob(text, knob)

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        return FlagPlaces.edit_places(self, text, knob, edits) if self._strings(text) else \
            self.inner.edit_places(text, knob, edits)
