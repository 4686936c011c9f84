"""The ``yaml-map`` target format: a YAML mapping of knobs, in the whole file or at a key path.

Two real shapes:

* an engine config file, ``sglang --config config.yaml`` / ``vllm serve --config``: a flat
  map of server arguments (``mem-fraction-static: 0.7``, ``cuda-graph-max-bs: 256``), the
  whole file (no key path);
* an env map inside a bigger file, ``decode_environment: {SGLANG_X: "1"}`` in a recipe:
  the mapping at a key path (``decode_environment``, ``envs.decode``, ``jobs[0].env``);
  a docker-compose ``environment:`` there may also be a list of ``- K=V`` strings
  (an env map only, see :mod:`envknobs.formats.yaml.envlist`), and a Helm values ``env:``
  a Kubernetes list of ``name``/``value`` items (:mod:`envknobs.formats.yaml.helmenv`);
* a list of server argument words at a key path of a Helm values file (``extraArgs:
  ["--max-num-seqs", "32"]``, ``vllm_args``), with ``--flags``: its knobs are ``--flag``
  names, read and edited as a container's ``args:`` (:mod:`envknobs.formats.yaml.argv`).

Reading: the file is one YAML document, or several (``---``, a manifest with a ConfigMap
and a Deployment): then the document is the one where the key path is found; where it is
found in several, the edit is refused naming each (line, kind/name) and how to pick one:
``DOC:PATH`` (1-based, as k8s container addresses), e.g. ``--key-path 2:data``.  ``parse`` returns every key whose value is a scalar, as the text of that scalar
(``0.85``, ``true``; a null reads as ``""``); keys with list or map values, and keys brought
in by ``<<`` merges, are not knobs.  A key written twice is refused, naming both lines:
YAML readers disagree on which one wins.

Writing keeps the file's typing: a quoted value stays a quoted string (``"0.85"`` stays a
string), a plain value stays plain where YAML 1.1 and 1.2 readers agree on what it is
(``0.85`` → ``0.9`` stays a float, ``true`` → ``false`` a bool), and a plain string never
turns into a number or bool by accident (``fa3`` → ``3`` is written ``"3"``).  A value the
two YAML versions read differently (``no``, ``on``, ``0777``, ``1e3``) is quoted.  A new
key goes after the map's last key, in the map's indentation (or inside ``{...}``), its
value typed as the flag catalog or its neighbours say (``maxNumSeqs: 32`` in a Helm
values map, not ``"32"``; see :mod:`envknobs.formats.yaml.newvalue`); with ``strings`` (an
env map: the process gets every value as a string) a new env var's value is always a
string, quoted where YAML would read it as anything else (``"512"``).  In a ``--config``
map, ``x`` and ``no-x`` are one argument: an edit of one while the other is written is
refused with its line (:func:`envknobs.formats.yaml.keys.negation_conflict`).
``unset`` removes the key's lines.
Bytes outside the edit (comments, order, blank lines, other keys) are untouched, and
:meth:`YamlMapFormat.source` / ``set(..., source=S)`` put a value's original text back
verbatim, as the k8s format does.

Key names: letters, digits, ``_``, ``-`` and ``.``, starting with a letter or ``_``.  An
optional ``check_key`` callable (raising :class:`~envknobs.registry.KnobError`) validates the
keys of a ``--config`` file against a flag catalog on every set and unset.
"""

from __future__ import annotations


from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.yaml.keys import KEY_RE
from envknobs.formats.yaml.keys import check_key_name
from envknobs.formats.yaml.keys import negation_conflict
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import verified
from envknobs.formats.yaml.argv import edit_list_flag
from envknobs.formats.yaml.argv import flag_values
from envknobs.formats.yaml.argv import list_argv
from envknobs.formats.yaml.envlist import list_values
from envknobs.formats.yaml.helmenv import EnvListAt
from envknobs.formats.yaml.newvalue import new_scalar
from envknobs.formats.yaml.helmenv import is_name_value_list
from envknobs.formats.yaml.envlist import set_in_list
from envknobs.formats.yaml.envlist import unset_in_list
from envknobs.formats.yaml.edit import compose_all
from envknobs.formats.yaml.documents import pick_document
from envknobs.formats.yaml.merges import merged_keys
from envknobs.formats.yaml.merges import merged_notes
from envknobs.formats.yaml.merges import merged_values
from envknobs.formats.yaml.merges import refuse_merged
from envknobs.formats.yaml.documents import split_doc
from envknobs.formats.yaml.edit import format_path
from envknobs.formats.yaml.edit import parse_path
from envknobs.formats.yaml.edit import remove_pair
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.edit import splice_source
from envknobs.formats.yaml.edit import splice_value
from envknobs.formats.yaml.edit import value_span
from envknobs.formats.yaml.edit import walk_path
from envknobs.formats.common.places import Summary
from envknobs.formats.yaml.argv import argv_value_source
from envknobs.formats.yaml.argv import with_argv_source
from envknobs.formats.yaml.compose import PARTS
from envknobs.formats.yaml.compose import canonical_compose_flag
from envknobs.formats.yaml.compose import compose_flags
from envknobs.formats.yaml.compose import compose_source
from envknobs.formats.yaml.compose import restore_compose_source
from envknobs.formats.yaml.compose import compose_places
from envknobs.formats.yaml.compose import edit_compose_flag
from envknobs.formats.yaml.compose import is_command_path
from envknobs.formats.yaml.flagedit import repeated_note
from envknobs.formats.yaml.mapedit import MapAt
from envknobs.formats.yaml.mapedit import add_pair
from envknobs.formats.yaml.mapedit import check_editable
from envknobs.formats.yaml.mapedit import typed_value
from envknobs.formats.yaml.putback import FlagPlaces
from envknobs.formats.yaml.putback import line_summary
from envknobs.formats.yaml.scalar import check_yaml_text
from envknobs.formats.yaml.scalar import neighbour_style
from envknobs.registry import KeyCheck
from envknobs.registry import check_knob_value
from envknobs.registry import key_checker

# The keys of a Helm values map that hold the server's extra arguments as a list of words
# (vLLM production-stack ``vllmConfig.extraArgs``, KubeAI ``args``, ``vllm_args``).
ARGS_KEYS = ("extraArgs", "extraCmdArgs", "extra_args", "vllm_args", "args")


class YamlMapFormat(FlagPlaces, TargetFormat):
    """A mapping of knobs in a YAML file; see the module docstring."""

    name = "yaml-map"

    def __init__(
        self, key_path: str | None = None, check_key: KeyCheck | None = None,
        strings: bool = False, engine: str | None = None,
    ) -> None:
        self.engine = engine  # whose flag catalog spells the flags (None: any engine's)
        self.doc, key_path = split_doc(key_path)
        self.steps = parse_path(key_path) if key_path else ()
        self.key_path = (f"{self.doc}:" if self.doc else "") + format_path(self.steps)
        self.check_key = check_key
        self.strings = strings

    def _where(self) -> str:
        return f"key path {self.key_path!r}" if self.steps else "the file"

    def _locate(self, text: str) -> MapAt:
        root = pick_document(compose_all(text), self.doc, self.steps)
        if not self.steps:
            return self._as_map(root, None, None)
        parent = walk_path(root, self.steps[:-1])
        last = self.steps[-1]
        if is_command_path(self.steps) and isinstance(parent, MappingNode) and any(
                scalar_text(k) in PARTS for k, _ in parent.value):
            return MapAt(None, None, None, service=parent)
        pair = None
        if isinstance(parent, MappingNode) and isinstance(last, str):
            pair = next(((k, v) for k, v in parent.value if scalar_text(k) == last), None)
        if pair is None:
            keys = []
            if isinstance(parent, MappingNode):
                keys = [str(k.value) for k, _ in parent.value]
            hint = ""
            if len(self.steps) == 3 and self.steps[0] == "services" and last == "environment":
                at = f" (line {parent.start_mark.line + 1})" if parent is not None else ""
                hint = (f"; compose service {self.steps[1]}{at} has no environment: yet: add "
                        "`environment:` with one `KEY: value` under the service by hand "
                        "(its env then starts there), then add the target again")
            raise FormatError(
                f"{self._where()} not found (keys there: {', '.join(keys) or 'none'}){hint}"
            )
        return self._as_map(pair[1], pair[0], pair[1])

    def _as_map(self, node: Node | None, holder, holder_value) -> MapAt:
        if node is None or (isinstance(node, ScalarNode) and scalar_text(node) == ""):
            return MapAt(None, holder, holder_value)
        if isinstance(node, SequenceNode):
            # an env map: compose's `- K=V` list (envlist); else a list of argument
            # words (Helm values `extraArgs`: argv)
            return MapAt(node, holder, holder_value)
        if not isinstance(node, MappingNode):
            kind = "a list" if not isinstance(node, ScalarNode) else f"the scalar {node.value!r}"
            raise FormatError(
                f"line {node.start_mark.line + 1}: {self._where()} holds {kind}, not a mapping"
            )
        return MapAt(node, holder, holder_value)

    def _pairs(self, m: MapAt) -> dict[str, tuple[ScalarNode, Node]]:
        pairs: dict[str, tuple[ScalarNode, Node]] = {}
        for k, v in m.node.value if m.node is not None else ():
            if not isinstance(k, ScalarNode) or k.value == "<<":
                continue
            key = str(k.value)
            if key in pairs:
                first = pairs[key][0].start_mark.line + 1
                raise FormatError(
                    f"line {k.start_mark.line + 1}: key {key} is written twice (lines {first} "
                    f"and {k.start_mark.line + 1}); YAML readers disagree on which wins"
                )
            pairs[key] = (k, v)
        return pairs

    def _args_list(self, text: str) -> YamlMapFormat | None:
        """The argument list inside the map at the key path (a Helm ``vllmConfig:`` map
        whose ``extraArgs:`` holds ``- "--enforce-eager"``), read as its own list of
        flags: the chart passes those words to the server, so they are this target's flag
        knobs too, read and edited there (issue 50).  None without one."""
        try:
            m = self._locate(text)
        except FormatError:
            return None
        if m.service is not None or not isinstance(m.node, MappingNode):
            return None
        if self._env_items(text) is not None:
            return None
        for k, v in m.node.value:
            emptied = isinstance(v, ScalarNode) and v.tag.endswith(":null")
            if scalar_text(k) in ARGS_KEYS and (isinstance(v, SequenceNode) or emptied):
                return YamlMapFormat(format_path((*self.steps, scalar_text(k))),
                                     strings=False, engine=self.engine)
        return None

    def _env_items(self, text: str) -> EnvListAt | None:
        """The k8s reader of a name/value env list at the key path (Helm values), or None."""
        if not self.steps:
            return None
        m = self._locate(text)
        if m.service is None and is_name_value_list(m.node, self.steps[-1]):
            return EnvListAt(self.steps)
        return None

    def parse(self, text: str) -> dict[str, str]:
        """Key -> value text for every scalar value of the map."""
        if (env := self._env_items(text)) is not None:
            return env.parse(text)
        m = self._locate(text)
        if m.service is not None:
            return compose_flags(text, m.service, str(self.steps[1]))
        if isinstance(m.node, SequenceNode):
            return list_values(m.node) if self.strings else \
                flag_values(list_argv(m.node, self.engine))
        pairs = self._pairs(m)
        found = {k: scalar_text(v) for k, (_, v) in pairs.items() if isinstance(v, ScalarNode)}
        found = {**merged_values(m.node), **found}  # `<<: *x` keys: the reader sees them
        args = self._args_list(text)
        if args is None:
            return found
        found.pop(args.steps[-1], None)  # (an emptied list: its key null, no knob)
        return {**found, **args.parse(text)}

    def summary(self, text: str) -> Summary:
        """Each knob with the line it is on (one place each; for an argument list or a
        compose command, the occurrence that takes effect)."""
        if (env := self._env_items(text)) is not None:
            return env.summary(text)
        m = self._locate(text)
        if m.service is not None:
            name = str(self.steps[1])
            rows, notes = compose_places(text, m.service, name)
            return line_summary(text, rows, f"argv of compose service {name}", notes=notes)
        if isinstance(m.node, SequenceNode) and not self.strings:
            argv = list_argv(m.node, self.engine)
            last = {u.knob: u for u in argv.uses}
            rows = [(k, argv.line(text, u), u.value) for k, u in last.items()]
            notes = repeated_note(argv.uses, lambda i: line_of(
                text, argv.tokens[i].node.start_mark.index), f"the list at {self._where()}")
            return line_summary(text, rows, self._where(), notes=notes)
        args = self._args_list(text)
        if args is not None:
            inner = args.summary(text)
            mine = self._plain_summary(text, m)
            return Summary((*mine.knobs, *inner.knobs), (), (*mine.notes, *inner.notes))
        return self._plain_summary(text, m)

    def _plain_summary(self, text: str, m: MapAt) -> Summary:
        lines = self._lines(text, m)
        values = self.parse(text)
        rows = [(k, lines.get(k, 0), v) for k, v in values.items() if not is_flag_name(k)
                or self._args_list(text) is None]
        both = [] if self.strings else [negation_conflict(k, lines) for k in lines
                                        if k.startswith("no-") and k[3:] in lines]
        return line_summary(text, rows, self._where(), notes=[*both, *merged_notes(m.node)])

    def _lines(self, text: str, m: MapAt) -> dict[str, int]:
        if isinstance(m.node, SequenceNode):
            return {n.value.partition("=")[0]: line_of(text, n.start_mark.index)
                    for n in m.node.value if isinstance(n, ScalarNode)}
        merged = {k: line_of(text, g.key.start_mark.index) for k, g in merged_keys(m.node).items()}
        return {**merged, **{k: line_of(text, key.start_mark.index)
                             for k, (key, _) in self._pairs(m).items()}}

    def canonical(self, text: str, knob: str) -> str:
        """A flag as the engine's catalog spells it (``--tp`` -> ``--tp-size``)."""
        if not is_flag_name(knob):
            return knob
        args = self._args_list(text)
        if args is not None:
            return args.canonical(text, knob)
        try:
            m = self._locate(text)
            if m.service is not None:
                return canonical_compose_flag(text, m.service, str(self.steps[1]), knob)
        except FormatError:
            return knob
        from envknobs.flags import canonical_flag
        from envknobs.formats.common.launch import flag_lookup

        flag = flag_lookup(self.engine)(knob)
        return flag.name if flag is not None else canonical_flag(knob)  # type: ignore[attr-defined]

    def _compose_edit(self, text: str, m: MapAt, knob: str, value: str | None) -> str:
        name = str(self.steps[1])
        if not is_flag_name(knob):
            raise FormatError(f"{self._where()} is the launch command of compose service "
                              f"{name}: record flags there (its env is at key path "
                              f"services.{name}.environment)")
        knob = canonical_compose_flag(text, m.service, name, knob)  # type: ignore[arg-type]
        before = self.parse(text)
        if value is not None and before.get(knob) == value:
            return text  # (an unset always edits: a computed flag is absent from parse)
        out = edit_compose_flag(text, m.service, name, knob, value)  # type: ignore[arg-type]
        return verified(before, self.parse(out), knob, value, out)

    def _compose_back(self, text: str, m: MapAt, knob: str, value: str,
                      source: str) -> str | None:
        """A compose flag's value word written back as it was (``source``: a list item in
        its own style, or the ``${MAX_MODEL_LEN:-8192}`` compose interpolates), in place;
        the file must then read ``value`` from exactly that text, every other flag as
        before.  None where it does not (the value is then rendered); an interpolated
        value that cannot go back is refused, as nothing else writes it."""
        name = str(self.steps[1])
        knob = canonical_compose_flag(text, m.service, name, knob)  # type: ignore[arg-type]
        before = self.parse(text)
        out = restore_compose_source(text, m.service, name, knob, source)  # type: ignore[arg-type]
        computed = source == value and "$" in value
        try:
            after = None if out is None else self.parse(out)
            fits = after is not None and self.source(out, knob) == source and (
                after == {**{k: v for k, v in before.items() if k != knob}}
                if computed else after == {**before, knob: value})
        except FormatError:
            fits = False
        if fits:
            return out
        if computed:
            raise FormatError(f"{self._where()}: cannot write {knob} back as {source!r}; "
                              "edit it by hand")
        return None

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        return self.set(text, knob, value, source=source)

    def source(self, text: str, knob: str) -> str | None:
        """The exact text after ``knob:`` (to the end of its value), or None."""
        if is_flag_name(knob) and (args := self._args_list(text)) is not None:
            return args.source(text, knob)
        if (env := self._env_items(text)) is not None:
            return env.source(text, knob)
        m = self._locate(text)
        if m.service is not None and is_flag_name(knob):
            name = str(self.steps[1])
            knob = canonical_compose_flag(text, m.service, name, knob)  # type: ignore[arg-type]
            return compose_source(text, m.service, name, knob)  # type: ignore[arg-type]
        if isinstance(m.node, SequenceNode) and not self.strings and is_flag_name(knob):
            argv = list_argv(m.node, self.engine)
            return argv_value_source(text, argv, self.canonical(text, knob))
        if isinstance(m.node, SequenceNode) or m.service is not None:
            return None
        pair = self._pairs(m).get(knob)
        if pair is None or not isinstance(pair[1], ScalarNode):
            return None
        start, end = value_span(text, *pair)
        return text[start:end]

    def _check_args(self, knob: str, value: str | None = None) -> None:
        if is_flag_name(knob):  # a word of an argument list (Helm `extraArgs`)
            check_flag_name(knob)
            if value is not None:
                check_knob_value(value)
                check_yaml_text(value)
            return
        check_key_name(knob)
        if value is not None:
            check_knob_value(value)
            check_yaml_text(value)
        if self.check_key is not None:
            self.check_key(knob)

    def set(self, text: str, knob: str, value: str, source: str | None = None) -> str:
        """Set ``knob`` to ``value`` (typed as the file has it); ``source``: see the docstring."""
        self._check_args(knob, value)
        if is_flag_name(knob) and (args := self._args_list(text)) is not None:
            return args.set(text, knob, value, source=source)
        if (env := self._env_items(text)) is not None:
            return env.set(text, knob, value, source=source)
        m = self._locate(text)
        refuse_merged(m.node, knob)
        if m.service is not None:
            if source is not None:
                back = self._compose_back(text, m, knob, value, source)
                if back is not None:
                    return back
            return self._compose_edit(text, m, knob, value)
        before = self.parse(text)
        if before.get(knob) == value:
            return text
        if isinstance(m.node, SequenceNode):
            if self.strings:
                out = set_in_list(text, m.node, knob, value)
            else:
                knob = self.canonical(text, knob)
                if before.get(knob) == value:
                    return text
                if source is not None:  # the item as it was written
                    out = with_argv_source(text, list_argv(m.node, self.engine), knob, source)
                    if out is not None and self.parse(out) == {**before, knob: value}:
                        return out
                out = edit_list_flag(text, m.node, knob, value, self.engine)
            return verified(before, self.parse(out), knob, value, out)
        pairs = self._pairs(m)
        self._check_negation(text, pairs, knob)
        attempts = []
        if knob in pairs:
            key, node = pairs[knob]
            check_editable(text, key, node, knob)
            if source is not None:
                attempts.append(lambda: splice_source(text, key, node, source))
            style_, quote = neighbour_style(v for _, v in pairs.values())
            rendered = typed_value(value, node, quote)
            attempts.append(lambda: splice_value(text, key, node, rendered))
        else:
            if source is not None and "\n" not in source:
                attempts.append(lambda: add_pair(text, m, knob, f":{source}"))
            style_, quote = neighbour_style(v for _, v in pairs.values())
            scalars = [v for _, v in pairs.values() if isinstance(v, ScalarNode)]
            rendered = new_scalar(value, knob, scalars, style_, quote, self.strings, self.engine)
            attempts.append(lambda: add_pair(text, m, knob, f": {rendered}"))
        for i, attempt in enumerate(attempts):
            out = attempt()
            try:
                return verified(before, self.parse(out), knob, value, out)
            except FormatError:
                if i == len(attempts) - 1:
                    raise
        raise AssertionError("unreachable")

    def _check_negation(self, text: str, pairs: dict, knob: str) -> None:
        """A ``--config`` file's ``x`` and ``no-x`` are one argument (env maps: no such);
        a ``--flag`` is no key of a map (vLLM and SGLang read ``x: v`` as ``--x v``, so a
        ``--x`` key would be a flag nobody has)."""
        if is_flag_name(knob):
            key = knob.lstrip("-")
            raise FormatError(f"{self._where()} is a map of keys, not a launch command: "
                              f"{knob} has no place there (in a --config file it is the key "
                              f"{key!r}: record knob TARGET {key}=VALUE)")
        if self.strings:
            return
        lines = {k: line_of(text, key.start_mark.index) for k, (key, _) in pairs.items()}
        why = negation_conflict(knob, lines)
        if why is not None:
            raise FormatError(why)

    def unset(self, text: str, knob: str) -> str:
        """Remove ``knob`` from the map (same text if it is absent)."""
        self._check_args(knob)
        if is_flag_name(knob) and (args := self._args_list(text)) is not None:
            return args.unset(text, knob)
        if (env := self._env_items(text)) is not None:
            return env.unset(text, knob)
        m = self._locate(text)
        refuse_merged(m.node, knob)
        if m.service is not None:
            return self._compose_edit(text, m, knob, None)
        if isinstance(m.node, SequenceNode):
            if not self.strings:
                knob = self.canonical(text, knob)
            out = unset_in_list(text, m.node, knob) if self.strings else \
                edit_list_flag(text, m.node, knob, None, self.engine)
            return out if out == text else verified(self.parse(text), self.parse(out), knob, None, out)
        pairs = self._pairs(m)
        self._check_negation(text, pairs, knob)
        if knob not in pairs:
            return text
        key, node = pairs[knob]
        check_editable(text, key, node, knob)
        out = remove_pair(text, m.node, key, node)  # type: ignore[arg-type]
        return verified(self.parse(text), self.parse(out), knob, None, out)


__all__ = ["KEY_RE", "KeyCheck", "YamlMapFormat", "check_key_name", "key_checker"]
