"""A target inside a YAML block scalar: a serve script (SkyPilot ``run: |``), or a YAML
document embedded as a string (a ConfigMap's ``data:`` file, KubeRay's ``serveConfigV2:
|``) (issue 50 item 4).

SkyPilot tasks keep the server's launch in ``run: |`` (and its env in ``envs:``), CI files
in ``steps[N].run: |``: a ``bash`` target with ``--key-path run`` is that script.  A
ConfigMap carries the engine's config file as a string (KAITO's ``inference_config.yaml``
with its ``vllm:`` section), a RayService its Serve config (``serveConfigV2: |`` whose
``applications[0].args`` hold vLLM's ``engine_kwargs``): a ``yaml-map`` target with a key
path ``OUTER|INNER`` (``spec.serveConfigV2|applications[0].args.engine_kwargs``,
``data["inference_config.yaml"]|vllm``) is the map at INNER of the document in the block
at OUTER.

Every read and edit is the inner format's on the block scalar's value (the bash format,
:mod:`envknobs.formats.bash`; the yaml-map format, :mod:`.map`), and an edit goes back
into the block with the lines it did not change byte for byte and the block's
indentation (:func:`~envknobs.formats.yaml.argv.replace_script`).  Lines are the file's:
a place, a launch, a note or an error that names ``line N`` of the block names the file
line it is on, and ``--at LINE`` takes a file line.

Decisions: only a literal block (``|``, ``|-``, ``|+``) is read, since only its lines are
the inner text's lines; a folded or quoted string is refused, saying to write it as a
``|`` block.  The outer document is picked as a ``yaml-map`` key path picks it
(``DOC:PATH`` in a file of several documents, :mod:`.documents`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping
from typing import Sequence

from ruamel.yaml.nodes import ScalarNode

from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import shift_said
from envknobs.formats.common.text import shifted
from envknobs.formats.yaml.documents import pick_document
from envknobs.formats.yaml.documents import split_doc
from envknobs.formats.yaml.edit import compose_all
from envknobs.formats.yaml.edit import format_path
from envknobs.formats.yaml.edit import parse_path
from envknobs.formats.yaml.edit import walk_path



class InBlock(TargetFormat):
    """A format's text in a ``|`` block at a key path; see the module docstring."""

    def __init__(self, key_path: str, inner: TargetFormat) -> None:
        self.doc, path = split_doc(key_path)
        self.steps = parse_path(path or "")
        if not self.steps:
            raise FormatError(f"a {inner.name} target in a YAML block needs the block's key "
                              "path (--key-path run)")
        self.key_path = (f"{self.doc}:" if self.doc else "") + format_path(self.steps)
        self.inner = self.bash = inner
        self.name = inner.name


    # -- the script -------------------------------------------------------------------
    def _node(self, text: str) -> ScalarNode:
        node = walk_path(pick_document(compose_all(text), self.doc, self.steps), self.steps)
        if not isinstance(node, ScalarNode):
            raise FormatError(f"key path {self.key_path!r} holds no string (a `|` block)")
        if node.style != "|":
            raise FormatError(f"line {line_of(text, node.start_mark.index)}: the string at "
                              f"{self.key_path!r} is not a literal `|` block; write it as "
                              "one to manage it (its lines are then the text's lines)")
        return node

    def _shift(self, text: str, node: ScalarNode) -> int:
        return line_of(text, node.start_mark.index)  # the `key: |` line; the body follows

    def _run(self, text: str, action):
        """``action(script)``, its errors naming file lines."""
        node = self._node(text)
        return node, shifted(action, node.value, self._shift(text, node))

    def _edit(self, text: str, action) -> str:
        from envknobs.formats.yaml.argv import Token
        from envknobs.formats.yaml.argv import replace_script

        node, new = self._run(text, action)
        return text if new == node.value else replace_script(text, Token(node, None), new)  # type: ignore[arg-type]

    def _at(self, text: str, at):
        return at - self._shift(text, self._node(text)) if isinstance(at, int) and \
            not isinstance(at, bool) else at

    # -- reads ------------------------------------------------------------------------
    def parse(self, text: str) -> dict[str, str]:
        return self._run(text, self.bash.parse)[1]

    def parse_exact(self, text: str) -> dict[str, str]:
        return self._run(text, self.bash.parse_exact)[1]

    def summary(self, text: str) -> Summary | None:
        node, found = self._run(text, self.bash.summary)
        if found is None:
            return None
        shift = self._shift(text, node)
        return Summary(
            tuple(self._moved(k, shift) for k in found.knobs),
            tuple(replace(x, line=x.line + shift, end_line=x.end_line + shift)
                  for x in found.launches),
            tuple(shift_said(n, shift) for n in found.notes))

    @staticmethod
    def _moved(k: KnobSummary, shift: int) -> KnobSummary:
        return replace(k, places=tuple(replace(p, line=p.line + shift) for p in k.places))

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        node, found = self._run(text, lambda s: self.bash.knob(s, knob))
        return self._moved(found, self._shift(text, node)) if found is not None else None

    def canonical(self, text: str, knob: str) -> str:
        return self._run(text, lambda s: self.bash.canonical(s, knob))[1]

    def source(self, text: str, knob: str) -> str | None:
        return self._run(text, lambda s: self.bash.source(s, knob))[1]

    def select_places(self, text: str, knob: str, at: int | str | None,
                      action: str = "set") -> tuple[Place, ...]:
        node, found = self._run(text, lambda s: self.bash.select_places(
            s, knob, self._at(text, at), action))
        shift = self._shift(text, node)
        return tuple(replace(p, line=p.line + shift) for p in found)

    # -- edits ------------------------------------------------------------------------
    def set(self, text: str, knob: str, value: str, at: int | str | None = None,
            source: str | None = None) -> str:
        how = {k: v for k, v in (("at", self._at(text, at)), ("source", source)) if v is not None}
        return self._edit(text, lambda s: self.bash.set(s, knob, value, **how))

    def unset(self, text: str, knob: str, at: int | str | None = None) -> str:
        how = {"at": self._at(text, at)} if at is not None else {}
        return self._edit(text, lambda s: self.bash.unset(s, knob, **how))

    def removed(self, text: str, knob: str) -> str:
        return self._edit(text, lambda s: self.bash.removed(s, knob))

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        return self._edit(text, lambda s: self.bash.set_exact(s, knob, value, source))

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        return self._edit(text, lambda s: self.bash.edit_places(s, knob, edits))

    def edit_many(self, text: str, edits: Mapping[str, str | None],
                  sources: Mapping[str, str | None] | None = None) -> str:
        return self._edit(text, lambda s: self.bash.edit_many(s, edits, sources))

    def add_many(self, text: str, values: Mapping[str, str]) -> str:
        return self._edit(text, lambda s: self.bash.add_many(s, values))


def script_at(key_path: str) -> InBlock:
    """The bash script in the block at ``key_path`` (SkyPilot's ``run``)."""
    from envknobs.formats.bash import BashFormat

    return InBlock(key_path, BashFormat())
