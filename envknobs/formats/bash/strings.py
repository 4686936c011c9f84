"""A serve script's strings of flags: ``OPTS="--port 30000 --tp 2"`` expanded as ``$OPTS``.

An unquoted ``$OPTS`` / ``${OPTS}`` among a launch's arguments is split by bash into
words (:mod:`.argstring`).  It is read as a string of flags where the launch sees one
assignment of ``OPTS`` on every path (one place, a literal value, not in a branch) and
that value starts with a flag; a quoted ``"$OPTS"`` is one argument and stays opaque, as
does a variable with several or computed values.  The variable is then no env knob of
the script: its flags are (``target show`` lists them at the string's line), and an edit
of the variable itself is refused, naming them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.common.launch import flag_lookup
from envknobs.formats.common.argstring import ArgString
from envknobs.formats.common.text import holds_flags
from envknobs.formats.common.argstring import last_uses
from envknobs.formats.common.argstring import place_of
from envknobs.formats.common.argstring import read_string
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import line_of

_EXPANSION = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})\Z")


def script_strings(a: Analysis) -> tuple[list[tuple[ArgString, str]], list[str]]:
    """Each string of flags with the engine of the launch that expands it; notes on the
    strings of flags that are not read."""
    cached = getattr(a, "_strings", None)
    if cached is not None:
        return cached
    found: dict[str, tuple[ArgString, str]] = {}
    notes: list[str] = []
    for launch in a.launches:
        for w in launch.shape.args if launch.shape is not None else ():
            m = _EXPANSION.match(w.text)
            state = a.knobs.get((m.group(1) or m.group(2))) if m else None
            if state is None or len(state.places) != 1 or state.conditional:
                continue
            site = state.places[0]
            seen = {s for n, s in state.per_visit if n == launch.ordinal}
            if site.kind not in ("assign", "export", "declare") or site.value is None \
                    or seen != {frozenset({site})} or not holds_flags(site.value):
                continue
            start, end = _value_span(a.text, site.obj.word)  # type: ignore[attr-defined]
            where = (f"{state.knob} (line {site.line}), expanded by {w.text} on the launch "
                     f"at line {line_of(a.text, launch.simple.start)}")
            s, why = read_string(a.text, state.knob, start, end, site.value, where)
            if s is None:
                notes.append(f"line {site.line}: {why}")
            elif state.knob not in found:
                found[state.knob] = (s, launch.engine or "")
    a._strings = (list(found.values()), notes)  # type: ignore[attr-defined]
    return a._strings  # type: ignore[attr-defined]


def _value_span(text: str, word) -> tuple[int, int]:
    _, _, start = word.assignment()
    end = word.end
    if end - start >= 2 and text[start] in "'\"" and text[end - 1] == text[start]:
        return start + 1, end - 1
    return start, end


def string_uses(a: Analysis, knob: str) -> list[tuple[ArgString, FlagUse]]:
    """The last use of ``knob`` in each string that has it."""
    out = []
    for s, engine in script_strings(a)[0]:
        use = last_uses(s, flag_lookup(engine or None)).get(knob)
        if use is not None:
            out.append((s, use))
    return out


def with_strings(a: Analysis, summary: Summary) -> Summary:
    """``summary`` with the strings' flags as knobs and their variables left out."""
    strings, notes = script_strings(a)
    if not strings and not notes:
        return summary
    names = {s.name for s, _ in strings}
    by_knob = {k.knob: k for k in summary.knobs if k.knob not in names}
    for s, engine in strings:
        for knob, use in last_uses(s, flag_lookup(engine or None)).items():
            place = place_of(a.text, s, use, use.value)
            old = by_knob.get(knob)
            places = (*old.places, place) if old else (place,)
            by_knob[knob] = KnobSummary(knob, places, False, len(places) > 1, is_flag=True)
    opaque = {f"${n}" for n in names} | {f"${{{n}}}" for n in names}
    launches = tuple(replace(i, opaque=tuple(o for o in i.opaque if o not in opaque))
                     for i in summary.launches)
    kept = [n for n in summary.notes if "which the ledger cannot see into" not in n]
    kept += [f"line {i.line}: the launch also takes {', '.join(i.opaque)}, which the ledger "
             "cannot see into" for i in launches if i.opaque]
    return Summary(tuple(by_knob.values()), launches, (*kept, *notes))


def string_edit(a: Analysis, knob: str, value: str | None, at) -> str | None:
    """``a.text`` with ``knob`` set (unset: None) in the one string that holds it; None
    where no string does.  FormatError with ``--at`` (it selects places on launch lines),
    StringFlagConflict where the flag is also on a launch line or in another string."""
    from envknobs.formats.common.argstring import owner
    from envknobs.formats.common.argstring import remove_in
    from envknobs.formats.common.argstring import set_in
    from envknobs.formats.common import FormatError

    held = string_uses(a, knob)
    if not held:
        return None
    if at is not None:
        raise FormatError(f"line {line_of(a.text, held[0][1].word.start)}: {knob} is in "
                          f"{held[0][0].name}, a string of flags: --at/--all select places "
                          "on launch lines; record it without them")
    state = a.knobs.get(knob)
    elsewhere = [(p.line, f"on the launch: {a.text[p.start:p.end]}")
                 for p in (state.places if state else [])]
    s, use = owner(knob, held, elsewhere, a.text)  # type: ignore[misc]
    if value is None:
        return remove_in(a.text, s, use)
    engine = next(e for x, e in script_strings(a)[0] if x is s)
    return set_in(a.text, s, use, knob, value, flag_lookup(engine or None)(knob))


def refuse_holder(a: Analysis, knob: str) -> None:
    """FormatError where ``knob`` is a string of flags: its flags are the knobs."""
    from envknobs.formats.common import FormatError

    for s, _ in script_strings(a)[0]:
        if s.name == knob:
            raise FormatError(f"{s.where}: {knob} holds the launch's flags, which are knobs of "
                              "their own: record them as flags (ledger record flag TARGET "
                              "--FLAG=V)")
