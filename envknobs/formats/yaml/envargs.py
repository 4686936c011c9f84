"""Launch flags kept in a container's env value (issue 50 item 4).

KServe's ``LLMInferenceService`` and many Helm charts pass vLLM its extra flags in one
env var that the serving runtime's command expands (``VLLM_ADDITIONAL_ARGS: >-
--max-model-len 8192 --enable-prefix-caching``; ``SGLANG_ARGS``-style names).  Such a
value is a *string of flags* (:class:`~envknobs.formats.common.argstring.ArgString`): its
flags are knobs named ``--flag`` of the k8s target, read with the flag reader of serve
scripts, and edited inside the value with the same splices as a dotenv or systemd string
(a value rewritten in its word, a removed flag's words cut with one blank, a new flag at
the end), so the value's YAML scalar keeps its style, lines and indentation.

Which values are read: those that start with a flag (``--x``) and whose words are all
*plain* (``[A-Za-z0-9_@+=:,./-]``) and written in the file as the value holds them: a
plain, quoted or block scalar (``>-`` folds its lines into blanks, so each word is still
written verbatim).  Others stay opaque env values.  The engine whose catalog spells the
flags is the one the env name says (``VLLM_*``, ``SGLANG_*``/``SGL_*``), else the
container's.

Decisions: the env item holding the string is no env knob of its own any more (an edit of
it whole is refused, naming its flags, as for a dotenv string); a flag both in the argv
and in a string, or in two strings, is refused naming each line (:func:`owner`); a new
flag goes into the string only where the container has no ``command``/``args`` (the
runtime's command expands the string: KServe), and where it has several strings it is
refused naming them.
"""

from __future__ import annotations

import re
from typing import Sequence

from ruamel.yaml.nodes import ScalarNode

from envknobs.formats.common.argstring import PLAIN
from envknobs.formats.common.argstring import ArgString
from envknobs.formats.common.argstring import StringFlagConflict
from envknobs.formats.common.argstring import add_in
from envknobs.formats.common.text import holds_flags
from envknobs.formats.common.argstring import last_uses
from envknobs.formats.common.argstring import owner
from envknobs.formats.common.argstring import remove_in
from envknobs.formats.common.argstring import set_in
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of
from envknobs.formats.yaml.edit import last_content_end

_PIECE = re.compile(r"[^ \t\r\n]+")


def _span(text: str, node: ScalarNode) -> tuple[int, int]:
    """Where the scalar's content is written (quotes and block header excluded)."""
    if node.style in ("|", ">"):
        return text.index("\n", node.start_mark.index) + 1, last_content_end(text, node)
    if node.style in ("'", '"'):
        return node.start_mark.index + 1, node.end_mark.index - 1
    return node.start_mark.index, node.end_mark.index


def arg_string(text: str, name: str, node: ScalarNode | None, where: str) -> ArgString | None:
    """The env value ``node`` as a string of flags (None: not one the ledger reads)."""
    if not isinstance(node, ScalarNode) or not holds_flags(node.value or ""):
        return None
    start, end = _span(text, node)
    pieces = tuple(Word(start + m.start(), start + m.end(), m.group(0))
                   for m in _PIECE.finditer(text[start:end]))
    if [w.text for w in pieces] != node.value.split() or \
            not all(PLAIN.match(w.text) for w in pieces):
        return None
    return ArgString(name, start, end, where, pieces)


def engine_of(name: str, fallback: str | None) -> str | None:
    upper = name.upper()
    return "vllm" if "VLLM" in upper else "sglang" if "SGL" in upper else fallback


def env_strings(text: str, items: Sequence, label: str) -> list[ArgString]:
    """The strings of flags among a container's env items (the last item of a name)."""
    last = {it.name: it for it in items if not it.from_ref}
    out = []
    for it in last.values():
        line = line_of(text, it.node.start_mark.index)
        s = arg_string(text, it.name, it.value, f"env {it.name} (line {line}) of container {label}")
        if s is not None:
            out.append(s)
    return out


def string_uses(text: str, items: Sequence, label: str, engine: str | None
                ) -> dict[str, list[tuple[ArgString, FlagUse]]]:
    """Flag -> its last use in each string that has it."""
    from envknobs.formats.common.launch import flag_lookup

    out: dict[str, list[tuple[ArgString, FlagUse]]] = {}
    for s in env_strings(text, items, label):
        for knob, use in last_uses(s, flag_lookup(engine_of(s.name, engine))).items():
            out.setdefault(knob, []).append((s, use))
    return out


def string_flags(text: str, items: Sequence, label: str, engine: str | None,
                 argv: dict[str, str]) -> dict[str, str]:
    """The flags the env strings give (one string each, not also in the argv)."""
    return {k: held[0][1].value for k, held in string_uses(text, items, label, engine).items()
            if len(held) == 1 and k not in argv and held[0][1].value is not None}


def edit_in_strings(text: str, items: Sequence, label: str, engine: str | None, knob: str,
                    value: str | None, argv_line: int | None, bare: bool,
                    args_line: int | None = None, into: str | None = None) -> str | None:
    """``text`` with ``knob`` set (None: removed) in the env string that holds it; a new
    flag into the one string where the container has no argv (``bare``).  None where no
    string is concerned (the argv's edit then goes ahead).

    A new flag of a container that has both an argv (its ``command``/``args`` list at
    ``args_line``) and an env string of flags could go in either: refused naming both
    lines, unless ``into`` (``record flag --in args|env``) selects one."""
    from envknobs.formats.common.launch import flag_lookup

    if into is not None and into not in ("args", "env"):
        raise FormatError(f"--in {into}: a flag goes in the container's args or in an env "
                          "string of flags: give --in args or --in env")

    held = string_uses(text, items, label, engine).get(knob, [])
    elsewhere = [(argv_line, "in the container's command/args")] if argv_line else []
    own = owner(knob, held, elsewhere, text)
    if own is not None:
        s, use = own
        if value is None:
            return remove_in(text, s, use)
        return set_in(text, s, use, knob, value, flag_lookup(engine_of(s.name, engine))(knob))
    strings = env_strings(text, items, label)
    if value is None or not strings or argv_line or into == "args":
        if into == "args" and bare and value is not None:
            raise FormatError(f"--in args: container {label} has no command/args list; "
                              "record the flag without --in")
        return None
    if not bare and into is None:
        named = "; ".join(f"env {s.name} (line {line_of(text, s.start)})" for s in strings)
        raise FormatError(
            f"{knob} can go in the command/args of container {label} (line {args_line}) or "
            f"in {named}, a string of flags the server also reads: select one with --in "
            "args or --in env")
    if len(strings) > 1:
        raise StringFlagConflict(knob, [(line_of(text, s.start), f"{s.name}, no {knob} yet")
                                        for s in strings],
                                 "add it to the one the server reads by hand, then record it "
                                 "with --adopt", "could go in more than one env string")
    from envknobs.formats.common.launch import flag_text

    return add_in(text, strings[0], flag_text(knob, value, flag_lookup(
        engine_of(strings[0].name, engine)), False))


def holder_refusal(text: str, items: Sequence, label: str, name: str) -> str | None:
    """Why the env item ``name`` is not edited whole: it is a string of flags."""
    s = next((x for x in env_strings(text, items, label) if x.name == name), None)
    if s is None:
        return None
    flags = [w.text for w in s.pieces if w.text.startswith("--")]
    item = next(it for it in reversed(items) if it.name == name)
    return (f"line {line_of(text, item.node.start_mark.index)}: {name} is a string of flags the server reads "
            f"({', '.join(flags[:4])}{', ...' if len(flags) > 4 else ''}): record each flag "
            f"(ledger record flag TARGET {flags[0]}=...), not the whole value")


def in_both(text: str, items: Sequence, label: str, engine: str | None,
            argv: dict[str, str]) -> list[str]:
    """Flags both in the argv and in an env string of flags."""
    if not env_strings(text, items, label):
        return []
    return [k for k in string_uses(text, items, label, engine) if k in argv]


def with_strings(text: str, items: Sequence, label: str, values: dict[str, str],
                 argv: dict[str, str], engine: str | None) -> dict[str, str]:
    """A container's env ``values`` and ``argv`` flags with its strings of flags read: a
    string gives its flags, not itself; a flag in both the argv and a string has no one
    value (the command's order decides: ``target show`` notes it)."""
    strings = env_strings(text, items, label)
    if not strings:
        return {**values, **argv}
    values = {k: v for k, v in values.items() if k not in {s.name for s in strings}}
    held = string_flags(text, items, label, engine, argv)
    both = set(in_both(text, items, label, engine, argv))
    return {**values, **{k: v for k, v in argv.items() if k not in both}, **held}


def refuse_unread_string(text: str, items: Sequence, label: str, knob: str) -> None:
    """A flag the container's argv does not have but an env value the ledger cannot read
    as a string of flags holds (a JSON word in ``VLLM_ADDITIONAL_ARGS``): the server reads
    it from there, so adding it to the argv would give it twice and editing the argv none.
    Refused naming that item's line and the way to change it."""
    word = re.compile(rf"(^|\s){re.escape(knob)}(=|\s|$)")
    for it in items:
        if it.value is not None and word.search(str(it.value.value)):
            line = line_of(text, it.node.start_mark.index)
            raise FormatError(
                f"line {line}: {knob} is in the value of env {it.name} of container "
                f"{label}, a string of flags the server reads; the ledger does not edit "
                f"flags inside a value holding {_odd(it.value.value)!r}: record the whole "
                f"string (ledger record knob TARGET {it.name}='...')")


def _odd(value: str) -> str:
    return next((w for w in value.split() if not PLAIN.match(w)), value.split()[0])


def in_string_scopes(found, held: dict, lines: dict[str, int], label: str):
    """``found`` (a Summary) with each flag read from an env string placed there
    (``target show``: ``env VLLM_ADDITIONAL_ARGS of container main``), not in the argv."""
    from dataclasses import replace

    def placed(k):
        uses = held.get(k.knob)
        if not uses or not k.places or k.places[0].line != lines.get(k.knob):
            return k
        where = f"env {uses[-1][0].name} of container {label}"
        return replace(k, places=tuple(replace(p, scope=where) for p in k.places))
    return replace(found, knobs=tuple(placed(k) for k in found.knobs))
