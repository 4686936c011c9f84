"""Several absent env knobs added in one pass, verified once.

``set`` of a knob the script does not have writes ``export K=V`` at
:func:`~.summary.insertion_point`: after the last top-level ``export`` before the launch
commands, else before the first top-level command that is not an assignment.  Adding
knobs one at a time therefore writes them as consecutive lines at the place the first
one goes, each after the one before it (the line just added is then the last
``export``), with the indentation of that place.  :func:`add_batch` writes those same
lines in one splice and reads the result once, instead of reading the script again
after every knob (a restore puts back thousands of knobs over a hundred scripts).

It only takes the case where that reasoning is sure: env knobs (no flags), none set
anywhere in the script, none the variable of a string of flags, none needing a place on
a launch line (a docker ``-e``, a prefix), and no top-level ``unset`` of one of them (a
new line goes after such an ``unset``).  Otherwise, or where the one reading does not
show every added knob reaching every launch with its value and every other knob as
before, it returns None and the caller adds them one at a time, which says precisely
why an edit is refused.
"""

from __future__ import annotations

from typing import Mapping

from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.bash.analysis import analyse
from envknobs.formats.bash.select import select
from envknobs.formats.bash.strings import refuse_holder
from envknobs.formats.bash.summary import fingerprint
from envknobs.formats.bash.summary import fingerprints
from envknobs.formats.bash.summary import insertion_point
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.common.text import insert_line
from envknobs.formats.common.text import newline_of


def _plain_additions(a: Analysis, values: Mapping[str, str]) -> bool:
    """Every knob of ``values`` is an env knob the script lacks, added at top level."""
    names = set(values)
    for knob in values:
        if is_flag_name(knob) or knob in a.knobs:
            return False
        refuse_holder(a, knob)
        sel = select(a, knob, None, "set")
        if sel.sites or sel.new_on:
            return False
    return not any(a.cmds[id(s)].kind == "unset" and any(d.name in names for d in a.cmds[id(s)].defs)
                   for s in a.tree.simples)


def add_batch(a: Analysis, values: Mapping[str, str]) -> str | None:
    """``a.text`` with each knob of ``values`` added as ``set`` adds it, in order, read
    once; None where that cannot be shown (see the module docstring)."""
    try:
        if not values or not _plain_additions(a, values):
            return None
        pos, indent = insertion_point(a, next(iter(values)))
    except FormatError:
        return None
    out, eol = a.text, newline_of(a.text)
    for knob, value in values.items():
        line = f"{indent}export {knob}={quote_value(value)}"
        if pos >= len(out) and out and not out.endswith("\n"):
            out, pos = insert_line(out, pos, line), len(out) + len(eol) + len(line)
        else:
            out, pos = insert_line(out, pos, line), pos + len(line) + len(eol)
    return _verified(a, analyse(out), values)


def _verified(before: Analysis, after: Analysis, values: Mapping[str, str]) -> str | None:
    """``after.text`` where each added knob reads as asked on every visit of every launch
    and every other knob as it did: what :func:`~.select.verify_added` checks of each
    knob added alone."""
    old, new = fingerprints(before), fingerprints(after)
    if any(old.get(k) != new.get(k) for k in set(old) | set(new) if k not in values):
        return None
    for knob, value in values.items():
        st = after.knobs.get(knob)
        if st is None:
            return None
        for _, seen in fingerprint(st):
            found = [e for e in seen if e is not None]
            if len(seen) != 1 or len(found) != 1 or found[0][1] != value or found[0][2] is not False:
                return None
    return after.text


__all__ = ["add_batch"]
