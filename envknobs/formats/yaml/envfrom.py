"""Env a container gets through ``envFrom:``: ConfigMaps (and Secrets) it references.

Kubernetes gives a container every key of each ``envFrom`` source (``configMapRef`` or
``secretRef``, with an optional ``prefix``); a later source wins over an earlier one for
the same name, and the container's own ``env:`` list wins over them all.  So a knob can
reach a container from a ConfigMap that no ``env:`` item names, and an ``env:`` item added
for it would shadow the ConfigMap's value while the ledger says it was unset before.

What the k8s format makes of it (decisions where Kubernetes leaves a choice to us):

* a ConfigMap written in the same file (a document with ``kind: ConfigMap`` and that
  ``metadata.name``; the namespace must agree where both give one) is read: its ``data:``
  keys are the container's knobs (``target show`` lists them with the line of the key),
  and ``record knob`` edits the key there (values are strings: a ConfigMap's data holds
  nothing else) -- unless another container of the file also takes that ConfigMap, which
  would change with it: that is refused, naming the other containers (``file:line``);
* a ConfigMap not in the file is *named*: an edit of an env knob that the container's
  ``env:`` does not hold is refused with the reference's line, since the value may come
  from there (the ledger cannot say ``before=unset``); a knob the ``env:`` list holds is
  edited there as before (``env:`` wins);
* a Secret (its data base64, or out of the ledger's hands) is named in ``target show``'s
  notes only: manifests take their tokens that way (``hf-token``), and refusing every new
  env item beside one would leave the format unusable; tuning knobs do not live in Secrets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import get_value
from envknobs.formats.yaml.edit import line
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.edit import walk_path

_REFS = {"configMapRef": "ConfigMap", "secretRef": "Secret"}


@dataclass
class EnvSource:
    """One ``envFrom`` item of a container."""

    kind: str  # "ConfigMap" | "Secret"
    name: str
    prefix: str
    line: int  # the envFrom item's line
    data: MappingNode | None = None  # the ConfigMap's `data:` when it is in the file
    data_key: ScalarNode | None = None  # the `data:` key (an empty `data:` has no map)
    holder: MappingNode | None = None  # the ConfigMap document
    shared_with: tuple[str, ...] = ()  # other containers taking it ("container X (line N)")

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def _refs(container: MappingNode) -> list[EnvSource]:
    seq = get_value(container, "envFrom")
    out = []
    for item in seq.value if isinstance(seq, SequenceNode) else ():
        for key, kind in _REFS.items():
            ref = get_value(item, key)
            name = scalar_text(get_value(ref, "name"))
            if name:
                prefix = scalar_text(get_value(item, "prefix")) or ""
                out.append(EnvSource(kind, name, prefix, line(item)))
    return out


def _namespace(node: Node | None) -> str:
    return scalar_text(walk_path(node, ("metadata", "namespace"))) or ""


def _config_maps(docs: list[Node | None]) -> dict[str, list[MappingNode]]:
    found: dict[str, list[MappingNode]] = {}
    for doc in docs:
        if scalar_text(get_value(doc, "kind")) == "ConfigMap":
            name = scalar_text(walk_path(doc, ("metadata", "name"))) or ""
            found.setdefault(name, []).append(doc)  # type: ignore[arg-type]
    return found


def env_sources(container, docs: list[Node | None], every) -> list[EnvSource]:
    """The ``envFrom`` sources of ``container`` (a ``Found``), ConfigMaps of the file read,
    each with the other containers of ``every`` that take it too."""
    sources = _refs(container.node)
    if not sources:
        return []
    maps = _config_maps(docs)
    owner = _namespace(docs[container.doc - 1])
    for s in sources:
        if s.kind != "ConfigMap":
            continue
        docs_named = [d for d in maps.get(s.name, ())
                      if not owner or not _namespace(d) or _namespace(d) == owner]
        if len(docs_named) > 1:
            lines = ", ".join(str(line(d)) for d in docs_named)
            raise FormatError(f"line {s.line}: ConfigMap {s.name} is written {len(docs_named)} "
                              f"times in the file (lines {lines}); which one is meant?")
        if docs_named:
            s.holder = docs_named[0]
            pair = get(s.holder, "data")
            s.data_key = pair[0] if pair else None
            s.data = pair[1] if pair and isinstance(pair[1], MappingNode) else None
            s.shared_with = tuple(
                f"container {c.address} (line {c.line})" for c in every if c.node is not container.node
                and any(r.kind == "ConfigMap" and r.name == s.name for r in _refs(c.node)))
    return sources


def source_values(sources: list[EnvSource]) -> dict[str, tuple[str, EnvSource, ScalarNode]]:
    """Knob -> (value, its source, its data key) of the ConfigMaps read (a later source wins)."""
    out: dict[str, tuple[str, EnvSource, ScalarNode]] = {}
    for s in sources:
        for key, value in s.data.value if s.data is not None else ():
            text = scalar_text(value)
            if isinstance(key, ScalarNode) and text is not None:
                out[s.prefix + str(key.value)] = (text, s, key)
    return out


def unread(sources: list[EnvSource]) -> list[EnvSource]:
    """The sources whose keys the ledger cannot see (Secrets, ConfigMaps not in the file)."""
    return [s for s in sources if s.holder is None]


def refuse_unread(knob: str, label: str, sources: list[EnvSource]) -> None:
    """Refuse an edit of ``knob`` that ``env:`` lacks while unread sources may hold it."""
    hidden = [s for s in unread(sources) if s.kind == "ConfigMap"]
    if not hidden:
        return
    named = "; ".join(f"{s.label} (envFrom, line {s.line})" for s in hidden)
    raise FormatError(
        f"{knob} is not in the env: list of container {label}, but it may reach the "
        f"container from {named}, which the ledger cannot read here: an env: item would "
        "shadow its value. Edit it where it lives (a ConfigMap file is a target with "
        "--format yaml-map --key-path data), or add the env: item by hand")


def check_shared(knob: str, source: EnvSource) -> None:
    if source.shared_with:
        raise FormatError(
            f"{knob} comes from {source.label} (line {line(source.holder)}), which "
            f"{', '.join(source.shared_with)} also take through envFrom: editing it there "
            "would change them too; edit it by hand, or give this container its own env: item")


__all__ = ["EnvSource", "check_shared", "env_sources", "refuse_unread", "source_values",
           "unread"]
