"""The inversion trap: a perf entry whose change *is* a revert.

An operator who reverted a tuning by hand (``sed`` took ``CTAS=512`` out of the script)
and records that as ``record knob ... --unset --adopt --before 512 --class perf`` gets the
exact wrong ledger: the entry is an *applied perf change* whose after is the old state.
``ledger diff`` then says nothing is off the table, ``restore --perf-only`` has nothing
to restore, and an incident's ``revert --perf-only`` would *add* the tuning back.

:func:`inversion` names such an entry before it is recorded, with the command that
records it right (``--already-reverted``, or ``ledger revert ID``); the operator passes
``--not-a-revert`` when the removal is itself the perf change.  :func:`knobs_added`
names what a revert would add, so the plan says so.  Pure: the caller gives the layer
and the engine's default.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence

from ledger.core.model import Entry
from ledger.values import value_text


@dataclass(frozen=True)
class Inversion:
    """Why a perf entry looks like a revert, and the command that records it right."""

    what: str
    instead: str

    def message(self, label: str) -> str:
        return (f"{label}: this perf entry {self.what}; recorded as a perf change it is not "
                "off the table (`ledger diff` would show nothing to claw back, and "
                "`revert --perf-only` would put the old value back)\n"
                f"  record it as what it is: {self.instead}\n"
                "  (if this change is itself the perf change, not a revert, pass "
                "--not-a-revert)")


def _assign(target: str, knob: str, value: str, cls: str, title: str) -> str:
    kind = "flag" if knob.startswith("-") else "knob"
    return " ".join(shlex.quote(w) for w in (
        "ledger", "record", kind, target, f"{knob}={value}", "--class", cls, "--title", title))


def inversion(
    *, target: str, knob: str, before: str | None, after: str | None, cls: str,
    adopt: bool, title: str, layer: Sequence[Entry] = (), default: object = None,
) -> Inversion | None:
    """Why recording ``knob`` from ``before`` to ``after`` as a perf entry would undo an
    earlier state, or None when it does not look like a revert.

    * it takes back an applied entry of the ledger (its after is that entry's before);
    * adopted (a hand edit), it removes the knob (``--unset``): the old value was the
      change;
    * adopted, it puts the knob back to the engine's default.

    The command named instead is ``ledger revert ID`` where the ledger has the entry
    whose value is live (``--force`` when adopted: the file holds the revert already),
    else the ``--already-reverted`` record of the old value.
    """
    if cls != "perf" or before == after:
        return None
    applied = [e for e in reversed(layer) if e.applied]
    undone = next((e for e in applied if e.before == after), None)
    if undone is not None:
        what = (f"takes back {undone.id} ({undone.title}: "
                f"{value_text(undone.before, quote=True)} -> {value_text(undone.after, quote=True)})")
    elif not adopt or before is None:
        # A removal written through the ledger may well be the change (a debug knob taken
        # out for speed): its revert puts the knob back and says so (knobs_added).
        return None
    elif after is None:
        what = f"removes {knob} (it was {value_text(before, quote=True)})"
    elif default is not None and after == str(default):
        what = f"sets {knob} back to its default ({after}, it was {before!r})"
    else:
        return None
    live = undone or next((e for e in applied if e.after == before), None)
    if live is not None:
        return Inversion(what, f"ledger revert {live.id}{' --force' if adopt else ''}")
    return Inversion(what, f"{_assign(target, knob, str(before), cls, title)} --already-reverted")


def knobs_added(changes: Sequence[tuple[Entry, Entry]],
                edits: dict[tuple[str, str], tuple[str | None, str | None]]) -> list[str]:
    """What a revert adds to a file: each knob that comes back because a reverted entry
    had removed it (``--not-a-revert``), said in the plan rather than done silently."""
    out = []
    for (target, knob), (old, new) in sorted(edits.items()):
        if old is not None or new is None:
            continue
        by = [old_e for old_e, _ in changes if old_e.target == target and old_e.after is None
              and old_e.knob is not None and knob.split("@")[0] == old_e.knob]
        who = f" ({', '.join(f'{e.id} {e.title}' for e in by)} had removed it)" if by else ""
        out.append(f"this revert ADDS {knob}={new} to {target}{who}")
    return out


__all__ = ["Inversion", "inversion", "knobs_added"]
