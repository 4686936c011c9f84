"""Finding containers in Kubernetes manifests, and addressing one of them.

Where containers are
    Every mapping in every document is searched.  A ``containers:`` or ``initContainers:``
    list holds containers (Pod, Deployment, StatefulSet, DaemonSet, Job, CronJob, a ``List``,
    LeaderWorkerSet ``leaderTemplate``/``workerTemplate``, RoleBasedGroup roles in any
    pattern, role templates and template patches, any custom resource that embeds a pod
    spec); an OME ``runner:`` mapping is one container (``engineConfig``, ``decoderConfig``,
    ``routerConfig``, their ``leader``/``worker`` blocks, InferenceService components), and
    so are Dynamo's ``extraPodSpec.mainContainer`` and KServe's ``predictor.model``
    (without a ``name``: addressed as ``DOC:PATH``, which the error lists).

Who a container is
    Its *object* is the nearest enclosing mapping with a ``kind`` (its ``KIND`` and
    ``metadata.name``).  Its *roles* are the steps from the object to the container that
    tell places apart: a list item's ``name`` (an RBG role, a role template), a key that is
    not pod-spec plumbing (``spec``, ``template``, ``containers`` ... are left out), with
    ``leaderTemplate``/``leaderTemplatePatch``/``patchLeaderTemplate`` read as ``leader``,
    the worker ones as ``worker``, and OME's ``engineConfig``/``decoderConfig``/
    ``routerConfig`` as ``engine``/``decoder``/``router`` (the long spelling works too).

Addresses (``--container``)
    * ``CONTAINER`` -- the container name, where it is unique in the file;
    * ``NAME/CONTAINER`` or ``KIND/NAME/CONTAINER`` -- within one object;
    * ``ROLE.../CONTAINER``, ``NAME/ROLE.../CONTAINER``, ``KIND/NAME/ROLE.../CONTAINER`` --
      with the container's roles given in full (``prefill/sglang``,
      ``RoleBasedGroup/pd/decode/leader/sglang``, ``srt-ds/engine/worker/ome-container``);
    * ``DOC:PATH`` -- the 1-based document index and the YAML path of the container
      mapping (``2:spec.roles[1].template.spec.containers[0]``): always unique, and the
      only way to name a container that has no ``name``.

    An address matches every container that any reading of it fits; more than one match
    is refused, listing each candidate with the shortest of the forms above that selects
    it alone -- so every address an error suggests works when given back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.yaml.edit import PathStep
from envknobs.formats.yaml.edit import format_path
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import get_value
from envknobs.formats.yaml.edit import line
from envknobs.formats.yaml.edit import parse_path
from envknobs.formats.yaml.edit import scalar_text

LIST_KEYS = ("containers", "initContainers")
RUNNER_KEY = "runner"
# Mappings that are one container without a `containers:` list: OME's `runner:`, Dynamo's
# `extraPodSpec.mainContainer`, KServe's `predictor.model` (its args/env/image).
SINGLE_KEYS = frozenset({RUNNER_KEY, "mainContainer"})


def _single_container(word: str, path: tuple) -> bool:
    return word in SINGLE_KEYS or (word == "model" and path[-1:] == ("predictor",))
# Steps that every pod spec has: they tell no two places apart.
PLUMBING = frozenset(
    {
        "spec", "template", "containers", "initContainers", "jobTemplate",
        "leaderWorkerTemplate", "roles", "items", "standalonePattern", "leaderWorkerPattern",
        "templateRef", "patch", "runner", "podTemplate", "podSpec", "extraPodSpec",
        "mainContainer",
    }
)
ALIASES = {
    "leaderTemplate": "leader",
    "leaderTemplatePatch": "leader",
    "patchLeaderTemplate": "leader",
    "workerTemplate": "worker",
    "workerTemplatePatch": "worker",
    "patchWorkerTemplate": "worker",
    "engineConfig": "engine",
    "decoderConfig": "decoder",
    "routerConfig": "router",
}
_SEGMENT_RE = re.compile(r"[^\s/:]+\Z")
_PATH_ADDRESS_RE = re.compile(r"(\d+):(.+)\Z")


@dataclass(frozen=True)
class Segment:
    """One step of a container's roles: shown as ``text``, also matched by ``spellings``."""

    text: str
    spellings: frozenset[str]

    def matches(self, word: str) -> bool:
        return word in self.spellings


@dataclass
class Found:
    """One container mapping found in the file."""

    doc: int  # 1-based document index
    path: tuple[PathStep, ...]  # from the document root to the container mapping
    kind: str
    object_name: str
    roles: tuple[Segment, ...]
    name: str  # "" when the container has no name
    node: MappingNode
    list_key: ScalarNode | None  # the `containers:` key (None for a `runner:`)
    list_node: SequenceNode | None
    init: bool = False
    address: str = field(default="", compare=False)  # filled by `find_containers`

    @property
    def path_address(self) -> str:
        return f"{self.doc}:{format_path(self.path)}"

    @property
    def line(self) -> int:
        return line(self.node)

    def place(self, path: str | None = None) -> str:
        """``line 40: RoleBasedGroup/pd, role prefill`` (``FILE:40: ...`` given the file)."""
        obj = "/".join(p for p in (self.kind, self.object_name) if p) or f"document {self.doc}"
        roles = "/".join(s.text for s in self.roles)
        init = ", init container" if self.init else ""
        at = f"{path}:{self.line}" if path else f"line {self.line}"
        return f"{at}: {obj}" + (f", role {roles}" if roles else "") + init

    @property
    def where(self) -> str:
        return self.place()


def _segment_for_key(key: str) -> Segment | None:
    if key in PLUMBING:
        return None
    alias = ALIASES.get(key, key)
    return Segment(alias, frozenset({alias, key}))


def _segment_for_item(item: Node, index: int) -> Segment:
    name = scalar_text(get_value(item, "name"))
    if name:
        return Segment(name, frozenset({name}))
    return Segment(f"[{index}]", frozenset({f"[{index}]"}))


class _Walker:
    def __init__(self, doc: int) -> None:
        self.doc = doc
        self.found: list[Found] = []
        self.seen: set[int] = set()  # node ids: an alias is visited once

    def walk(self, node: Node, path: tuple, obj: tuple[str, str], roles: tuple) -> None:
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        if isinstance(node, SequenceNode):
            for i, child in enumerate(node.value):
                self.walk(child, path + (i,), obj, roles + (_segment_for_item(child, i),))
            return
        if not isinstance(node, MappingNode):
            return
        if get(node, "kind") is not None:
            kind = scalar_text(get_value(node, "kind")) or ""
            name = scalar_text(get_value(get_value(node, "metadata"), "name")) or ""
            obj, roles = (kind, name), ()
        for key, value in node.value:
            word = key.value if isinstance(key, ScalarNode) else None
            if not isinstance(word, str):
                continue
            step = _segment_for_key(word)
            here = roles + ((step,) if step else ())
            if word in LIST_KEYS and isinstance(value, SequenceNode):
                self._list(key, value, path + (word,), obj, here)
            elif _single_container(word, path) and isinstance(value, MappingNode):
                self._add(value, path + (word,), obj, here, None, None, False)
            elif word != "metadata":
                self.walk(value, path + (word,), obj, here)

    def _list(self, key: ScalarNode, seq: SequenceNode, path: tuple, obj, roles) -> None:
        if id(seq) in self.seen:
            return
        self.seen.add(id(seq))
        for i, item in enumerate(seq.value):
            if isinstance(item, MappingNode):
                self._add(item, path + (i,), obj, roles, key, seq, key.value == "initContainers")

    def _add(self, node, path, obj, roles, list_key, list_node, init) -> None:
        if id(node) in self.seen:  # the same container reached again through an alias
            return
        self.seen.add(id(node))
        name = scalar_text(get_value(node, "name")) or ""
        self.found.append(
            Found(self.doc, path, obj[0], obj[1], tuple(roles), name, node, list_key,
                  list_node, init)
        )


def find_containers(docs: Sequence[Node | None]) -> list[Found]:
    """Every container in the documents, each with its shortest working address."""
    found: list[Found] = []
    for i, doc in enumerate(docs, 1):
        if doc is not None:
            walker = _Walker(i)
            walker.walk(doc, (), ("", ""), ())
            found.extend(walker.found)
    for c in found:
        c.address = shortest_address(c, found)
    return found


def _forms(c: Found) -> list[list[str]]:
    """The segment forms of ``c``'s addresses, shortest first (without the path form)."""
    if not c.name:
        return []
    roles = [s.text for s in c.roles]
    obj = [c.object_name] if c.object_name else []
    kind_obj = [c.kind, c.object_name] if c.kind and c.object_name else []
    out: list[list[str]] = []
    for qual in ([], obj, roles, obj + roles, kind_obj, kind_obj + roles):
        if qual + [c.name] not in out:
            out.append(qual + [c.name])
    return out


def _fits(words: list[str], c: Found) -> bool:
    """Whether the address ``words`` (container name last) reads as container ``c``."""
    *qual, name = words
    if name != c.name or not c.name:
        return False
    if not qual:
        return True
    roles = c.roles

    def roles_fit(rest: list[str]) -> bool:
        return len(rest) == len(roles) and all(s.matches(w) for s, w in zip(roles, rest))

    readings = [roles_fit(qual)]
    if c.object_name and qual[0] == c.object_name:
        readings += [len(qual) == 1, roles_fit(qual[1:])]
    if c.kind and c.object_name and len(qual) >= 2 and qual[:2] == [c.kind, c.object_name]:
        readings += [len(qual) == 2, roles_fit(qual[2:])]
    return any(readings)


def select(address: str, every: list[Found]) -> list[Found]:
    """The containers ``address`` fits (see the module docstring)."""
    m = _PATH_ADDRESS_RE.match(address)
    if m:
        doc, steps = int(m.group(1)), parse_path(m.group(2))
        return [c for c in every if c.doc == doc and c.path == steps]
    words = address.split("/")
    return [c for c in every if _fits(words, c)]


def shortest_address(c: Found, every: list[Found]) -> str:
    """The shortest address that selects exactly ``c`` among ``every``."""
    for words in _forms(c):
        chosen = [o for o in every if _fits(words, o)]
        if chosen == [c]:
            return "/".join(words)
    return c.path_address


def check_address(address: str) -> str:
    """``address`` if it is well formed, else FormatError saying the forms."""
    m = _PATH_ADDRESS_RE.match(address or "")
    if m:
        if int(m.group(1)) < 1:
            raise FormatError(f"invalid container address {address!r}: documents count from 1")
        parse_path(m.group(2))
        return address
    words = (address or "").split("/")
    if not address or not all(_SEGMENT_RE.match(w) for w in words):
        raise FormatError(
            f"invalid container address {address!r}: use CONTAINER, NAME/CONTAINER, "
            "KIND/NAME[/ROLE...]/CONTAINER, or DOC:PATH (e.g. 1:spec.template.spec.containers[0])"
        )
    return address


def listing(candidates: list[Found], path: str | None = None) -> str:
    """One line per candidate: its working address and where it is."""
    width = max(len(c.address) for c in candidates)
    return "\n".join(f"  {c.address:<{width}}  ({c.place(path)})" for c in candidates)


class _Candidates(FormatError):
    def __init__(self, head: str, candidates: list[Found]) -> None:
        self.head = head
        self.candidates = candidates
        super().__init__(self.render())

    def render(self, path: str | None = None) -> str:
        """The message, each candidate placed as ``FILE:LINE`` when ``path`` is given."""
        if not self.candidates:
            return self.head
        return f"{self.head}:\n{listing(self.candidates, path)}"


class ContainerNotFound(_Candidates):
    """No container fits the address; ``candidates`` are every container in the file."""


class ContainerAmbiguous(_Candidates):
    """Several containers fit the address; ``candidates`` are those containers."""


def _inventory(docs: Sequence[Node | None]) -> str:
    """What the documents hold, for a file with no container at all."""
    parts = []
    for i, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if not isinstance(doc, MappingNode):
            parts.append(f"document {i}: a {type(doc).__name__.replace('Node', '').lower()}")
            continue
        kind = scalar_text(get_value(doc, "kind")) or "no kind"
        name = scalar_text(get_value(get_value(doc, "metadata"), "name"))
        spec = get_value(doc, "spec")
        keys = [str(k.value) for k, _ in spec.value] if isinstance(spec, MappingNode) else []
        top = [str(k.value) for k, _ in doc.value if isinstance(k, ScalarNode)]
        what = f"spec keys: {', '.join(keys)}" if keys else f"keys: {', '.join(top)}"
        label = f"{kind}/{name}" if name else kind
        parts.append(f"document {i} (line {line(doc)}): {label} ({what})")
    return "; ".join(parts) or "no documents"


def locate(address: str, docs: Sequence[Node | None]) -> tuple[Found, list[Found]]:
    """The one container ``address`` selects, and every container of the file.

    FormatError (ContainerNotFound / ContainerAmbiguous) naming the candidates, each with
    an address that selects it alone.
    """
    every = find_containers(docs)
    if not every:
        raise ContainerNotFound(
            "no containers in the file (looked for containers:/initContainers: lists and "
            f"OME runner: blocks in every document); it holds {_inventory(docs)}",
            [],
        )
    chosen = select(address, every)
    if not chosen:
        raise ContainerNotFound(
            f"container {address!r} not found; the containers in the file are", every
        )
    if len(chosen) > 1:
        raise ContainerAmbiguous(
            f"container {address!r} is ambiguous: it fits {len(chosen)} containers; "
            "select one with --container and one of these addresses",
            chosen,
        )
    return chosen[0], every


__all__ = [
    "ContainerAmbiguous",
    "ContainerNotFound",
    "Found",
    "Segment",
    "check_address",
    "find_containers",
    "listing",
    "locate",
    "select",
    "shortest_address",
]
