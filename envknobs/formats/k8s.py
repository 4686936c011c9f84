"""The ``k8s`` target format: the ``env:`` list of one container in Kubernetes manifests.

The file may hold several YAML documents.  Every mapping with a ``containers`` or
``initContainers`` list is a pod spec, wherever it sits (Pod, Deployment, StatefulSet,
DaemonSet, Job, CronJob, a ``List`` of them, or a custom resource), and the container is
picked by name.  The selector is ``NAME``, or ``WORKLOAD/NAME`` where ``WORKLOAD`` is the
``metadata.name`` of the enclosing object: a plain name that appears in several
workloads (a prefill and a decode Deployment both running a container ``sglang``) is
refused as ambiguous, with the qualified names to use instead, because editing them all
at once is rarely what an operator means.

Reading: ruamel.yaml's safe composer (not the round-trip one: faster, and it folds
``>`` scalars as loaders do) turns the documents into nodes that carry their exact source
offsets; nothing is ever dumped.  Edits are made on the original text at those offsets,
with the indentation found there, so comments, anchors, block scalars, long lines and
the other documents are untouched.  ``parse`` returns ``{name: value}`` for env items
with a ``value`` (a later duplicate wins, as in Kubernetes; a null value is ``""``).
Items with ``valueFrom`` (secrets, field refs) are not reported, and ``set``/``unset``
refuse them: the ledger manages literal values only.  Edits are also refused where they
would reach outside the container (an env list or value shared through an anchor).

Writing: ``value:`` is always a string: plain when unambiguous, double-quoted where
YAML 1.1 or 1.2 would read a bool, number, null or timestamp (``no``, ``on``, ``0777``,
``1e3``, ``~``).  A new knob is appended to the list as ``- name: K`` / ``value: V``
matching the existing items' indentation (or inside ``[...]`` for a flow list); without
an ``env:`` key, one is added at the end of the container, indented like the file's
``containers:`` list.  ``unset`` removes the item's lines, and the ``env:`` key with its
last item (so an empty ``env:`` that a ``set`` filled does not come back after ``unset``;
an ``env: []`` does).  An empty ``value:`` is written right after its colon.

Every ``set``/``unset`` re-reads its result and refuses (FormatError) unless exactly the
intended knob changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats import FormatError
from envknobs.formats._text import check_assignment_args
from envknobs.formats._text import line_end
from envknobs.formats._text import line_of
from envknobs.formats._text import line_start
from envknobs.formats._text import newline_of
from envknobs.formats._text import verified
from envknobs.formats._yaml_scalar import NULL_TAG
from envknobs.formats._yaml_scalar import check_yaml_text
from envknobs.formats._yaml_scalar import render_scalar

_POD_SPEC_KEYS = ("containers", "initContainers")


def _get(node: Node, key: str) -> tuple[ScalarNode, Node] | None:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return k, v
    return None


def _scalar(node: Node | None) -> str | None:
    if isinstance(node, ScalarNode):
        if node.tag == NULL_TAG and node.style is None:
            return ""
        return node.value
    return None


@dataclass
class _Item:
    name: str
    node: MappingNode
    value: ScalarNode | None  # the `value:` node
    value_key: ScalarNode | None
    from_ref: bool  # has valueFrom


@dataclass
class _Container:
    workload: str  # metadata.name of the enclosing object ("" if none)
    name: str
    node: MappingNode
    list_key: ScalarNode  # the `containers:` key it sits under
    list_node: SequenceNode
    env_key: ScalarNode | None
    env: Node | None
    items: list[_Item]

    @property
    def label(self) -> str:
        return f"{self.workload}/{self.name}" if self.workload else self.name


def _compose(text: str) -> list[Node]:
    try:
        return [d for d in YAML(typ="safe", pure=True).compose_all(text) if d is not None]
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise FormatError(f"{where}invalid YAML: {e.problem or e.context}") from None
    except YAMLError as e:
        raise FormatError(f"invalid YAML: {e}") from None


def _containers(doc: Node) -> list[_Container]:
    """Every container of every pod spec under ``doc``, labelled WORKLOAD/NAME."""
    found: list[_Container] = []
    seen: set[int] = set()

    def walk(node: Node, workload: str) -> None:
        if id(node) in seen:  # an alias: already visited
            return
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            for child in node.value:
                walk(child, workload)
            return
        if not isinstance(node, MappingNode):
            return
        meta = _get(node, "metadata")
        if _get(node, "kind") and meta:
            workload = _scalar((_get(meta[1], "name") or (None, None))[1]) or workload
        for key, value in node.value:
            if (
                isinstance(key, ScalarNode)
                and key.value in _POD_SPEC_KEYS
                and isinstance(value, SequenceNode)
            ):
                for c in value.value:
                    name = _scalar((_get(c, "name") or (None, None))[1])
                    if isinstance(c, MappingNode) and name is not None and id(c) not in seen:
                        seen.add(id(c))
                        found.append(_container(c, workload, name, key, value))
            else:
                walk(value, workload)

    walk(doc, "")
    return found


def _container(
    node: MappingNode, workload: str, name: str, list_key: ScalarNode, list_node: SequenceNode
) -> _Container:
    label = f"{workload}/{name}" if workload else name
    env_pair = _get(node, "env")
    env_key, env = env_pair if env_pair else (None, None)
    items: list[_Item] = []
    if isinstance(env, SequenceNode):
        for it in env.value:
            env_name = _scalar((_get(it, "name") or (None, None))[1])
            if isinstance(it, MappingNode) and env_name is not None:
                value_key, value = _get(it, "value") or (None, None)
                if value is not None and not isinstance(value, ScalarNode):
                    raise FormatError(
                        f"line {value.start_mark.line + 1}: env {env_name} has a non-scalar value"
                    )
                items.append(
                    _Item(env_name, it, value, value_key, _get(it, "valueFrom") is not None)
                )
    elif env is not None and _scalar(env) != "":
        raise FormatError(f"line {env.start_mark.line + 1}: env of container {label} is not a list")
    return _Container(workload, name, node, list_key, list_node, env_key, env, items)


def _values(c: _Container) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in c.items:
        found.pop(item.name, None)  # a later duplicate wins, as in Kubernetes
        if not item.from_ref:
            found[item.name] = (_scalar(item.value) if item.value is not None else "") or ""
    return found


def _last_content_end(text: str, node: Node) -> int:
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


def _dash_before(text: str, pos: int) -> int:
    """Offset of the '-' that introduces the block sequence item starting at ``pos``."""
    i = pos - 1
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    if i < 0 or text[i] != "-":
        raise FormatError(f"line {line_of(text, pos)}: cannot find the '-' of this list item")
    return i


def _column(text: str, pos: int) -> int:
    return pos - line_start(text, pos)


class K8sFormat:
    """One container's env list in Kubernetes manifests; see the module docstring."""

    name = "k8s"

    def __init__(self, container: str) -> None:
        if not container or container.count("/") > 1:
            raise FormatError(
                f"invalid container selector {container!r}: use NAME or WORKLOAD/NAME"
            )
        self.container = container

    def _locate(self, text: str) -> _Container:
        every = [c for doc in _compose(text) for c in _containers(doc)]
        workload, _, name = self.container.rpartition("/")
        chosen = [c for c in every if c.name == name and (not workload or c.workload == workload)]
        if not chosen:
            names = ", ".join(sorted({c.label for c in every})) or "none"
            raise FormatError(
                f"container {self.container!r} not found (containers in the file: {names})"
            )
        if len(chosen) > 1:
            labels = ", ".join(c.label for c in chosen)
            raise FormatError(
                f"container {self.container!r} is ambiguous: it appears as {labels}; "
                "name one as WORKLOAD/CONTAINER"
            )
        return chosen[0]

    def parse(self, text: str) -> dict[str, str]:
        """Env name -> value of the container (valueFrom items are left out)."""
        return _values(self._locate(text))

    def _check_editable(self, text: str, c: _Container, item: _Item, knob: str) -> None:
        line = line_of(text, item.node.start_mark.index)
        if item.from_ref:
            raise FormatError(
                f"line {line}: {knob} in container {c.label} comes from valueFrom; "
                "the ledger manages literal values only"
            )
        inside = c.node.start_mark.index <= item.node.start_mark.index < c.node.end_mark.index
        if not inside or item.node.anchor or (item.value is not None and item.value.anchor):
            raise FormatError(
                f"line {line}: {knob} in container {c.label} is shared through a YAML anchor; "
                "edit it by hand"
            )

    def set(self, text: str, knob: str, value: str) -> str:
        """Set ``knob`` in the container's env; KnobError for a bad name/value, FormatError
        for a missing/ambiguous container, a valueFrom item or an anchored value."""
        check_assignment_args(knob, value)
        check_yaml_text(value)
        c = self._locate(text)
        item = next((it for it in reversed(c.items) if it.name == knob), None)
        if item is None:
            out = self._add(text, c, knob, value)
            return verified(_values(c), self.parse(out), knob, value, out)
        if not item.from_ref and _values(c).get(knob) == value:
            return text  # a no-op, even where an edit would be refused (anchors)
        self._check_editable(text, c, item, knob)
        if item.value is None:
            line = line_of(text, item.node.start_mark.index)
            raise FormatError(f"line {line}: {knob} has no value: key; edit it by hand")
        start, end = item.value.start_mark.index, item.value.end_mark.index
        if start == end and item.value_key is not None:
            # An empty value (`value:`): its mark points at whatever follows, so write
            # right after the key's colon (and the blank after it, if any).
            start = text.index(":", item.value_key.end_mark.index) + 1
            end = start = start + 1 if text[start : start + 1] == " " else start
            if text[start - 1] == ":":
                text, start, end = text[:start] + " " + text[start:], start + 1, end + 1
        tail = ""
        if item.value.style in ("|", ">"):  # keep the line breaks that end a block scalar
            tail = text[_last_content_end(text, item.value) : end]
            brk = tail.find("\n")
            if brk > 0 and tail[brk - 1] == "\r":
                brk -= 1
            tail = tail[brk:] if brk >= 0 else ""
        rendered = render_scalar(
            value, item.value.style if item.value.style in ("'", '"') else None
        )
        out = text[:start] + rendered + tail + text[end:]
        return verified(_values(c), self.parse(out), knob, value, out)

    def _add(self, text: str, c: _Container, knob: str, value: str) -> str:
        eol = newline_of(text)
        name, rendered = render_scalar(knob), render_scalar(value)
        env = c.env
        if isinstance(env, SequenceNode) and (
            env.anchor
            or not c.node.start_mark.index <= env.start_mark.index < c.node.end_mark.index
        ):
            raise FormatError(
                f"line {line_of(text, env.start_mark.index)}: the env list of container "
                f"{c.label} is shared through a YAML anchor; edit it by hand"
            )
        if isinstance(env, SequenceNode) and env.flow_style:
            pair = f"{{name: {name}, value: {rendered}}}"
            if env.value:
                pos = env.value[-1].end_mark.index
                return text[:pos] + ", " + pair + text[pos:]
            close = text.rfind("]", env.start_mark.index, env.end_mark.index)
            return text[:close] + pair + text[close:]
        if isinstance(env, SequenceNode) and env.value:
            first = env.value[0]
            dash = _dash_before(text, first.start_mark.index)
            dash_col = _column(text, dash)
            key_col = (
                dash_col + 2
                if first.flow_style or dash_col + 2 > _column(text, first.start_mark.index)
                else _column(text, first.start_mark.index)
            )
            pos = line_end(text, _last_content_end(text, env))
            lines = (
                f"{' ' * dash_col}-{' ' * (key_col - dash_col - 1)}name: {name}{eol}"
                f"{' ' * key_col}value: {rendered}{eol}"
            )
            return _insert_at_line(text, pos, lines, eol)
        if c.node.flow_style:
            raise FormatError(
                f"line {line_of(text, c.node.start_mark.index)}: container {c.label} is written "
                "in flow style; add its env list by hand"
            )
        key_col = _column(text, c.node.start_mark.index)
        offset = _column(text, _dash_before(text, c.list_node.value[0].start_mark.index)) - _column(
            text, c.list_key.start_mark.index
        )
        dash_col = key_col + max(offset, 0)
        items = f"{' ' * dash_col}- name: {name}{eol}{' ' * (dash_col + 2)}value: {rendered}{eol}"
        if c.env_key is not None and env is not None:  # `env:` or `env: ~` with no list
            start, end = env.start_mark.index, env.end_mark.index
            if end > start:
                text = text[:start].rstrip(" \t") + text[end:]
            return _insert_at_line(text, line_end(text, c.env_key.start_mark.index), items, eol)
        pos = line_end(text, _last_content_end(text, c.node))
        return _insert_at_line(text, pos, f"{' ' * key_col}env:{eol}{items}", eol)

    def unset(self, text: str, knob: str) -> str:
        """Remove every env item named ``knob`` (same text if there is none); FormatError
        for a valueFrom item or one shared through an anchor."""
        check_assignment_args(knob)
        c = self._locate(text)
        doomed = [it for it in c.items if it.name == knob]
        if not doomed:
            return text
        for it in doomed:
            self._check_editable(text, c, it, knob)
        env = c.env
        if not isinstance(env, SequenceNode):  # cannot happen: items come from a list
            return text
        if env.flow_style:
            spans = []
            for it in doomed:
                k = env.value.index(it.node)
                if k + 1 < len(env.value):
                    spans.append((it.node.start_mark.index, env.value[k + 1].start_mark.index))
                elif k > 0:
                    spans.append((env.value[k - 1].end_mark.index, it.node.end_mark.index))
                else:
                    spans.append((it.node.start_mark.index, it.node.end_mark.index))
        elif len(doomed) == len(env.value) and c.env_key is not None:
            spans = [
                (
                    line_start(text, c.env_key.start_mark.index),
                    line_end(text, _last_content_end(text, env)),
                )
            ]
        else:
            spans = [
                (
                    line_start(text, _dash_before(text, it.node.start_mark.index)),
                    line_end(text, _last_content_end(text, it.node)),
                )
                for it in doomed
            ]
        out = text
        for start, end in sorted(spans, reverse=True):
            if end >= len(out) and not out.endswith("\n") and start > 0 and out[start - 1] == "\n":
                # Removing the last line of a file without a final newline: take the
                # line break before it, so the file still ends without one.
                start -= 2 if start > 1 and out[start - 2] == "\r" else 1
            out = out[:start] + out[end:]
        return verified(_values(c), self.parse(out), knob, None, out)


def _insert_at_line(text: str, pos: int, lines: str, eol: str) -> str:
    """Insert whole ``lines`` at a line start ``pos`` (at EOF without a final newline,
    the new lines go after a line break and the file still ends without one)."""
    if pos >= len(text) and text and not text.endswith("\n"):
        return text + eol + lines[: -len(eol)]
    return text[:pos] + lines + text[pos:]
