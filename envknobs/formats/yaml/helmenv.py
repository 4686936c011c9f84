"""A Kubernetes ``env:`` list of ``name``/``value`` items outside a pod spec.

Helm values files keep a container's env one level up, for their templates to render:
production-stack's ``servingEngineSpec.modelSpec[0].env``, OPEA's ``vllm.extraEnv``-like
lists.  A ``yaml-map`` target whose key path ends at such a list (its items are mappings,
or the key is ``env`` and the list is empty) reads and edits it exactly as the ``k8s``
format edits a container's ``env:``: the mapping holding the list stands for the container
(:class:`envknobs.formats.yaml.k8s.K8sFormat` does the work, so quoting, new items in the
neighbours' shape, ``valueFrom`` items refused, exact sources all hold the same way).
A mapping that also has ``command:``/``args:`` is container-like: its flags are read too.
"""

from __future__ import annotations

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.yaml.containers import Found
from envknobs.formats.yaml.edit import PathStep
from envknobs.formats.yaml.edit import compose_all
from envknobs.formats.yaml.edit import format_path
from envknobs.formats.yaml.edit import walk_path
from envknobs.formats.yaml.k8s import K8sFormat
from envknobs.formats.yaml.k8senv import container_env


def is_name_value_list(node: Node | None, last: PathStep) -> bool:
    """True for a list of ``name``/``value`` mappings (or an empty ``env:`` list)."""
    if not isinstance(node, SequenceNode):
        return False
    if not node.value:
        return last == "env"
    return all(isinstance(item, MappingNode) for item in node.value)


class EnvListAt(K8sFormat):
    """The name/value env list at ``steps`` (the last step names the list's key)."""

    def __init__(self, steps: tuple[PathStep, ...]) -> None:
        self.steps = steps
        self.container = format_path(steps[:-1])

    def _locate(self, text: str):
        docs = [d for d in compose_all(text) if d is not None]
        holder = walk_path(docs[0] if docs else None, self.steps[:-1])
        if not isinstance(holder, MappingNode):
            raise FormatError(f"key path {format_path(self.steps)!r} not found")
        found = Found(doc=1, path=self.steps[:-1], kind="", object_name="", roles=(),
                      name="", node=holder, list_key=None, list_node=None,
                      address=f"at {format_path(self.steps[:-1])}")
        return container_env(found, str(self.steps[-1]))


__all__ = ["EnvListAt", "is_name_value_list"]
