"""`ledger adopt`'s proposer: the knob changes between successive versions of a file.

Pure: it is handed the versions (oldest first, the live file last), each with the knob
values the target's format read from it, and returns one proposal per change of one knob
or flag.  The commands layer (ledger.commands.adopt) finds the versions — backup copies,
or the commits of a deploy repo — and writes the proposals as a plan the operator edits.

A change that takes a knob back to the value in effect before an earlier proposal is a
*revert* only where the version says it is one (``Version.is_revert``): for backup copies
every such return (a ``sed`` that removed a tuned knob: issue 27's inversion trap, where
``revert --perf-only`` would add it back); for commits only a ``git revert`` (its subject)
or a file that returns byte for byte to an earlier version (issue 51: a commit that
retires tuning knobs is a change, not a revert).  A revert marks the earlier proposal
(and every applied one stacked on it) *reverted*, dated by the change that took it back,
so ``ledger diff`` shows it off the table.  Any other return is a change of its own, and
names the proposal it may take back (``may_revert``): the operator says which it is.

Keys are knob names, or ``KNOB when CONDITION`` for a place inside an ``if``/``case`` branch
(or ``KNOB at PLACE`` for one of several launch lines): each such place is a knob of its
own here, so a change inside a branch, or a knob moving into one, is proposed like any
other.  A value may be a shell expression's text (``$((8192 * TP))``).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Mapping
from typing import Sequence

from ledger.core.identifiers import RELEASE_KNOB


@dataclass(frozen=True)
class Version:
    """One version of the file.  ``when``: when the change that made it (from the version
    before) was made; ``origin``: what it is, as the operator knows it (a backup's name,
    ``commit SHA``); ``unclear``: knobs without one value in it."""

    origin: str
    when: str
    values: Mapping[str, str]
    # knobs without one static value here -> their source text (a knob whose text is the
    # same in every version did not change: it is not named)
    unclear: Mapping[str, str] = field(default_factory=dict)
    # a commit's author and subject (deploy-repo history), empty for backups
    author: str = ""
    subject: str = ""
    # which timestamp ``when`` is, in words ("mtime of serve.sh (live), the newer …")
    dated_by: str = ""
    # a return to an earlier value here takes those changes back (see the module doc)
    is_revert: bool = True


@dataclass
class Proposal:
    """One proposed entry: ``knob`` from ``before`` to ``after``, made at ``when`` in
    the change to version ``made_in``; ``reverted``: the change that took it back."""

    knob: str
    before: str | None
    after: str | None
    when: str
    origin: str
    made_in: int
    author: str = ""
    subject: str = ""
    # the last version that held it (its lines are taken from there)
    held_in: int = 0
    reverted: dict[str, str] | None = None
    # a return to the value before this earlier proposal, in a version that is no revert
    may_revert: Proposal | None = None

    @property
    def name(self) -> str:
        """The knob's own name (``KNOB when COND`` -> ``KNOB``)."""
        return knob_of(self.knob)

    @property
    def condition(self) -> str | None:
        """``COND`` of ``KNOB when COND`` / ``PLACE`` of ``KNOB at PLACE``, else None."""
        return condition_of(self.knob)


WHEN = " when "
AT = " at "


def knob_of(key: str) -> str:
    return key if key == RELEASE_KNOB else key.split(" ", 1)[0]


def condition_of(key: str) -> str | None:
    return key.split(" ", 1)[1] if " " in key and key != RELEASE_KNOB else None


@dataclass
class Proposals:
    items: list[Proposal] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)  # "KNOB in ORIGIN: why not proposed"


def propose(versions: Sequence[Version]) -> Proposals:
    """Every knob change between successive ``versions``, in the order they were made."""
    out = Proposals()
    knobs = sorted({k for v in versions for k in v.values} | {k for v in versions for k in v.unclear})
    for knob in knobs:
        unclear = [f"{v.origin} ({v.unclear[knob]})" for v in versions if knob in v.unclear]
        if unclear:
            if len({v.unclear.get(knob, v.values.get(knob)) for v in versions}) > 1:
                out.unclear.append(f"{knob}: cannot be read in {', '.join(unclear)}: "
                                   "not proposed")
            continue
        out.items += _knob_changes(knob, versions)
    out.items.sort(key=lambda p: (p.when, p.made_in, p.knob))
    return out


def _knob_changes(knob: str, versions: Sequence[Version]) -> list[Proposal]:
    chain: list[Proposal] = []
    for i in range(1, len(versions)):
        prev, cur = versions[i - 1].values.get(knob), versions[i].values.get(knob)
        applied = [p for p in chain if p.reverted is None]
        if prev == cur:
            if applied and applied[-1].after == cur:
                applied[-1].held_in = i
            continue
        undone = next((n for n, p in enumerate(applied) if p.before == cur), None)
        v = versions[i]
        if undone is not None and v.is_revert:  # back to an earlier value: taken back
            for p in applied[undone:]:
                p.reverted = {"when": v.when, "origin": v.origin, "author": v.author,
                              "subject": v.subject, "from": versions[i - 1].origin,
                              "dated_by": v.dated_by}
            continue
        chain.append(Proposal(knob, prev, cur, v.when, v.origin, i, v.author, v.subject,
                              held_in=i,
                              may_revert=None if undone is None else applied[undone]))
    return chain


__all__ = ["AT", "WHEN", "Proposal", "Proposals", "Version", "condition_of", "knob_of",
           "propose"]
