"""`ledger bisect --upgrade ID`: the release itself, or which default it moved?

An engine upgrade changes what the file says (the release) and, silently, the default of
every knob the file leaves unset whose default the new release moved.  When an upgrade
entry regresses, this asks the check which of those did it, with the ordinary bisect
machinery (:mod:`ledger.commands.bisect`, :mod:`ledger.core.bisect`):

* for each default the upgrade moved under the target's unset knobs (what the upgrade
  entry stored, read by :func:`upgrade_moves` alone), a **temporary knob entry** "the
  upgrade's default of KNOB": ``before`` = the old default (what a pin writes), ``after``
  = unset, applied — the file as it is.  Reverting it pins the old default;
* the bisect selects exactly those entries: step 1 (all applied) is the upgraded release
  as it runs; step 2 (all reverted) is the new release with every moved default pinned
  back.  Step 2 failing means **the release itself** (its code, not its defaults);
  otherwise the search names **the moved default** (or the set that fails only together);
* the temporary entries are added after the bisect's start is snapshotted, so putting
  the start back (at the end, on Ctrl-C, after a crash: :mod:`ledger.store.bisect_state`)
  removes them with the probes: the ledger ends exactly where it started, with the record
  committed, and the pin **offered** as the entry to record (the command is printed and
  kept in the record's ``suggest``).

Decisions: a moved default with no value to pin (computed at startup, or none) and a knob
that entries already layer on the target (a pin there would not be "the old default") are
left out, each with the reason in the record's ``upgrade.left_out``; an upgrade that moved
no pinnable default is refused before anything changes (the answer would be the release
itself, with nothing to ask).  The upgrade entry must be applied (a reverted upgrade runs
the old release: there is nothing to bisect).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from dataclasses import field
from typing import Sequence

from ledger.core import layers
from ledger.core import planner
from ledger.core.model import Entry
from ledger.core.recording import NewEntry
from ledger.core.recording import entry_of
from ledger.errors import Refused
from ledger.store.workspace import new_entry_id
from ledger.values import default_text


@dataclass(frozen=True)
class Pin:
    """One moved default as a temporary entry: applied = the new default, reverted = the
    old one pinned."""

    entry: Entry
    old: object
    new: object
    command: str  # the pin as the upgrade's plan wrote it


@dataclass
class UpgradePins:
    upgrade: Entry
    pins: list[Pin] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    @property
    def entries(self) -> list[Entry]:
        return [p.entry for p in self.pins]

    def to_dict(self) -> dict:
        return {"entry": self.upgrade.id, "target": self.upgrade.target,
                "from": self.upgrade.before, "to": self.upgrade.after,
                "moved": [{"temporary_entry": p.entry.id, "knob": p.entry.knob,
                           "old_default": p.entry.before, "new_default": _word(p.new)}
                          for p in self.pins],
                "left_out": list(self.left_out)}


def upgrade_moves(upgrade: Entry) -> list[dict]:
    """The rows of ``upgrade``'s stored plan (:mod:`ledger.core.upgrade`) for each default it
    moved under its target's unset names: ``name``, ``old_default``, ``new_default`` and
    ``command``, the pin as the plan wrote it ("" where the file cannot hold the name)."""
    return [r for r in (upgrade.plan or {}).get("rows", ()) if r.get("change") == "default"]


def _word(value: object) -> object:
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def plan_pins(entries: Sequence[Entry], upgrade: Entry, *, now: str, command: str
              ) -> UpgradePins:
    """The temporary entries of a bisect of ``upgrade`` (the module docstring's rules)."""
    from envknobs.catalog_release import COMPUTED_DEFAULT

    if upgrade.kind != "upgrade":
        raise Refused(f"--upgrade {upgrade.id}: entry {upgrade.id} is a {upgrade.kind} entry, "
                      "not an upgrade (`ledger list` shows each entry's kind)")
    if not upgrade.applied:
        raise Refused(f"--upgrade {upgrade.id}: the upgrade is reverted, so the target runs "
                      f"{upgrade.before}: restore it first (`ledger restore {upgrade.id}`)")
    out = UpgradePins(upgrade)
    layered = {key for e in entries if e.kind == "knob" for key in layers.entry_keys(e)}
    taken = {e.id for e in entries}
    seq = planner.next_seq(entries)
    for row in upgrade_moves(upgrade):
        knob, old, new = row["name"], row.get("old_default"), row.get("new_default")
        if old is None or old == COMPUTED_DEFAULT or not isinstance(
                old, (bool, int, float, str, list)):
            out.left_out.append(f"{knob}: no old default to pin ({old!r})")
            continue
        value = _pinned_value(row)
        if value is None:
            out.left_out.append(f"{knob}: the file writes it otherwise, or cannot hold it "
                                f"({row.get('command') or 'no command'})")
            continue
        if (upgrade.target, knob) in layered:
            out.left_out.append(f"{knob}: entries already set it on {upgrade.target}")
            continue
        eid = new_entry_id(taken)
        taken.add(eid)
        now_word = "none" if new is None else default_text(new)
        title = f"{knob} at {upgrade.after}'s default ({now_word}; {value} in {upgrade.before})"
        new_entry = NewEntry(eid, seq, f"bisect-upgrade-{eid}", now, command)
        temp = entry_of(new_entry, kind="knob", cls="perf", title=title, adopt=True,
                        why=f"temporary: bisect --upgrade {upgrade.id}", target=upgrade.target,
                        knob=knob, before=value, after=None)
        out.pins.append(Pin(temp, old, new, row["command"]))
        seq += 1
    if not out.pins:
        why = "; ".join(out.left_out) or "it moved no default of a knob the target leaves unset"
        raise Refused(f"--upgrade {upgrade.id}: nothing to bisect ({why}): if it regressed, "
                      "the release itself did")
    return out


def upgrade_answer(conclusion: dict, pins: UpgradePins, bisect_id: str) -> dict:
    """``conclusion`` in the upgrade's words: the release itself, or the moved default(s),
    with the pin to record offered as the next command."""
    u = pins.upgrade
    by_id = {p.entry.id: p for p in pins.pins}
    kind = conclusion["kind"]
    n = len(pins.pins)
    if kind == "cannot-reproduce":
        text = (f"cannot reproduce: the check passes on {u.after} as the target runs it "
                "(step 1)")
        return {**conclusion, "text": text, "suggest": [], "answer": "cannot-reproduce"}
    if kind == "not-in-entries":
        text = (f"the release itself: on {u.after} the check fails with all {n} moved "
                f"default{'s' if n != 1 else ''} pinned back to {u.before}'s (step 2), as "
                "with none pinned (step 1)")
        why = f"bisect {bisect_id}: fails on {u.after} with every moved default pinned back"
        return {**conclusion, "text": text, "answer": "release",
                "suggest": [f"ledger suspect {u.id} --why {shlex.quote(why)}"]}
    moved = [by_id[i] for i in conclusion["entries"]]
    names = ", ".join(f"{p.entry.knob} ({p.entry.before} -> {default_text(p.new)})"
                      for p in moved)
    first = ("the moved default: " if len(moved) == 1 else
             "moved defaults that fail only together: ")
    lines = [f"{first}{names} in the upgrade {u.before} -> {u.after}",
             *conclusion["text"].splitlines()[1:]]
    suggest = [_pin_command(u, p, bisect_id) for p in moved]
    return {**conclusion, "text": "\n".join(lines), "suggest": suggest, "answer": "default",
            "knobs": [p.entry.knob for p in moved]}


def _pinned_value(row: dict) -> str | None:
    """The value the plan's pin writes when it sets the row's name itself (``record knob T
    NAME=V``), else None: the temporary entry then pins exactly what that command would."""
    words = shlex.split(row.get("command") or "")
    if len(words) > 4 and words[1] == "record" and words[4].startswith(row["name"] + "="):
        return words[4][len(row["name"]) + 1:]
    return None


def _pin_command(u: Entry, p: Pin, bisect_id: str) -> str:
    why = f"bisect {bisect_id}: the upgrade {u.id} to {u.after} regressed through this default"
    return f"{p.command} --why {shlex.quote(why)}"


__all__ = ["Pin", "UpgradePins", "plan_pins", "upgrade_answer", "upgrade_moves"]
