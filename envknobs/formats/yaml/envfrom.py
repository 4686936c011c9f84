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
* a knob neither the ``env:`` list nor a ConfigMap of the file holds, while a ConfigMap of
  the file feeds the container, could go in either place: the edit is refused naming both
  (``file:line``) and ``record ... --in env|configmap`` as the way to select (a k8s format
  made with ``into=``).  ``--in configmap`` adds the key at the end of that ConfigMap's
  ``data:`` (a string; refused where another container takes it); where several
  ConfigMaps of the file feed the container the refusal names each (``file:line``) and
  ``--in configmap:NAME`` picks one; ``--in env`` appends the ``env:`` item, also beside a
  ConfigMap not in the file (the operator chose it: it shadows whatever that ConfigMap
  holds, and the ledger records the file's own ``before=unset``).  A knob set in both
  places is edited in ``env:``, the one the container reads (``env:`` wins over
  ``envFrom``); ``--in configmap`` for it is refused, as that write would take no effect;
  ``--in env`` for a knob only the ConfigMap holds is refused too (an env: item added over
  it would not revert to the ConfigMap's bytes): record it without ``--in``;
* a Secret (its data base64, or out of the ledger's hands) is named in ``target show``'s
  notes only: manifests take their tokens that way (``hf-token``), and refusing every new
  env item beside one would leave the format unusable; tuning knobs do not live in Secrets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import newline_of
from envknobs.formats.yaml.edit import column
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import insert_at_line
from envknobs.formats.yaml.edit import last_content_end
from envknobs.formats.yaml.edit import get_value
from envknobs.formats.yaml.edit import line
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.edit import walk_path
from envknobs.formats.yaml.scalar import neighbour_style
from envknobs.formats.yaml.scalar import render

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


def _config_maps(docs: Sequence[Node | None]) -> dict[str, list[MappingNode]]:
    found: dict[str, list[MappingNode]] = {}
    for doc in docs:
        if scalar_text(get_value(doc, "kind")) == "ConfigMap":
            name = scalar_text(walk_path(doc, ("metadata", "name"))) or ""
            found.setdefault(name, []).append(doc)  # type: ignore[arg-type]
    return found


def env_sources(container, docs: Sequence[Node | None], every) -> list[EnvSource]:
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
        "--format yaml-map --key-path data), or select the env: list with --in env")


INTO = ("env", "configmap", "args")  # args: a flag's place (envargs), not a knob's


def check_into(into: str | None) -> str | None:
    """``into`` if it is ``env``, ``configmap`` or ``configmap:NAME`` (one ConfigMap of
    several the container takes; a colon, as ``--in`` is one word on the command line)."""
    kind, colon, name = (into or "").partition(":")
    if into is not None and (kind not in INTO or (colon and (kind != "configmap" or not name))):
        raise FormatError(f"--in {into!r}: give --in env, --in configmap or --in "
                          "configmap:NAME (a flag: --in args or --in env)")
    return into


def _kind(into: str | None) -> str | None:
    return into.partition(":")[0] if into is not None else None


def read_maps(sources: list[EnvSource]) -> list[EnvSource]:
    """The ConfigMaps of the file that feed the container."""
    return [s for s in sources if s.kind == "ConfigMap" and s.holder is not None]


def refuse_choice(knob: str, label: str, env_line: int, sources: list[EnvSource]) -> None:
    """A new ``knob`` with no ``--in`` where a ConfigMap of the file also feeds the container."""
    maps = read_maps(sources)
    if maps:
        named = "; ".join(f"the data: of {s.label} (line {line(s.data_key or s.holder)})"
                          for s in maps)
        way = "--in configmap" if len(maps) == 1 else \
            " or ".join(f"--in configmap:{s.name}" for s in maps)
        raise FormatError(
            f"{knob} can go in the env: list of container {label} (line {env_line}) or in "
            f"{named}, which it takes through envFrom: select one with --in env or {way}")


def the_map(knob: str, label: str, sources: list[EnvSource], name: str = "") -> EnvSource:
    """The one ConfigMap of the file ``--in configmap[:NAME]`` writes ``knob`` to."""
    maps = [s for s in read_maps(sources) if not name or s.name == name]
    if len(maps) != 1:
        named = "; ".join(f"{s.label} (envFrom, line {s.line}"
                          + (f", data: line {line(s.data_key or s.holder)})" if s.holder else ")")
                          for s in sources if s.kind == "ConfigMap") or "none"
        if name:
            why = f"none of them in this file is {name}"
        else:
            why = ("none of them is in this file" if not maps
                   else f"{len(maps)} of them are in this file: name one with "
                   + " or ".join(f"--in configmap:{s.name}" for s in maps))
        raise FormatError(f"--in configmap{':' + name if name else ''}: container {label} "
                          f"takes ConfigMaps {named}, and {why}; or add {knob} by hand, or "
                          "use --in env")
    check_shared(knob, maps[0])
    if maps[0].data is None or maps[0].data.flow_style or not maps[0].data.value:
        raise FormatError(f"line {line(maps[0].holder)}: {maps[0].label} has no block data: "
                          f"map to add {knob} to; add it by hand")
    return maps[0]


def check_shared(knob: str, source: EnvSource) -> None:
    if source.shared_with:
        raise FormatError(
            f"{knob} comes from {source.label} (line {line(source.holder)}), which "
            f"{', '.join(source.shared_with)} also take through envFrom: editing it there "
            "would change them too; edit it by hand, or give this container its own env: item")


def refuse_into(into: str | None, knob: str, label: str, env_line: int | None,
                sourced: tuple[str, EnvSource, ScalarNode] | None,
                in_map: tuple[str, EnvSource, ScalarNode] | None) -> None:
    """Refuse an ``--in`` that names a place where the write would not take effect.
    ``env_line``: the knob's env: item, if any; ``sourced``: its ConfigMap key where env:
    lacks it; ``in_map``: its ConfigMap key in any case."""
    if _kind(into) == "env" and env_line is None and sourced is not None:
        raise FormatError(
            f"--in env: {knob} is set in {sourced[1].label} (line {line(sourced[2])}); an "
            "env: item added over it would shadow it: record it without --in to edit it there")
    if _kind(into) == "configmap" and env_line is not None:
        where = f" and in {in_map[1].label} (line {line(in_map[2])})" if in_map else ""
        raise FormatError(
            f"--in configmap: {knob} is in the env: list of container {label} (line "
            f"{env_line}){where}; the env: item is the one that takes effect (env: wins over "
            "envFrom), so a ConfigMap edit would change nothing: record it with --in env "
            "or without --in")


def add_to_map(text: str, src: EnvSource, knob: str, value: str, source: str | None) -> str:
    """``text`` with ``knob`` added at the end of ``src``'s block ``data:`` map, a string in
    the quotes its values use (``source``: the exact text after ``:``, where one line)."""
    data = src.data
    first = data.value[0][0]  # type: ignore[union-attr]
    eol = newline_of(text)
    pos = line_end(text, last_content_end(text, data))  # type: ignore[arg-type]
    _, quote = neighbour_style(v for _, v in data.value)  # type: ignore[union-attr]
    val = source if source is not None and "\n" not in source else " " + render(
        value, quote or '"', quote)
    pad = " " * column(text, first.start_mark.index)
    return insert_at_line(text, pos, f"{pad}{render(knob)}:{val}{eol}", eol)


def new_place(into: str | None, knob: str, label: str, env_line: int,
              sources: list[EnvSource]) -> EnvSource | None:
    """Where a knob neither env: nor a ConfigMap of the file holds goes: the ConfigMap to
    add it to (``--in configmap``), or None for the env: list (refused without ``--in``
    where a ConfigMap of the file, or one not in it, could hold it instead)."""
    if into == "args":
        raise FormatError(f"--in args: {knob} is an env knob; give --in env or --in configmap")
    if _kind(into) == "configmap":
        return the_map(knob, label, sources, into.partition(":")[2])  # type: ignore[union-attr]
    if into is None:
        refuse_choice(knob, label, env_line, sources)
        refuse_unread(knob, label, sources)
    return None


__all__ = ["EnvSource", "INTO", "new_place", "add_to_map", "refuse_into", "check_into", "check_shared", "read_maps", "refuse_choice",
           "the_map", "env_sources", "refuse_unread", "source_values",
           "unread"]
