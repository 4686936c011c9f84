"""A k8s container as the ``k8s`` format reads it: its ``env:`` items, the ConfigMaps it
takes through ``envFrom``, the knobs all of them give it, and the layout facts an edit of
its lists needs (how far a block list's ``-`` sits, where its argv is)."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of
from envknobs.formats.yaml.argv import container_flags
from envknobs.formats.yaml.argv import read_argv
from envknobs.formats.yaml.containers import Found
from envknobs.formats.yaml.edit import column
from envknobs.formats.yaml.edit import dash_before
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.envargs import with_strings
from envknobs.formats.yaml.envfrom import EnvSource
from envknobs.formats.yaml.envfrom import source_values


@dataclass
class EnvItem:
    name: str
    node: MappingNode
    value: ScalarNode | None  # the `value:` node
    value_key: ScalarNode | None
    from_ref: bool  # has valueFrom


@dataclass
class ContainerEnv:
    found: Found
    env_key: ScalarNode | None
    env: Node | None
    items: list[EnvItem]
    sources: list[EnvSource] = field(default_factory=list)  # envFrom
    text: str = ""  # the file, for the strings of flags in env values (envargs)

    @property
    def node(self) -> MappingNode:
        return self.found.node

    @property
    def label(self) -> str:
        return self.found.address


def container_env(found: Found, key: str = "env") -> ContainerEnv:
    env_pair = get(found.node, key)
    env_key, env = env_pair if env_pair else (None, None)
    items: list[EnvItem] = []
    if isinstance(env, SequenceNode):
        for it in env.value:
            env_name = scalar_text((get(it, "name") or (None, None))[1])
            if isinstance(it, MappingNode) and env_name is not None:
                value_key, value = get(it, "value") or (None, None)
                if value is not None and not isinstance(value, ScalarNode):
                    raise FormatError(
                        f"line {value.start_mark.line + 1}: env {env_name} has a non-scalar value"
                    )
                items.append(
                    EnvItem(env_name, it, value, value_key, get(it, "valueFrom") is not None)
                )
    elif env is not None and scalar_text(env) != "":
        raise FormatError(
            f"line {env.start_mark.line + 1}: {key} of container {found.address} is not a list"
        )
    return ContainerEnv(found, env_key, env, items)


def own_values(c: ContainerEnv) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in c.items:
        found.pop(item.name, None)  # a later duplicate wins, as in Kubernetes
        if not item.from_ref:
            found[item.name] = (scalar_text(item.value) if item.value is not None else "") or ""
    return found


def sourced_values(c: ContainerEnv) -> dict[str, tuple[str, EnvSource, ScalarNode]]:
    """The knobs ``envFrom`` ConfigMaps of the file give the container (``env:`` wins)."""
    named = {it.name for it in c.items}
    return {k: v for k, v in source_values(c.sources).items() if k not in named}


def container_knobs(c: ContainerEnv) -> dict[str, str]:
    sourced = {k: v for k, (v, _, _) in sourced_values(c).items()}
    own = with_strings(c.text, c.items, c.label, own_values(c), container_flags(c.node, c.label),
                       container_engine(c))
    return {**sourced, **own}


def container_engine(c: ContainerEnv) -> str | None:
    try:
        return read_argv(c.node, c.label).engine
    except FormatError:
        return None


def block_offset(text: str, c: ContainerEnv) -> int:
    """How far a block list's '-' sits right of its key in this container's style."""
    f = c.found
    if f.list_key is not None and f.list_node is not None and f.list_node.value:
        dash = dash_before(text, f.list_node.value[0].start_mark.index)
        return max(column(text, dash) - column(text, f.list_key.start_mark.index), 0)
    for key, value in c.node.value:
        if isinstance(value, SequenceNode) and value.value and not value.flow_style:
            dash = dash_before(text, value.value[0].start_mark.index)
            return max(column(text, dash) - column(text, key.start_mark.index), 0)
    return 2


def argv_line(text: str, argv) -> int | None:
    """The line of the container's ``args`` (else ``command``) list."""
    node = argv.lists.get("args") or argv.lists.get("command")
    return line_of(text, node.start_mark.index) if node is not None else None
