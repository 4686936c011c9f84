"""Where a removed launch flag goes back in a YAML file, byte for byte.

A flag removed from an argv (``record flag --unset``, or a revert of the entry that added
it) must come back where it was, not at the end of the list: in a flow list
(``["--disable-log-requests", "--max-num-seqs", "32"]``) or a string command the line-based
layout of :mod:`ledger.core.layout` cannot see it (the line stays, its words change).  The
*cut* of a removal is the one span of text it took out; its anchor is that text with just
enough context on both sides to be found once in the file without it.  Putting it back
inserts the text between that context again, and is kept only where the file then reads
exactly as intended (see :class:`FlagPlaces`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary

_CONTEXT = (8, 16, 32, 64, 128, 512, 4096)


def cut_anchor(before: str, after: str) -> dict[str, str] | None:
    """The anchor of the one span ``before`` lost to become ``after`` (None: not one cut,
    or no context around it is unique)."""
    if len(after) >= len(before):
        return None
    p = 0
    limit = len(after)
    while p < limit and before[p] == after[p]:
        p += 1
    removed = before[p : p + len(before) - len(after)]
    if before[:p] + removed + after[p:] != before:
        return None
    for n in _CONTEXT:
        b, a = after[max(0, p - n) : p], after[p : p + n]
        if after.count(b + a) == 1:
            return {"before": b, "removed": removed, "after": a}
    return None


def put_back(text: str, anchor: dict) -> str | None:
    """``text`` with the anchor's removed span inserted again (None: its context is not
    found exactly once)."""
    b, a, removed = anchor.get("before"), anchor.get("after"), anchor.get("removed")
    if not all(isinstance(x, str) for x in (b, a, removed)) or not removed:
        return None
    if text.count(b + a) != 1:
        return None
    at = text.index(b + a) + len(b)
    return text[:at] + removed + text[at:]


class FlagPlaces:
    """``knob``/``edit_places`` for YAML formats whose flags are words of one argv: a
    flag's one place carries its cut, and a flag that is gone goes back there."""

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        if not is_flag_name(knob):
            return None
        summary = self.summary(text)  # type: ignore[attr-defined]
        found = summary.get(knob) if summary is not None else None
        if found is None or len(found.places) != 1:
            return found
        try:
            anchor = cut_anchor(text, self.unset(text, knob))  # type: ignore[attr-defined]
        except (FormatError, ValueError):
            anchor = None
        place = replace(found.places[0], kind="flag", anchor=anchor)
        return replace(found, places=(place,))

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """One place per flag: set it, unset it, or put it back at its anchor."""
        if len(edits) != 1 or not is_flag_name(knob):
            raise FormatError(f"{self.name} targets have one place per knob")  # type: ignore[attr-defined]
        e = edits[0]
        before = self.parse(text)  # type: ignore[attr-defined]
        if e.value is None:
            return self.unset(text, knob)  # type: ignore[attr-defined]
        if knob in before or not e.anchor:
            return self.set(text, knob, e.value)  # type: ignore[attr-defined]
        out = put_back(text, e.anchor)
        if out is None:
            raise FormatError(f"{knob}: the text around its old place changed")
        after = self.parse(out)  # type: ignore[attr-defined]
        if knob not in after and self.source(out, knob) == e.value:  # type: ignore[attr-defined]
            if after == before:  # a computed value back as the text it was computed from
                return out
        if after.get(knob) is not None and after.get(knob) != e.value:
            if "$" in e.value:  # the text a value was computed from (issue 50)
                out = self.set_exact(out, knob, e.value, e.value)  # type: ignore[attr-defined]
                if self.parse(out) == before and self.source(out, knob) == e.value:  # type: ignore[attr-defined]
                    return out
            out = self.set(out, knob, e.value)  # type: ignore[attr-defined]
            after = self.parse(out)  # type: ignore[attr-defined]
        if after != {**before, knob: e.value}:
            raise FormatError(f"{knob}: putting it back at its old place reads differently")
        return out


def line_summary(
    text: str, rows: Sequence[tuple[str, int, str | None]], scope: str,
    flag_scope: str | None = None, notes: Sequence[str] = (),
) -> Summary:
    """A summary of knobs that have one place each: ``rows`` of (knob, line, value; None
    where the value is computed), ``scope`` naming where they are (``env of container
    vllm``), ``flag_scope`` where the flags are (the same by default)."""
    lines = text.splitlines()
    knobs = []
    for row in rows:
        knob, line, value = row[:3]
        expr = row[3] if len(row) > 3 else None  # a computed value's text, where known
        flag = is_flag_name(knob)
        where = (flag_scope or scope) if flag else scope
        place = Place(knob=knob, key="at 1", line=line, kind="yaml-flag" if flag else "env",
                      scope=where, value=value, computed=value is None, launch=None,
                      raw=lines[line - 1] if 0 < line <= len(lines) else "", expr=expr)
        knobs.append(KnobSummary(knob, (place,), False, False, is_flag=flag))
    return Summary(tuple(knobs), (), tuple(notes))


__all__ = ["FlagPlaces", "cut_anchor", "line_summary", "put_back"]
