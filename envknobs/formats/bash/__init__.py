"""The ``bash`` target format: env knobs and launch flags in a serve script.

Reading.  The script is parsed into its structure (:mod:`.tree`) and walked path by
path (:mod:`.flow`), so every assignment is known with its scope: top level and
unconditional, or inside an ``if``/``case``/loop/function/subshell/``&&`` list.  Text in
comments, quoted strings and here-documents is never a knob.  What counts:

* ``export K=V``, ``K=V``, ``declare -x K=V``, ``unset K``; ``K=V`` prefixes (and ``env
  K=V`` arguments) on the launch command, which win over the rest;
* the launch commands (:mod:`.launch`): every ``python -m sglang.launch_server`` /
  ``vllm serve`` / ``docker run`` ... in the script, wherever it is.  Without one, the
  last ``exec CMD`` is the launch, else the last command with ``K=V`` prefixes, else the
  end of the script (a file that is sourced).  Nothing after a launch is seen by it;
* ``docker run`` / ``podman run``: the container's env is its ``-e K=V`` / ``--env K=V`` /
  ``--env=K=V`` options only (``-e K`` passes the shell's K through; an ``export K`` or a
  ``K=V docker run`` prefix without it never reaches the server, see :mod:`.wrappers`);
* launch flags, as knobs named ``--flag`` (:mod:`envknobs.flags`): ``--x v``, ``--x=v``,
  switches, ``--no-x``, ``nargs`` lists, on the launch line or in an ``args=( ... )``
  array expanded there with ``"${args[@]}"``.

Each knob has *places* (:class:`~envknobs.formats.common.places.Place`): every site some run of
some launch can see.  One place, seen on every path: the knob has a static value
(:meth:`BashFormat.parse`).  Several, or one seen only on some paths: it is
``conditional`` (the value depends on a branch) or ``repeated`` (each launch line has
its own), and has no single value.  A value the shell computes (``$HOME/x``,
``$(nproc)``, ``${X:-8}``) is ``computed``: read, never rewritten.

Writing never picks a place silently.  ``set``/``unset`` of a knob with several places,
or a conditional one, raise :class:`~envknobs.formats.common.places.AmbiguousKnob` listing
every place, unless the caller selects: ``at=LINE`` (the place on that line; a launch
line without the knob gets a new prefix/flag there) or ``at=ALL`` (every place).  Edits:

* a value is rewritten in place, keeping its form (``--x v`` / ``--x=v``) and quoting
  style; values are quoted only where the shell needs it, so hostile text is data;
* a new env knob becomes ``export K=V`` at top level after the last top-level ``export``
  before the first launch (or before the first command), where every path sees it;
  when no such place exists (the launches are inside the script's first compound
  command) it is refused.  On docker launchers it becomes ``-e K=V`` next to the other
  ``--env`` options;
* a new flag goes on the launch: into its own ``args=( ... )`` array when it has one,
  else on its own continuation line in the script's indentation (inline on a one-line
  command), in the ``=`` form when most of the launch's flags use it;
* ``unset`` without a selection removes the knob from the one place that takes effect
  and from the dead assignments the launch could otherwise fall back to (as before);
  with a selection, an assignment inside a branch becomes ``unset K`` on that line (the
  branch then reads unset exactly, even if another assignment reaches it, and a revert
  puts the line back byte for byte), and a launch word is removed with the blanks
  around it — :attr:`Place.anchor` tells where it goes back;
* ``--env-file F`` on a docker launch: the container's env also comes from F, so env
  knobs of that launch other than an in-place value change are refused, naming F to
  manage as a ``dotenv`` target instead.

Every edit is re-read and checked: the edited knob's places hold exactly what was asked
and every other knob reads as before on every path; otherwise FormatError, file
untouched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping
from typing import Sequence

from envknobs.flags import canonical_flag
from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.bash.additions import add_batch
from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.bash.analysis import analyse
from envknobs.formats.common.launch import flag_lookup
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.bash.select import Selection
from envknobs.formats.bash.select import apply_edits
from envknobs.formats.bash.select import remove_everywhere
from envknobs.formats.bash.select import edit_batch
from envknobs.formats.bash.select import select
from envknobs.formats.bash.select import verify_added
from envknobs.formats.bash.summary import insertion_point
from envknobs.formats.bash.summary import summarize
from envknobs.formats.bash.summary import to_places
from envknobs.formats.common.shellwords import decode_value
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.bash.write import add_docker_env
from envknobs.formats.bash.write import with_source
from envknobs.formats.bash.write import add_flag
from envknobs.formats.bash.write import add_prefix
from envknobs.formats.bash.write import value_span
from envknobs.formats.bash.reach import barrier_notes
from envknobs.formats.bash.reach import refuse_unreached
from envknobs.formats.bash.summary import fingerprints_except
from envknobs.formats.common.argstring import put_back_in
from envknobs.formats.bash.strings import refuse_holder
from envknobs.formats.bash.strings import script_strings
from envknobs.formats.bash.strings import string_edit
from envknobs.formats.bash.strings import string_uses
from envknobs.formats.bash.strings import with_strings
from envknobs.formats.common.sniff import refuse_foreign
from envknobs.formats.common.text import each_in_turn
from envknobs.formats.common.text import verified
from envknobs.formats.common.text import insert_line
from envknobs.formats.common.text import line_of
from envknobs.formats.common.places import ALL
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value

__all__ = ["ALL", "BashFormat", "decode_value", "quote_value"]


def _check(knob: str, value: str | None = None) -> None:
    (check_flag_name if is_flag_name(knob) else check_knob_name)(knob)
    if value is not None:
        check_knob_value(value)


def _read(text: str) -> Analysis:
    """The script's analysis, after refusing a file that is plainly not a script (a
    systemd unit, a YAML document: see :mod:`envknobs.formats.common.sniff`)."""
    refuse_foreign(text, "bash")
    return analyse(text)


def refuse_two_spellings(a: Analysis, knob: str) -> None:
    """FormatError where one launch gives flag ``knob`` under two spellings argparse reads
    as one (``--speculative-algo EAGLE`` and ``--speculative-algorithm NGRAM``): argparse
    takes the last, and which one the operator meant is theirs to say."""
    from envknobs.formats.common.launch import flag_spelling

    for launch in a.launches:
        if launch.shape is None:
            continue
        uses = [u for u in scan_flags(launch.shape.args, flag_lookup(launch.engine))
                if u.knob == knob]
        names = sorted({flag_spelling(u.word)[0] for u in uses})  # type: ignore[misc]
        if len(names) > 1:
            where = ", ".join(f"line {line_of(a.text, u.word.start)} "
                              f"({a.text[u.word.start:u.end]})" for u in uses)
            raise FormatError(f"{knob}: {' and '.join(names)} are one flag to argparse "
                              f"({where}); argparse takes the last: remove one by hand, "
                              "then record the other")


def resolve_knob(a: Analysis, knob: str) -> str:
    """The knob name the analysis uses for ``knob`` (a flag's catalog spelling)."""
    if not is_flag_name(knob):
        return knob
    for launch in a.launches:
        flag = flag_lookup(launch.engine)(knob)
        if flag is not None:
            return flag.name  # type: ignore[attr-defined]
    return canonical_flag(knob) if knob.startswith("--") else knob


class BashFormat(TargetFormat):
    """Serve scripts; see the module docstring for the rules."""

    name = "bash"

    # -- reading --------------------------------------------------------------------
    def parse(self, text: str) -> dict[str, str]:
        """Knob -> value for every knob with one static value (flags included)."""
        return {
            k.knob: k.value
            for k in self.summary(text).knobs
            if k.value is not None and not k.needs_selection
        }

    def parse_exact(self, text: str) -> dict[str, str]:
        out = {}
        for k in self.summary(text).knobs:
            if not k.needs_selection and len(k.places) == 1:
                value = k.places[0].value if k.places[0].value is not None else k.places[0].expr
                if value is not None:
                    out[k.knob] = value
        return out

    def summary(self, text: str) -> Summary:
        """Every knob and flag with its places, and the launch commands (``target show``);
        the flags of strings the launch expands (``$OPTS``: :mod:`.strings`) included."""
        a = _read(text)
        found = with_strings(a, summarize(a))
        notes = barrier_notes(a)
        return replace(found, notes=(*found.notes, *notes)) if notes else found

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        """The places of one knob (None when the script never sets it)."""
        a = _read(text)
        return with_strings(a, summarize(a)).get(resolve_knob(a, knob))

    def places(self, text: str, knob: str) -> tuple[Place, ...]:
        found = self.knob(text, knob)
        return found.places if found else ()

    def canonical(self, text: str, knob: str) -> str:
        """The name this file's knob goes by: a flag's catalog spelling for its engine
        (``--tp`` -> ``--tp-size``, ``-tp`` -> ``--tensor-parallel-size`` for vLLM)."""
        return resolve_knob(_read(text), knob)

    def source(self, text: str, knob: str) -> str | None:
        """The exact shell text of ``knob``'s value (``"/models/x"``, ``'0.8'``, or the
        text the shell computes it from: ``${MEM_FRACTION_STATIC}``), its one place seen
        on every path; None for a knob without one such place or one value word."""
        try:
            a = _read(text)
        except FormatError:
            return None
        state = a.knobs.get(resolve_knob(a, knob))
        if state is None or len(state.places) != 1 or state.conditional:
            return None
        span = value_span(text, state.places[0])
        return text[span[0] : span[1]] if span else None

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        """``set``, writing ``source`` verbatim where it is the shell text of a computed
        value (:meth:`source`) equal to ``value``: a revert puts
        ``--mem-fraction-static ${MEM_FRACTION_STATIC}`` back, byte for byte.  The
        place must be the knob's one place and hold one value word; the result is
        re-read: that place computes from exactly ``source`` and every other knob reads
        as before.  Else the value is rendered (a literal)."""
        if source is None:
            return self.set(text, knob, value)
        a = _read(text)
        knob = resolve_knob(a, knob)
        state = a.knobs.get(knob)
        if state is None or len(state.places) != 1 or state.conditional:
            return self.set(text, knob, value)
        site = state.places[0]
        out = with_source(text, site, source)
        if out is None:
            return self.set(text, knob, value)
        try:
            after = _read(out)
            reads = self.parse_exact(out).get(knob) == value and self.source(out, knob) == source
        except FormatError:
            reads = False
        if not reads or fingerprints_except(a, after, knob):
            if source == value and decode_value(source) is None:  # computed: no other way
                raise FormatError(
                    f"line {site.line}: cannot write {knob} back as {source!r}: re-reading "
                    "the file does not show it computed from that text; edit it by hand")
            return self.set(text, knob, value)  # the text no longer fits: rendered
        return out

    def select_places(
        self, text: str, knob: str, at: int | str | None, action: str = "set"
    ) -> tuple[Place, ...]:
        """The places ``set``/``unset`` with ``at`` would touch, without touching them.

        A launch line that does not have the knob yet gives a place of kind ``new``
        (key ``launch N``, value None).  Empty: the edit adds the knob as a new top-level
        line (or there is nothing to unset).  Raises as ``set``/``unset`` would.
        """
        a = _read(text)
        knob = resolve_knob(a, knob)
        if is_flag_name(knob) and string_uses(a, knob):
            if at is not None:  # the edit says why: --at selects places on launch lines
                string_edit(a, knob, None, at)
            return ()  # in a string of flags: edited whole, where it is
        sel = select(a, knob, at, action)
        state = a.knobs.get(knob)
        chosen = {id(site) for site in sel.sites}
        found = [p for p, site in zip(to_places(a, state), state.places) if id(site) in chosen] if state else []
        for launch in sel.new_on:
            found.append(Place(
                knob=knob, key=f"launch {launch.ordinal}", line=line_of(text, launch.simple.start),
                kind="new", scope="launch command", value=None, computed=False,
                launch=launch.ordinal, raw="",
            ))
        return tuple(found)

    # -- writing --------------------------------------------------------------------
    def set(self, text: str, knob: str, value: str, at: int | str | None = None,
            source: str | None = None) -> str:
        """Set ``knob`` to ``value`` at the selected places (see the module docstring).

        ``source``: the shell text of a computed value to write back (:meth:`set_exact`);
        a knob that is absent is added with the value, then given that text.

        Raises KnobError on a bad name/value, AmbiguousKnob when a selection is needed,
        FormatError when the place is computed by the shell or the edit does not verify.
        """
        if source is not None and at is None:
            if self.source(text, knob) is not None:
                return self.set_exact(text, knob, value, source)
            if source == value and decode_value(source) is None:  # a computed value, absent
                return self.set_exact(self.set(text, knob, "0", at), knob, value, source)
        _check(knob, value)
        a = _read(text)
        knob = resolve_knob(a, knob)
        if is_flag_name(knob):
            refuse_two_spellings(a, knob)
        inside = self._in_string(a, knob, value, at)
        if inside is not None:
            return inside
        sel = select(a, knob, at, "set")
        if sel.sites:
            return apply_edits(a, knob, [PlaceEdit(sel.key(s), value) for s in sel.sites])
        return self._add(a, knob, value, sel)

    def unset(self, text: str, knob: str, at: int | str | None = None) -> str:
        """Remove ``knob`` from the selected places (same text if it is absent)."""
        _check(knob)
        a = _read(text)
        knob = resolve_knob(a, knob)
        if is_flag_name(knob):
            refuse_two_spellings(a, knob)
        inside = self._in_string(a, knob, None, at)
        if inside is not None:
            return inside
        sel = select(a, knob, at, "unset")
        if not sel.sites:
            return text
        if at is None:
            return apply_edits(a, knob, [], remove_all=True)
        return apply_edits(a, knob, [PlaceEdit(sel.key(s), None) for s in sel.sites])

    def edit_many(
        self, text: str, edits: Mapping[str, str | None],
        sources: Mapping[str, str | None] | None = None,
    ) -> str:
        """Every removal and change in one pass, read and verified once, where that is
        sure to write what editing one knob at a time writes (:func:`~.select.edit_batch`);
        else the removals in one pass, then the changes in one pass, else one at a time
        (which says precisely why an edit is refused; :func:`~.common.text.each_in_turn`)."""
        for knob, value in edits.items():
            _check(knob, value)
        removals = [k for k, v in edits.items() if v is None]
        changes = {k: v for k, v in edits.items() if v is not None}
        for knob in [k for k in changes if (sources or {}).get(k) is not None]:
            text = self.set_exact(text, knob, changes.pop(knob), sources[knob])  # type: ignore[index]
        if len(edits) > 1:
            out = self._batch(text, removals, changes)
            if out is not None:
                return out
        if len(removals) > 1:
            out = self._batch(text, removals, {})
            if out is not None:
                text, removals = out, []
        text = each_in_turn(text, removals, self.unset)
        if len(changes) > 1:
            out = self._batch(text, [], changes)
            if out is not None:
                return out
        return each_in_turn(text, list(changes), lambda t, k: self.set(t, k, changes[k]))

    def add_many(self, text: str, values: Mapping[str, str]) -> str:
        """Absent knobs added in one pass and read once where they all go where ``set``
        puts a new top-level knob (:func:`~.additions.add_batch`); else one at a time."""
        for knob, value in values.items():
            _check(knob, value)
        a = _read(text)
        for knob in values:
            if not is_flag_name(knob):
                refuse_unreached(a, knob)
        out = add_batch(a, values) if len(values) > 1 else None
        if out is not None:
            return out
        for knob, value in values.items():
            text = self.set(text, knob, value)
        return text

    def _batch(self, text: str, removals: list[str], changes: dict[str, str]) -> str | None:
        """:func:`~.select.edit_batch` of these edits, or None where it cannot be shown to
        write what one knob at a time writes: a knob in a string of flags, two names of
        one flag, a refusal.  A removal of an absent knob is no edit."""
        a = _read(text)
        removals = [resolve_knob(a, k) for k in removals]
        changes = {resolve_knob(a, k): v for k, v in changes.items()}
        if len({*removals, *changes}) != len(removals) + len(changes):
            return None
        present = []
        for knob in removals:
            if is_flag_name(knob) and string_uses(a, knob):
                return None
            try:
                if not is_flag_name(knob):
                    refuse_holder(a, knob)
                    refuse_unreached(a, knob)
                if select(a, knob, None, "unset").sites:
                    present.append(knob)
            except FormatError:
                return None
        return edit_batch(a, present, changes)

    def removed(self, text: str, knob: str) -> str:
        """What ``unset`` without a selection writes, not re-read: the lines it takes
        out are all the layout needs to know (a failed check would refuse the edit
        itself later, when it is made)."""
        _check(knob)
        a = _read(text)
        knob = resolve_knob(a, knob)
        if string_uses(a, knob):
            return self.unset(text, knob)
        if not select(a, knob, None, "unset").sites:
            return text
        return remove_everywhere(a, knob)

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """Give each place (by key) its own value, or unset it; a place that is gone comes
        back at its ``anchor`` with its ``raw`` text.  What a revert of ``--all`` uses."""
        for e in edits:
            _check(knob, e.value)
        a = _read(text)
        knob = resolve_knob(a, knob)
        if any(e.key.startswith("string ") for e in edits):
            return self._string_places(text, knob, edits)
        state = a.knobs.get(knob)
        present = {state.key(s) for s in state.places} if state else set()
        # A place on a launch line that is gone and has no anchor was new when recorded:
        # it goes back the way it was added.
        new = [e for e in edits if e.key not in present and e.value is not None and not e.anchor
               and e.key.startswith("launch ")]
        rest = [e for e in edits if e not in new]
        out = apply_edits(a, knob, rest) if rest else text
        for e in new:
            n = int(e.key.split()[1])
            current = analyse(out)
            if not 1 <= n <= len(current.launches):
                raise FormatError(f"{knob}: the script has no launch command {n} any more")
            out = self.set(out, knob, e.value, at=line_of(out, current.launches[n - 1].simple.start))
        return out

    def _in_string(self, a: Analysis, knob: str, value: str | None, at) -> str | None:
        """The edit of ``knob`` inside the string of flags that holds it, verified (None:
        no string holds it); an env edit of a string's variable is refused."""
        if not is_flag_name(knob):
            refuse_holder(a, knob)
            refuse_unreached(a, knob)
            return None
        before = self.parse(a.text)
        out = string_edit(a, knob, value, at)
        if out is None or out == a.text:
            return out
        return verified(before, self.parse(out), knob, value, out)

    def _string_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """A flag of a string of flags by its place: edited where it is, put back at its
        anchor where it is gone (a revert), else added as a new flag."""
        for e in edits:
            a = _read(text)
            back = None
            if e.value is not None and not string_uses(a, knob) and e.anchor:
                back = put_back_in(text, [s for s, _ in script_strings(a)[0]], e.anchor)
                back = self._with_value(back, knob, e.value)
            if back is not None and self.parse(back) == {**self.parse(text), knob: e.value}:
                text = back
            else:
                text = self.set(text, knob, e.value) if e.value is not None else \
                    self.unset(text, knob)
        return text

    def _with_value(self, text: str | None, knob: str, value: str) -> str | None:
        """``text`` (a flag just put back in its string) with the flag holding ``value``."""
        try:
            return self.set(text, knob, value) if text is not None else None
        except FormatError:
            return None

    def _add(self, a: Analysis, knob: str, value: str, sel: Selection) -> str:
        text = a.text
        launches = sel.new_on
        if is_flag_name(knob):
            out = text
            for launch in sorted(launches, key=lambda l: -l.simple.start):
                current = analyse(out)
                out = add_flag(
                    current, current.launches[launch.ordinal - 1], knob, value,
                    flag_lookup(launch.engine),
                )
        elif launches:
            out = text
            for launch in sorted(launches, key=lambda l: -l.simple.start):
                current = analyse(out).launches[launch.ordinal - 1]
                if current.shape is not None and current.shape.docker:
                    out = add_docker_env(out, current, knob, value)
                else:
                    out = add_prefix(out, current, knob, value)
        else:
            pos, indent = insertion_point(a, knob)
            out = insert_line(text, pos, f"{indent}export {sel.name or knob}={quote_value(value)}")
        return verify_added(a, analyse(out), knob, value, launches)
