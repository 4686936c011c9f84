"""The ``dotenv`` target format: python-dotenv files and systemd ``EnvironmentFile``\\ s.

Reading follows python-dotenv's grammar exactly (:mod:`envknobs.formats.dotenv_read`
mirrors ``dotenv.parser``, with source offsets kept so edits can be surgical): ``K=V`` lines, an
optional ``export`` prefix, single- or double-quoted values (which may span lines),
unquoted values with `` #`` comments stripped, ``#`` comment lines.  Lines python-dotenv
cannot parse are skipped, as it skips them.  A key without ``=`` has no value and is
not reported.  When a key appears twice the last one wins.  A value containing a
``${NAME}`` reference is interpolated by python-dotenv (but not by systemd), so it has
no single static value: :meth:`DotenvFormat.parse` leaves it out and ``set``/``unset``
refuse to edit it.

Writing: every value written reads back exactly through python-dotenv
(``dotenv_values``, interpolation on), through bash (``set -a; source FILE``) and through
systemd.  The rule, in order of preference:

1. bare when it is only ``[A-Za-z0-9_@%+=:,./-]`` (or empty);
2. single-quoted when it has no ``'``, no ``\\\\`` and does not end in ``\\``;
3. double-quoted, with ``\\`` and ``"`` escaped, when it has no ``$`` and no backtick;
4. otherwise refused with :class:`~envknobs.formats.FormatError`: a value holding a
   ``${...}`` reference (python-dotenv would substitute it whatever the quoting), or a
   single quote or backslash pair together with ``$`` or a backtick (no quoting reads
   the same in python-dotenv and bash).

An existing line keeps its quote style when the new value allows it.  A new knob is
appended as ``K=V`` (never with ``export``, which systemd does not accept).  ``unset``
deletes every line that sets the key.

Strings of flags (:mod:`envknobs.formats.common.argstring`): a value that starts with a
flag (``VLLM_ARGS="--max-model-len 8192 --enforce-eager"``) is the launch's arguments,
which a unit's ``$VLLM_ARGS`` or a script's ``$VLLM_ARGS`` expands: its flags are the
knobs (``--max-model-len``), edited inside the string, and the variable is none (an edit
of it is refused, naming the flags).  The file does not say which launch expands it, so
a flag goes in the string that has it; a new one in the file's only string; where
several strings could hold it, nothing is picked: the edit is refused naming each line.
A flag is looked up in vLLM's catalog where the variable's name says ``VLLM``, in
SGLang's where it says ``SGL``.  ``summary`` lists every key and flag with its line for
a file with such strings (None, as before, for a plain file).
"""

from __future__ import annotations

from typing import Sequence
import re
from typing import Mapping

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.formats.common.argstring import ArgString
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.formats.common import TargetFormat
from envknobs.formats.common.text import check_assignment_args
from envknobs.formats.common.text import flags_string_refusal
from envknobs.formats.common.text import holds_flags
from envknobs.formats.common.text import insert_line
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import remove_lines
from envknobs.formats.common.text import verified
from envknobs.formats.common.text import verified_many
from envknobs.formats.dotenv_read import Binding
from envknobs.formats.dotenv_read import read_bindings

# python-dotenv's interpolation pattern (dotenv.variables._posix_variable).
_POSIX_VARIABLE = re.compile(r"\$\{[^}:]*(?::-[^}]*)?\}")
_BARE_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]*\Z")


def _fits_single(value: str) -> bool:
    return "'" not in value and "\\\\" not in value and not value.endswith("\\")


def _fits_double(value: str) -> bool:
    return "$" not in value and "`" not in value


def render_value(value: str, old_quote: str | None = None) -> str:
    """The text after ``K=`` that python-dotenv, bash and systemd all read as ``value``.

    Raises FormatError for a value no quoting can carry to all of them (see module doc).
    """
    if _POSIX_VARIABLE.search(value):
        raise FormatError(
            f"value {value!r} contains a ${{...}} reference that python-dotenv would "
            "substitute; it cannot be written literally in a dotenv file"
        )
    double = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if old_quote == "'" and _fits_single(value):
        return f"'{value}'"
    if old_quote == '"' and _fits_double(value):
        return double
    if _BARE_SAFE.match(value):
        return value
    if _fits_single(value):
        return f"'{value}'"
    if _fits_double(value):
        return double
    raise FormatError(
        f"value {value!r} mixes a single quote or backslashes with $ or a backtick: "
        "no quoting reads back the same in python-dotenv and bash"
    )


def _render_for(knob: str, value: str, old_quote: str | None) -> str:
    try:
        return render_value(value, old_quote)
    except FormatError as e:
        raise FormatError(f"{knob}: {e}") from None


def binding_lines(text: str) -> dict[str, int]:
    """Key -> the line of the binding python-dotenv takes its value from (the last one)."""
    return {b.key: line_of(text, b.start) for b in read_bindings(text) if b.value is not None}


def _is_dynamic(b: Binding) -> bool:
    return b.value is not None and bool(_POSIX_VARIABLE.search(b.value))


def _strings(text: str) -> list[tuple[ArgString, str]]:
    """The file's strings of flags, each with the engine its name says."""
    from envknobs.formats.common.argstring import read_string

    out = []
    last = {b.key: b for b in read_bindings(text)}
    for b in last.values():
        if b.value is None or _is_dynamic(b) or not holds_flags(b.value):
            continue
        start, end = (b.value_start + 1, b.value_end - 1) if b.quote else \
            (b.value_start, b.value_end)
        where = f"{b.key} (line {line_of(text, b.start)})"
        found, _ = read_string(text, b.key, start, end, b.value, where)
        if found is not None:
            engine = "vllm" if "VLLM" in b.key.upper() else "sglang" if "SGL" in b.key.upper() else ""
            out.append((found, engine))
    return out


def _lookup(engine: str):
    from envknobs.formats.common.launch import flag_lookup

    return flag_lookup(engine or None)


def _string_flags(text: str) -> dict[str, list[tuple[ArgString, FlagUse, str]]]:
    """Flag -> its last use in each string that has it."""
    from envknobs.formats.common.argstring import last_uses

    out: dict[str, list] = {}
    for s, engine in _strings(text):
        for knob, use in last_uses(s, _lookup(engine)).items():
            out.setdefault(knob, []).append((s, use, engine))
    return out


class DotenvFormat(TargetFormat):
    """python-dotenv / systemd EnvironmentFile; see the module docstring for the rules."""

    name = "dotenv"

    def parse(self, text: str) -> dict[str, str]:
        """Key -> value, as python-dotenv reads them (interpolated values left out); a
        string of flags gives its flags instead (one in several strings: left out)."""
        found = self._keys(text)
        names = {s.name for s, _ in _strings(text)}
        found = {k: v for k, v in found.items() if k not in names}
        for knob, held in _string_flags(text).items():
            if len(held) == 1 and held[0][1].value is not None:
                found[knob] = held[0][1].value
        return found

    def _keys(self, text: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for b in read_bindings(text):
            if b.value is None or _is_dynamic(b):
                found.pop(b.key, None)
            else:
                found.pop(b.key, None)  # re-insert: the last occurrence decides the order
                found[b.key] = b.value
        return found

    def set(self, text: str, knob: str, value: str, source: str | None = None) -> str:
        """Set ``knob``; KnobError for a bad name/value, FormatError for a value that
        cannot be written for both python-dotenv and bash, or an interpolated line.
        ``source``: the exact text after ``=`` to write where it reads as ``value``."""
        if is_flag_name(knob):
            return self._flag(text, knob, value)
        check_assignment_args(knob, value)
        _refuse_holder(text, knob)
        # The last binding decides, even `K` without '=' (python-dotenv reads it as no value).
        last = next((b for b in reversed(read_bindings(text)) if b.key == knob), None)
        if last is None or last.value is None:
            exact = source is not None and "\n" not in source and \
                self._keys(f"{knob}={source}\n").get(knob) == value
            written = source if exact else _render_for(knob, value, None)
            out = insert_line(text, len(text), f"{knob}={written}")
            _refuse_new_string(text, out)
            return verified(self.parse(text), self.parse(out), knob, value, out)
        return self.edit_many(text, {knob: value})

    def source(self, text: str, knob: str) -> str | None:
        """The exact text after ``knob=`` on the line that decides it (``'FLASHINFER'``,
        ``"/data/hf cache"``), which a revert writes back where it still reads as the
        value; None for a flag, an interpolated or absent value."""
        if is_flag_name(knob):
            return None
        b = next((b for b in reversed(read_bindings(text)) if b.key == knob), None)
        if b is None or b.value is None or _is_dynamic(b) or b.eq < 0:
            return None
        return text[b.eq + 1 : b.value_end]

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        last = next((b for b in reversed(read_bindings(text)) if b.key == knob), None)
        if source is None or last is None or last.value is None or is_flag_name(knob):
            return self.set(text, knob, value)
        return self.edit_many(text, {knob: value}, {knob: source})

    def unset(self, text: str, knob: str) -> str:
        """Delete every line that sets ``knob`` (same text if there is none)."""
        return self.edit_many(text, {knob: None})

    def edit_many(
        self, text: str, edits: Mapping[str, str | None],
        sources: Mapping[str, str | None] | None = None,
    ) -> str:
        """Unset (None) or set each knob of ``edits`` that the file has, in one pass:
        the same text as editing them one at a time, read and verified once (a
        ``revert --perf-only`` or a bisect step edits hundreds of knobs of one file).
        Knobs the file does not set yet are refused: add those with :meth:`set`."""
        flags = {k: v for k, v in edits.items() if is_flag_name(k)}
        for knob, value in flags.items():
            text = self._flag(text, knob, value)
        edits = {k: v for k, v in edits.items() if k not in flags}
        for knob, value in edits.items():
            check_assignment_args(knob, value)
            _refuse_holder(text, knob)
        bindings = read_bindings(text)
        last = {b.key: b for b in bindings}
        cuts: list[tuple[Binding, str | None]] = []  # (binding, new value text | None)
        for knob, value in edits.items():
            if value is None:
                cuts += [(b, None) for b in bindings if b.key == knob]
                continue
            b = last.get(knob)
            if b is None or b.value is None:
                raise FormatError(f"{knob} is not set in the file: add it with set()")
            if _is_dynamic(b):
                raise FormatError(
                    f"line {line_of(text, b.start)}: {knob} interpolates another variable "
                    f"({b.value!r}); edit it by hand"
                )
            if b.value != value:
                src = (sources or {}).get(knob)
                exact = src is not None and "\n" not in src and \
                    self._keys(f"{knob}={src}\n").get(knob) == value
                cuts.append((b, src if exact else _render_for(knob, value, b.quote)))
        if not cuts:
            return text
        out = text
        for b, new in sorted(cuts, key=lambda c: c[0].start, reverse=True):
            # Replace from just after '=' so blanks python-dotenv tolerates there, and bash
            # does not, go away with the old value.
            out = remove_lines(out, b.start, b.end) if new is None else \
                out[: b.eq + 1] + new + out[b.value_end :]
        _refuse_new_string(text, out)
        return verified_many(self.parse(text), self.parse(out), edits, out)

    # -- strings of flags -------------------------------------------------------------
    def canonical(self, text: str, knob: str) -> str:
        """A flag as the catalog of its strings' engine spells it (``--tp`` -> ``--tp-size``
        in ``SGLANG_OPTS``)."""
        if not is_flag_name(knob):
            return knob
        for _, engine in _strings(text):
            flag = _lookup(engine)(knob)
            if flag is not None:
                return flag.name  # type: ignore[attr-defined]
        return knob

    def _flag(self, text: str, knob: str, value: str | None) -> str:
        """Set or unset a flag inside the file's strings of flags (module docstring)."""
        from envknobs.formats.common.argstring import owner
        from envknobs.formats.common.argstring import remove_in
        from envknobs.formats.common.argstring import set_in
        from envknobs.registry import check_knob_value

        check_flag_name(knob)
        if value is not None:
            check_knob_value(value)
        knob = self.canonical(text, knob)
        held = _string_flags(text).get(knob, [])
        own = owner(knob, [(s, u) for s, u, _ in held], [], text)
        before = self.parse(text)
        if own is None and value is None:
            return text
        if own is None:
            out = _add_flag(text, knob, value)
        else:
            s, use = own
            flag = _lookup(held[0][2])(knob)
            out = remove_in(text, s, use) if value is None else \
                set_in(text, s, use, knob, value, flag)
        return text if out == text else verified(before, self.parse(out), knob, value, out)

    def summary(self, text: str) -> Summary | None:
        """Every key and flag with its line, for a file with strings of flags (None for
        a plain file: its keys have one spot each)."""
        from envknobs.formats.common.argstring import place_of

        if not _strings(text):
            return None
        values = self.parse(text)
        lines = binding_lines(text)
        knobs = [KnobSummary(k, (Place(k, "at 1", lines[k], "env", "top level", v, False, None,
                                       text.splitlines()[lines[k] - 1]),), False, False)
                 for k, v in values.items() if not is_flag_name(k)]
        for knob, held in _string_flags(text).items():
            places = tuple(place_of(text, s, u, values.get(knob)) for s, u, _ in held)
            knobs.append(KnobSummary(knob, places, False, len(places) > 1, is_flag=True))
        return Summary(tuple(knobs))

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        found = self.summary(text)
        return found.get(knob) if found is not None else None

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """A flag of a string by its place: edited there, put back at its anchor where it
        is gone (a revert), else added as a new flag."""
        from envknobs.formats.common.argstring import put_back_in

        for e in edits:
            back = None
            if e.value is not None and knob not in _string_flags(text) and e.anchor:
                back = put_back_in(text, [s for s, _ in _strings(text)], e.anchor)
                back = _with_value(self, back, knob, e.value)
            if back is not None and self.parse(back) == {**self.parse(text), knob: e.value}:
                text = back
            else:
                text = self._flag(text, knob, e.value)
        return text


def _add_flag(text: str, knob: str, value: str) -> str:
    """A new flag at the end of the file's only string of flags."""
    from envknobs.formats.common.argstring import StringFlagConflict
    from envknobs.formats.common.argstring import add_in
    from envknobs.formats.common.launch import flag_text

    strings = _strings(text)
    if not strings:
        raise FormatError(f"no string of flags in this file (a value such as "
                          f"VLLM_ARGS=\"--max-model-len 8192\") to put {knob} in; set it "
                          "where the launch command is")
    if len(strings) > 1:
        raise StringFlagConflict(knob, [(line_of(text, s.start), f"{s.name}, no {knob} yet")
                                        for s, _ in strings],
                                 "add it by hand to the string the launch expands",
                                 "is in no string of flags yet, and the file has several")
    s, engine = strings[0]
    return add_in(text, s, flag_text(knob, value, _lookup(engine), equals=False))


def _with_value(fmt: DotenvFormat, text: str | None, knob: str, value: str) -> str | None:
    """``text`` (a flag just put back) with the flag holding ``value``; None: it cannot."""
    try:
        return fmt._flag(text, knob, value) if text is not None else None
    except FormatError:
        return None


def _refuse_new_string(text: str, out: str) -> None:
    """FormatError where an env edit makes a value a string of flags: its knobs would
    become the flags, and the ledger's entry would name a knob the file no longer has."""
    new = {s.name for s, _ in _strings(out)} - {s.name for s, _ in _strings(text)}
    if new:
        raise flags_string_refusal(sorted(new)[0])


def _refuse_holder(text: str, knob: str) -> None:
    for s, _ in _strings(text):
        if s.name == knob:
            raise FormatError(f"line {line_of(text, s.start)}: {knob} holds launch flags, "
                              "which are knobs of their own: record them as flags (ledger "
                              "record flag TARGET --FLAG=V)")
