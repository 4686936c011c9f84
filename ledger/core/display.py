"""How an entry is named to people: its state, its change, why it is off the table.

One definition of each, shared by the CLI (``ledger list/show/status/diff``) and the
rendered docs, so the two can never tell an operator different things.  Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.values import UNSET  # noqa: F401  (re-exported: the CLI and docs say "unset")
from ledger.values import value_text

if TYPE_CHECKING:  # annotations only
    from ledger.core.action import Action
    from ledger.core.model import Entry


def status_word(e: Entry) -> str:
    """One word for colours and badges: applied, reverted, suspected or cleared."""
    if e.suspicion == "suspected":
        return "suspected"
    if e.suspicion == "cleared" and not e.applied:
        return "cleared"
    return e.state


def display_state(e: Entry) -> str:
    """The state as an operator calls it: applied, reverted, suspected, cleared, or
    ``applied (suspected)`` for a suspect restored with ``--include-suspects``."""
    word = status_word(e)
    return "applied (suspected)" if word == "suspected" and e.applied else word


def change_text(e: Entry, default: object = None) -> str:
    """``KNOB: before -> after`` for a knob entry (``KNOB at lines 25, 29: a | b -> c``
    when recorded at selected places), ``patch FILES`` for a patch entry.  ``default``
    (the engine's default for the knob) shows as ``unset (default 256)``."""
    if e.kind == "upgrade":
        moved = [r for r in (e.plan or {}).get("rows", ()) if r.get("change") == "default"]
        tail = f" ({len(moved)} default{'s' if len(moved) != 1 else ''} moved)" if moved else ""
        return f"upgrade {e.before} -> {e.after}{tail}"
    if e.kind == "knob" and e.places:
        lines = ", ".join(str(n) for n in e.place_lines)
        olds = " | ".join(dict.fromkeys(value_text(p.get("before"), default=default)
                                        for p in e.places.values()))
        where = "line" if len(e.places) == 1 else "lines"
        return f"{e.knob} at {where} {lines}: {olds} -> {value_text(e.after, default=default)}"
    if e.kind == "knob" and e.also:  # one change across several targets
        olds = " | ".join(dict.fromkeys(value_text(b, default=default) for b in
                                        [e.before, *(o.get("before") for o in e.also.values())]))
        return (f"{e.knob} in {', '.join(e.targets)}: {olds} -> "
                f"{value_text(e.after, default=default)}")
    if e.kind == "knob":
        return (f"{e.knob}: {value_text(e.before, default=default)} -> "
                f"{value_text(e.after, default=default)}")
    return f"patch {', '.join(e.files)}"


def revert_action(e: Entry) -> Action | None:
    """The action that took the entry off the table last (a revert, a suspect, or the
    rollback of a command whose health check failed)."""
    for a in reversed(e.history):
        if a.action in ("revert", "suspect", "rollback"):
            return a
    return None


def happened_at(e: Entry, action: str) -> str:
    """When the entry's last ``action`` (``suspect``, ``clear``, ``restore``…) happened: its
    ``--when`` date where given, else its record time; "" if it never did."""
    for a in reversed(e.history):
        if a.action == action:
            return a.happened
    return ""


def kept_by_class(entries) -> str:
    """What stays applied, by class and kind, as the on-call reader says it:
    ``2 bugfix patches, 1 bugfix knob`` ("" when nothing is applied)."""
    counts: dict[tuple[str, str], int] = {}
    for e in entries:
        if e.applied:
            counts[(e.cls, e.kind)] = counts.get((e.cls, e.kind), 0) + 1
    order = {"bugfix": 0, "perf": 1}
    return ", ".join(f"{n} {cls} {kind}{'es' if kind == 'patch' and n != 1 else ''}"
                     f"{'s' if kind != 'patch' and n != 1 else ''}"
                     for (cls, kind), n in sorted(counts.items(), key=lambda t: (
                         order.get(t[0][0], 2), t[0][1] != "patch", t[0])))


def health_failure(e: Entry) -> str | None:
    """What the health check saw, when the entry is off the table because the restart's
    health gate rolled it back (its last off-table action is a ``rollback``); else None.

    Such a value crashed or wedged the service: it is shown as *failed its health check*,
    never offered as a claw-back.  The detail is the failing restart's own report (the
    ``restart`` action just before the rollback), or the rollback's reason without one.
    """
    a = revert_action(e)
    if a is None or a.action != "rollback":
        return None
    at = e.history.index(a)
    for before in reversed(e.history[:at]):
        if before.action == "restart" and "FAILED" in before.why:
            return before.why[before.why.find("health check FAILED"):] \
                if "health check FAILED" in before.why else before.why
    return a.why


def revert_reason(e: Entry) -> str:
    """Why the entry is off the table: the last revert or suspect action's reason, as
    `ledger amend` may have corrected it."""
    a = revert_action(e)
    if a is not None and a.action == "suspect" and e.suspect_why:
        return e.suspect_why
    if a is not None and a.action == "revert" and e.revert_why and _amended_since(e, a):
        return e.revert_why
    return a.why if a else ""


# The note an amend of a revert's reason leaves in the history (ledger.core.planner).
REVERT_AMENDED = ("revert reason amended", "revert reason added")


def _amended_since(e: Entry, a) -> bool:
    """Whether an amend of the revert reason came after revert action ``a`` (a later
    revert has its own reason, not the one amended before it)."""
    after = e.history[e.history.index(a) + 1:]
    return any(x.action == "amend" and x.why.startswith(REVERT_AMENDED) for x in after)


__all__ = [
    "UNSET",
    "change_text",
    "display_state",
    "health_failure",
    "REVERT_AMENDED",
    "revert_action",
    "revert_reason",
    "status_word",
    "value_text",
]
