"""`ledger adopt`'s proposer: the knob changes between successive versions of a file.

Pure: it is handed the versions (oldest first, the live file last), each with the knob
values the target's format read from it, and returns one proposal per change of one knob
or flag.  The commands layer (ledger.commands.adopt) finds the versions — backup copies,
or the commits of a deploy repo — and writes the proposals as a plan the operator edits.

A change that takes a knob back to the value in effect before an earlier proposal (a
``sed`` that removed a tuned knob, a commit that reverted one) is not proposed as a new
change: that would be the inversion trap of issue 27, where ``revert --perf-only`` adds
the knob back.  The earlier proposal (and every applied one stacked on it) is proposed
*reverted* instead, dated by the change that took it back, so ``ledger diff`` shows it off
the table and ``restore --perf-only`` claws it back.

A knob that has no single value in some version (conditional on a branch, repeated on
several launch lines) is not proposed: the proposer names it and the version instead of
guessing which place changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Mapping
from typing import Sequence


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


@dataclass
class Proposals:
    items: list[Proposal] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)  # "KNOB in ORIGIN: why not proposed"


def propose(versions: Sequence[Version]) -> Proposals:
    """Every knob change between successive ``versions``, in the order they were made."""
    out = Proposals()
    knobs = sorted({k for v in versions for k in v.values} | {k for v in versions for k in v.unclear})
    for knob in knobs:
        unclear = [v.origin for v in versions if knob in v.unclear]
        if unclear:
            if len({v.unclear.get(knob, v.values.get(knob)) for v in versions}) > 1:
                out.unclear.append(f"{knob}: no single static value in {', '.join(unclear)} "
                                   "(conditional, repeated or computed): not proposed")
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
        if undone is not None:  # back to an earlier value: those changes taken back
            for p in applied[undone:]:
                p.reverted = {"when": v.when, "origin": v.origin, "author": v.author,
                              "subject": v.subject, "from": versions[i - 1].origin,
                              "dated_by": v.dated_by}
            continue
        chain.append(Proposal(knob, prev, cur, v.when, v.origin, i, v.author, v.subject,
                              held_in=i))
    return chain


__all__ = ["Proposal", "Proposals", "Version", "propose"]
