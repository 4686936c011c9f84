"""The ``k8s`` target format: the ``env:`` list of one container in Kubernetes manifests.

The file may hold several YAML documents.  Containers are found wherever a pod spec is
(Deployment, StatefulSet, Job, LeaderWorkerSet templates, RoleBasedGroup roles, OME
``runner:`` blocks, any custom resource) and picked by an *address*: the container name
when it is unique, else a longer address; see :mod:`envknobs.formats.yaml.containers`.  An
address that fits several containers is refused, listing an address for each that
selects it alone; editing them all at once is rarely what an operator means.

Reading: ruamel.yaml's safe composer turns the documents into nodes that carry their exact
source offsets; nothing is ever dumped.  Edits are made on the original text at those
offsets, with the indentation found there, so comments, anchors, block scalars, long lines
and the other documents are untouched.  ``parse`` returns ``{name: value}`` for env items
with a ``value`` (a later duplicate wins, as in Kubernetes; a null value is ``""``).  Items
with ``valueFrom`` (secrets, field refs) are not reported, and ``set``/``unset`` refuse them:
the ledger manages literal values only.  Edits are also refused where they would reach
outside the container (an env list or value shared through an anchor).

Writing: ``value:`` is always a string.  A changed value keeps the style of the scalar it
replaces (plain stays plain, ``'...'`` stays single-quoted) where that style can carry it;
a new item takes the style most of its neighbours use.  Plain is used only where YAML 1.1
and 1.2 readers both read the exact string (``$HF_TOKEN``, ``/models/x``); otherwise the
value is quoted (``no``, ``on``, ``0777``, ``1e3``, ``~``, ``512``), in the quotes the
neighbours use.  A new knob is appended to the list matching the existing items'
indentation and shape (``- name: K`` / ``value: V``, or ``- {name: K, value: V}`` among
flow items, or inside ``[...]`` for a flow list); without an ``env:`` key, one is added at
the end of the container.  ``unset`` removes the item's lines, and the ``env:`` key with
its last item (an ``env: []`` stays).

Exact text: :meth:`K8sFormat.source` returns the value's source text (everything after
``value:`` up to the end of the scalar), and ``set(..., source=S)`` writes ``S`` verbatim
where it reads back as the value: this is how a revert puts back ``value: $HF_TOKEN``, a
``'512'`` or a folded block byte for byte instead of re-rendering it.

Launch flags: knobs named ``--flag`` are the container's server arguments, read from and
written to its ``command:``/``args:`` lists or the ``sh -c`` script in them (see
:mod:`envknobs.formats.yaml.argv`); ``parse`` returns them after the env items, and
``summary`` gives every env item and flag its line (``target show``).  An env knob that
the container's script sets itself is refused: the script wins over ``env:``, so an edit
there would take no effect.

Every ``set``/``unset`` re-reads its result and refuses (FormatError) unless exactly the
intended knob changed.
"""

from __future__ import annotations

import copy

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.yaml.argv import argv_value_source
from envknobs.formats.yaml.argv import read_argv
from envknobs.formats.yaml.argv import with_argv_source
from envknobs.formats.yaml.argv import canonical_flag_in
from envknobs.formats.yaml.argv import container_flags
from envknobs.formats.yaml.argv import edit_container_flag
from envknobs.formats.yaml.argv import flag_lines
from envknobs.formats.yaml.argv import script_env
from envknobs.formats.yaml.containers import Found
from envknobs.formats.yaml.envargs import edit_in_strings
from envknobs.formats.yaml.envargs import holder_refusal
from envknobs.formats.yaml.envargs import in_both
from envknobs.formats.yaml.envargs import in_string_scopes
from envknobs.formats.yaml.envargs import refuse_unread_string
from envknobs.formats.yaml.envargs import string_uses
from envknobs.formats.yaml import envfrom
from envknobs.formats.yaml.envfrom import EnvSource
from envknobs.formats.yaml.envfrom import check_shared
from envknobs.formats.yaml.envfrom import env_sources
from envknobs.formats.yaml.envfrom import refuse_unread
from envknobs.formats.yaml.envfrom import source_values
from envknobs.formats.yaml.envfrom import unread
from envknobs.formats.yaml.containers import check_address
from envknobs.formats.yaml.containers import find_containers
from envknobs.formats.yaml.containers import locate
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import check_assignment_args
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import newline_of
from envknobs.formats.common.text import verified
from envknobs.formats.yaml.edit import column
from envknobs.formats.yaml.edit import compose_all
from envknobs.formats.yaml.edit import dash_before
from envknobs.formats.yaml.edit import get
from envknobs.formats.yaml.edit import insert_at_line
from envknobs.formats.yaml.edit import item_spans
from envknobs.formats.yaml.edit import last_content_end
from envknobs.formats.yaml.edit import remove_pair
from envknobs.formats.yaml.edit import splice_source
from envknobs.formats.yaml.edit import splice_value
from envknobs.formats.yaml.edit import value_span
from envknobs.formats.yaml.k8senv import ContainerEnv
from envknobs.formats.yaml.k8senv import EnvItem
from envknobs.formats.yaml.k8senv import argv_line
from envknobs.formats.yaml.k8senv import block_offset
from envknobs.formats.yaml.k8senv import container_engine
from envknobs.formats.yaml.k8senv import container_env
from envknobs.formats.yaml.k8senv import container_knobs
from envknobs.formats.yaml.k8senv import sourced_values
from envknobs.formats.yaml.putback import FlagPlaces
from envknobs.formats.yaml.putback import line_summary
from envknobs.formats.yaml.scalar import check_yaml_text
from envknobs.formats.yaml.scalar import neighbour_style
from envknobs.formats.yaml.scalar import node_style
from envknobs.formats.yaml.scalar import render
from envknobs.registry import check_knob_value


class K8sFormat(FlagPlaces, TargetFormat):
    """One container's env list in Kubernetes manifests; see the module docstring."""

    name = "k8s"
    into: str | None = None  # record --in env|configmap (envfrom's docstring); subclasses too

    def __init__(self, container: str, into: str | None = None) -> None:
        self.container = check_address(container)
        self.into = envfrom.check_into(into)

    def placed(self, into: str | None) -> "K8sFormat":
        """This format (a subclass keeps its own fields) with ``record --in``'s place."""
        if into is None:
            return self
        other = copy.copy(self)
        other.into = envfrom.check_into(into)
        return other

    def _locate(self, text: str) -> ContainerEnv:
        docs = compose_all(text)
        found, every = locate(self.container, docs)
        c = container_env(found)
        c.sources = env_sources(found, docs, every)
        c.text = text
        return c

    def containers(self, text: str) -> list[Found]:
        """Every container in ``text``, each with its shortest working ``address``."""
        return find_containers(compose_all(text))

    def parse(self, text: str) -> dict[str, str]:
        """Env name -> value of the container (valueFrom items are left out), then its
        launch flags (``--flag`` -> value) from ``command:``/``args:``
        (:mod:`envknobs.formats.yaml.argv`)."""
        c = self._locate(text)
        return container_knobs(c)

    def summary(self, text: str) -> Summary:
        """Each env item and launch flag of the container with the line it is on: one
        place each (a later duplicate env item, the last occurrence of a flag: what the
        container gets)."""
        c = self._locate(text)
        lines = {it.name: line_of(text, it.node.start_mark.index) for it in c.items}
        lines.update(flag_lines(text, c.node, c.label))
        held = string_uses(text, c.items, c.label, container_engine(c))
        for knob, uses in held.items():
            lines.setdefault(knob, line_of(text, uses[-1][1].word.start))
        sourced = sourced_values(c)
        knobs = container_knobs(c)
        refs = [(it.name, lines[it.name], None) for it in c.items
                if it.from_ref and it.name not in knobs]  # valueFrom: named, computed
        rows = [(k, lines.get(k, 0), v) for k, v in knobs.items() if k not in sourced]
        own = in_string_scopes(line_summary(text, rows + refs, f"env of container {c.label}",
                                            f"argv of container {c.label}"), held, lines,
                                 c.label)
        extra = [line_summary(text, [(k, line_of(text, key.start_mark.index), v)],
                              f"{src.label} (envFrom of container {c.label})").knobs[0]
                 for k, (v, src, key) in sourced.items()]
        hidden = [f"env of container {c.label} may also come from {s.label} (envFrom, line "
                  f"{s.line}), not in this file" for s in unread(c.sources)]
        hidden += [f"{k} is both in the command/args (line {lines[k]}) and in an env string "
                   f"of flags of container {c.label}: the command's order decides; remove "
                   "one by hand" for k in in_both(text, c.items, c.label, container_engine(c),
                                                  container_flags(c.node, c.label))]
        return Summary(tuple(extra) + own.knobs, own.launches, tuple(hidden) + own.notes)

    def canonical(self, text: str, knob: str) -> str:
        """A flag as the container's engine catalog spells it; an env name as given."""
        if not is_flag_name(knob):
            return knob
        c = self._locate(text)
        return canonical_flag_in(c.node, c.label, text, knob)

    def _edit_flag(self, text: str, knob: str, value: str | None,
                   source: str | None = None) -> str:
        check_flag_name(knob)
        if value is not None:
            check_knob_value(value)
            check_yaml_text(value)
        c = self._locate(text)
        knob = canonical_flag_in(c.node, c.label, text, knob)
        before = self.parse(text)
        if value is not None and before.get(knob) == value:
            return text  # (an unset always edits: a computed flag is absent from parse)
        argv = read_argv(c.node, c.label)
        inside = edit_in_strings(text, c.items, c.label, argv.engine, knob, value,
                                 flag_lines(text, c.node, c.label).get(knob),
                                 not argv.tokens, argv_line(text, argv), self.into)
        if inside is not None:
            return text if inside == text else verified(before, self.parse(inside), knob,
                                                        value, inside)
        if knob not in before:
            refuse_unread_string(text, c.items, c.label, knob)
        if value is not None and source is not None:  # the item as it was written
            out = with_argv_source(text, read_argv(c.node, c.label), knob, source)
            if out is not None and self.parse(out) == {**before, knob: value}:
                return out
        out = edit_container_flag(text, c.node, c.label, knob, value)
        return verified(before, self.parse(out), knob, value, out)

    def _refuse_shadowed(self, text: str, c: ContainerEnv, knob: str) -> None:
        if knob in script_env(c.node, c.label):
            raise FormatError(
                f"{knob} is also set by the shell script in the command of container "
                f"{c.label}, which wins over its env: list; edit the script's line instead"
            )

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        return self.set(text, knob, value, source=source)

    def source(self, text: str, knob: str) -> str | None:
        """The exact source text of ``knob``'s value (after ``value:``; a flag's: its
        value's list item, :func:`~.argv.argv_value_source`), or None."""
        c = self._locate(text)
        if is_flag_name(knob):
            knob = canonical_flag_in(c.node, c.label, text, knob)
            return argv_value_source(text, read_argv(c.node, c.label), knob)
        item = next((it for it in reversed(c.items) if it.name == knob), None)
        sourced = sourced_values(c).get(knob)
        if item is None and sourced is not None:
            key = sourced[2]
            start, end = value_span(text, key, get(sourced[1].data, key.value)[1])  # type: ignore[index]
            return text[start:end]
        if item is None or item.from_ref or item.value is None or item.value_key is None:
            return None
        start, end = value_span(text, item.value_key, item.value)
        return text[start:end]

    def _check_editable(self, text: str, c: ContainerEnv, item: EnvItem, knob: str) -> None:
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

    def set(self, text: str, knob: str, value: str, source: str | None = None) -> str:
        """Set ``knob`` in the container's env; KnobError for a bad name/value, FormatError
        for a missing/ambiguous container, a valueFrom item or an anchored value.

        ``source``: the exact text to write after ``value:`` (from :meth:`source`), used
        verbatim where it reads back as ``value``; otherwise the value is rendered.
        """
        if is_flag_name(knob):
            return self._edit_flag(text, knob, value, source)
        check_assignment_args(knob, value)
        check_yaml_text(value)
        c = self._locate(text)
        self._refuse_shadowed(text, c, knob)
        holder = holder_refusal(text, c.items, c.label, knob)
        if holder is not None:
            raise FormatError(holder)
        before = container_knobs(c)
        item = next((it for it in reversed(c.items) if it.name == knob), None)
        sourced = sourced_values(c).get(knob)
        at = None if item is None else line_of(text, item.node.start_mark.index)
        envfrom.refuse_into(self.into, knob, c.label, at, sourced,
                            source_values(c.sources).get(knob))
        if item is None and sourced is not None:
            return self._set_sourced(text, knob, value, source, sourced, before)
        if item is None:
            env_line = line_of(text, (c.env_key or c.node).start_mark.index)
            into = envfrom.new_place(self.into, knob, c.label, env_line, c.sources)
            if into is not None:
                out = envfrom.add_to_map(text, into, knob, value, source)
                return verified(before, self.parse(out), knob, value, out)
            if source is not None and "\n" not in source:
                exact = self._try(before, knob, value, lambda: self._add(text, c, knob, source))
                if exact is not None:
                    return exact
            out = self._add(text, c, knob, None, value)
            return verified(before, self.parse(out), knob, value, out)
        if not item.from_ref and before.get(knob) == value:
            return text  # a no-op, even where an edit would be refused (anchors)
        self._check_editable(text, c, item, knob)
        if item.value is None or item.value_key is None:
            line = line_of(text, item.node.start_mark.index)
            raise FormatError(f"line {line}: {knob} has no value: key; edit it by hand")
        if source is not None:
            key, node = item.value_key, item.value
            exact = self._try(before, knob, value, lambda: splice_source(text, key, node, source))
            if exact is not None:
                return exact
        _, quote = neighbour_style(it.value for it in c.items)
        rendered = render(value, node_style(item.value), quote)
        out = splice_value(text, item.value_key, item.value, rendered)
        return verified(before, self.parse(out), knob, value, out)

    def _set_sourced(self, text: str, knob: str, value: str, source: str | None,
                     sourced: tuple[str, EnvSource, ScalarNode], before: dict) -> str:
        """Set a knob in the ``data:`` of the ConfigMap it comes from (a string)."""
        old, src, key = sourced
        if old == value:
            return text
        check_shared(knob, src)
        node = get(src.data, key.value)[1]  # type: ignore[index]
        if node.anchor or not isinstance(node, ScalarNode):
            raise FormatError(f"line {line_of(text, key.start_mark.index)}: {knob} in "
                              f"{src.label} is not a plain value; edit it by hand")
        if source is not None:
            exact = self._try(before, knob, value, lambda: splice_source(text, key, node, source))
            if exact is not None:
                return exact
        _, quote = neighbour_style(v for _, v in src.data.value)  # type: ignore[union-attr]
        out = splice_value(text, key, node, render(value, node_style(node), quote))
        return verified(before, self.parse(out), knob, value, out)

    def _try(self, before: dict, knob: str, value: str, edit) -> str | None:
        """``edit()`` if it yields exactly the intended values, else None."""
        try:
            out = edit()
            return verified(before, self.parse(out), knob, value, out)
        except FormatError:
            return None

    def _add(
        self, text: str, c: ContainerEnv, knob: str, source: str | None, value: str = ""
    ) -> str:
        eol = newline_of(text)
        style, quote = neighbour_style(it.value for it in c.items)
        name = render(knob)
        val = f"value:{source}" if source is not None else f"value: {render(value, style, quote)}"
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
            pair = f"{{name: {name}, {val}}}"
            if env.value:
                pos = env.value[-1].end_mark.index
                return text[:pos] + ", " + pair + text[pos:]
            close = text.rfind("]", env.start_mark.index, env.end_mark.index)
            return text[:close] + pair + text[close:]
        if isinstance(env, SequenceNode) and env.value:
            return self._append_item(text, env, name, val, eol)
        if c.node.flow_style:
            raise FormatError(
                f"line {line_of(text, c.node.start_mark.index)}: container {c.label} is written "
                "in flow style; add its env list by hand"
            )
        key_col = column(text, c.node.start_mark.index)
        dash_col = key_col + block_offset(text, c)
        items = f"{' ' * dash_col}- name: {name}{eol}{' ' * (dash_col + 2)}{val}{eol}"
        if c.env_key is not None and env is not None:  # `env:` or `env: ~` with no list
            start, end = env.start_mark.index, env.end_mark.index
            if end > start:
                text = text[:start].rstrip(" \t") + text[end:]
            return insert_at_line(text, line_end(text, c.env_key.start_mark.index), items, eol)
        pos = line_end(text, last_content_end(text, c.node))
        return insert_at_line(text, pos, f"{' ' * key_col}env:{eol}{items}", eol)

    @staticmethod
    def _append_item(text: str, env: SequenceNode, name: str, val: str, eol: str) -> str:
        first = env.value[0]
        dash = dash_before(text, first.start_mark.index)
        dash_col = column(text, dash)
        pos = line_end(text, last_content_end(text, env))
        if all(isinstance(it, MappingNode) and it.flow_style for it in env.value):
            gap = " " * max(column(text, first.start_mark.index) - dash_col - 1, 1)
            return insert_at_line(
                text, pos, f"{' ' * dash_col}-{gap}{{name: {name}, {val}}}{eol}", eol
            )
        key_col = (
            dash_col + 2
            if first.flow_style or dash_col + 2 > column(text, first.start_mark.index)
            else column(text, first.start_mark.index)
        )
        lines = (
            f"{' ' * dash_col}-{' ' * (key_col - dash_col - 1)}name: {name}{eol}"
            f"{' ' * key_col}{val}{eol}"
        )
        return insert_at_line(text, pos, lines, eol)

    def unset(self, text: str, knob: str) -> str:
        """Remove every env item named ``knob`` (same text if there is none); FormatError
        for a valueFrom item or one shared through an anchor."""
        if is_flag_name(knob):
            return self._edit_flag(text, knob, None)
        check_assignment_args(knob)
        c = self._locate(text)
        self._refuse_shadowed(text, c, knob)
        holder = holder_refusal(text, c.items, c.label, knob)
        if holder is not None:
            raise FormatError(holder)
        doomed = [it for it in c.items if it.name == knob]
        sourced = source_values(c.sources).get(knob)
        if not doomed and sourced is not None:
            _, src, key = sourced
            check_shared(knob, src)
            node = get(src.data, key.value)[1]  # type: ignore[index]
            out = remove_pair(text, src.data, key, node)  # type: ignore[arg-type]
            return verified(container_knobs(c), self.parse(out), knob, None, out)
        if not doomed:
            refuse_unread(knob, c.label, c.sources)
            return text
        if sourced is not None:
            raise FormatError(
                f"line {line_of(text, doomed[0].node.start_mark.index)}: removing {knob} from "
                f"the env: list of container {c.label} lets the value of {sourced[1].label} "
                f"(line {line_of(text, sourced[2].start_mark.index)}) take effect; unset it "
                "there too by hand, or record the value you want")
        for it in doomed:
            self._check_editable(text, c, it, knob)
        env = c.env
        if not isinstance(env, SequenceNode):  # cannot happen: items come from a list
            return text
        out = text
        for start, end in sorted(item_spans(text, c.env_key, env, [it.node for it in doomed]),
                                 reverse=True):
            if end >= len(out) and not out.endswith("\n") and start > 0 and out[start - 1] == "\n":
                # Removing the last line of a file without a final newline: take the
                # line break before it, so the file still ends without one.
                start -= 2 if start > 1 and out[start - 2] == "\r" else 1
            out = out[:start] + out[end:]
        return verified(container_knobs(c), self.parse(out), knob, None, out)

