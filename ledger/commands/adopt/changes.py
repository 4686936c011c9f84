"""Each change of an adopt plan as the operator reads it (ledger.commands.adopt builds
the plan): its class and why, whether a revert took it back or it may take one back,
whether the ledger can hold it as an entry (else history only), and the exact lines a
restore writes back.  The decisions are those of ledger.commands.adopt's docstring."""

from __future__ import annotations

import re
from typing import Any
from typing import Sequence

from ledger.commands.adopt.find import Copy
from ledger.core.adopt import Proposal
from ledger.core.identifiers import RELEASE_KNOB
from ledger.errors import LedgerError

_FIX_SUBJECT = re.compile(r"(?i)(^fix\b|\bfix(es|ed)?\b|\bbug-?fix|\bhot-?fix)")


def history_only(items: Sequence[Proposal], copies: Sequence[Copy],
                 live: Sequence[Copy]) -> dict[str, str]:
    """Key -> why its changes cannot be entries: a value the shell computes in some version
    (an entry's value is checked against the file), a branch place the live file does
    not have (an entry edits a place of the live file), or a whole knob that the live file
    now has only in branches (``status`` holds such a knob per place)."""
    from ledger.commands.adopt.find import computed_keys
    from ledger.commands.adopt.find import read_places

    computed: set[tuple[str, str]] = set()
    for c in copies:
        computed |= computed_keys(c)
    live_places = read_places(live[0]) if live else {}
    summary = getattr(live[0].tf, "summary", None) if live else None
    out: dict[str, str] = {}
    for p in items:
        if p.knob in out:
            continue
        now = summary.get(p.name) if summary is not None and p.condition is None else None
        if now is not None and now.needs_selection:
            out[p.knob] = ("the knob now lives in branches of the live file (held there "
                           "per place): its top-level history is history only")
            continue
        if any((p.knob, v) in computed for v in (p.before, p.after) if v is not None):
            out[p.knob] = "a value the shell computes: the ledger holds static values"
        elif p.condition is not None and p.knob not in live_places:
            out[p.knob] = "a place the live file no longer has"
    return out


def taken_back_here(p: Proposal) -> bool:
    """A backup pair that took back a perf knob no proposal made (see :func:`_taken_back`)."""
    from ledger.commands.catalog import catalog_class

    return p.reverted is None and catalog_class(p.name) == "perf" and _is_a_revert(p)


def class_of(ps: Sequence[Proposal], subject: str) -> tuple[str | None, str]:
    """A proposal's class and what says so: a fix subject; else the catalog's hints of its
    knobs where those that speak agree; else None, saying why."""
    from ledger.commands.catalog import catalog_class

    if subject and _FIX_SUBJECT.search(subject):
        return "bugfix", f"the commit subject says fix: {subject!r}"
    hints = {p.name: catalog_class(p.name) for p in ps}
    said = {c for c in hints.values() if c}
    if len(said) == 1:
        cls = said.pop()
        return cls, f"the catalog's class hint of {', '.join(k for k, c in hints.items() if c)}"
    if len(said) > 1:
        return None, ("the catalog's hints differ (" + ", ".join(
            f"{k}: {c}" for k, c in sorted(hints.items()) if c) + "): choose, or adopt "
            "again with --per-knob")
    return None, "nothing says (no catalog hint, no fix/revert subject): choose perf or bugfix"


def change_of(p: Proposal, versions, copies: Sequence[Copy], managed: dict[str, list[str]],
            by_commit: bool, unheld: dict[str, str], number: dict[int, int], tf
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One change as the plan shows it, and its machine data (lines, anchor, place).
    ``unheld``: the keys that are history only (:func:`history_only`); ``number``: each
    proposal's plan number, for ``revert_of``."""
    c: dict[str, Any] = {"knob": p.name, "before": p.before, "after": p.after}
    if p.condition is not None:
        c["where"] = p.condition
    c["when"], c["dated_by"] = p.when, versions[p.made_in].dated_by
    lines: dict[str, Any] = {}
    if p.knob in unheld:
        c["record"] = False
        _note(c, unheld[p.knob])
    else:
        lines = _lines_of(p, copies, tf)
    # the layer the entry would join: the knob, or its place in the live file
    layer = f"{p.name}@{lines['place']['key']}" if "place" in lines else p.knob
    if layer in managed:
        c["keep"] = False
        _note(c, f"the ledger already has {p.knob}: {', '.join(managed[layer])}")
    if not by_commit and taken_back_here(p):
        c = _taken_back(c, p, versions[0].when)
    elif p.reverted is not None:
        r = p.reverted
        back = f"{r['origin']} by {r['author']}: {r['subject']}" if by_commit else \
            f"{r['from']} -> {r['origin']}"
        why = f"{r['subject']} ({r['origin']})" if by_commit else f"reverted by hand ({back})"
        c["reverted"] = {"when": r["when"], "dated_by": r["dated_by"], "origin": back,
                         "why": why, "suspected": False}
    elif p.may_revert is not None:
        c["revert_of"] = None
        _note(c, f"back to the value before proposal {number[id(p.may_revert)]}, in a "
                 "commit that is no revert: a change of its own; write "
                 f"revert_of: {number[id(p.may_revert)]} if it takes that back")
    return c, lines


def _note(change: dict[str, Any], note: str) -> None:
    change["note"] = f"{change['note']}; {note}" if change.get("note") else note


def title_of(knob: str, after: str | None) -> str:
    if knob == RELEASE_KNOB and after is not None:
        return f"upgrade to {after}"
    return f"unset {knob}" if after is None else f"{knob}={after}"


def _is_a_revert(p: Proposal) -> bool:
    """A perf knob removed (or set back to its default) where no proposal made it: the
    tuning predates the first version, and this change took it back (the inversion trap:
    ledger.core.inversion)."""
    from ledger.core.inversion import inversion

    return inversion(target="", knob=p.name, before=p.before, after=p.after, cls="perf",
                     adopt=True, title="", default=_default(p.name)) is not None


def _default(knob: str):
    from ledger.commands.catalog import name_defaults

    return name_defaults(None, [knob]).get(knob)


def _taken_back(c: dict[str, Any], p: Proposal, first: str) -> dict[str, Any]:
    """A backup pair that removed a perf knob no proposal made: the tuning predates the
    first copy and this edit took it back (issue 27's hand ``sed``): proposed as that
    older value, made before the first version, reverted here — off the table, as
    ``--already-reverted`` records it."""
    return {**c, "before": p.after, "after": p.before, "when": first,
            "dated_by": "the first version's date (made before it)", "taken_back": True,
            "reverted": {"when": p.when, "dated_by": c["dated_by"],
                         "origin": f"{p.origin}", "why": f"reverted ({p.origin})",
                         "suspected": False},
            "note": "made before the first version and taken back here; if taking it out "
                    "was itself the perf change, swap before and after, drop `reverted:` "
                    "and write `not_a_revert: true`"}


def _lines_of(p: Proposal, copies: Sequence[Copy], tf) -> dict[str, Any]:
    """The knob's exact lines in the version that held it (an added knob: what a restore
    after a revert puts back, inline comment and all; a removed one: what its revert
    puts back) and where they sit; for a place in a branch, that place in the live file
    (the entry edits it there)."""
    from ledger.core.layout import inserted_block
    from ledger.store.targets import anchor_in
    from ledger.store.targets import edit_target

    if p.condition is not None:
        from ledger.commands.adopt.find import read_places

        place = read_places(copies[-1]).get(p.knob)
        return {} if place is None else {"place": {
            "key": place.key, "line": place.line, "raw": place.raw, "anchor": place.anchor}}
    if (p.before is None) == (p.after is None):
        return {}
    holder = copies[p.held_in] if p.before is None else copies[p.made_in - 1]
    try:
        without = edit_target(holder.tf, {p.knob: None}).decode("utf-8", "surrogateescape")
    except LedgerError:  # a copy the format cannot edit: the lines as the format writes them
        return {}
    lines = inserted_block(without, holder.text)
    anchor = anchor_in(holder.tf, holder.text, p.knob, None)
    out = {k: v for k, v in (("lines", lines), ("anchor", anchor)) if v is not None}
    if lines is not None:  # they are written back on a restore: an edit of them is refused
        out["lines_sha256"] = lines_digest(lines)
    return out


def lines_digest(lines: str) -> str:
    import hashlib

    return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()


__all__ = ["change_of", "class_of", "history_only", "lines_digest", "taken_back_here",
           "title_of"]
