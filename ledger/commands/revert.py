"""`ledger revert`, `suspect`, `clear` and `amend`: take entries off the table (`restore`,
which puts them back, is :mod:`ledger.commands.restore`).

Each one plans with :mod:`ledger.core.planner` (pure) and applies the plan through
:func:`ledger.store.apply.apply_plan` (one transaction, one workspace commit).  All but
``clear`` take ``restart`` (see :func:`ledger.commands.live.restartable`)."""

from __future__ import annotations

from typing import Sequence

from ledger.commands.live import restartable
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.identifiers import check_class
from ledger.core.model import Entry
from ledger.errors import UsageError
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import commit_message


def resolve_all(s: Session, refs: Sequence[str]) -> list[Entry]:
    return [s.ws.resolve(r) for r in refs]


@restartable
def revert(
    s: Session,
    *,
    refs: Sequence[str] = (),
    perf_only: bool = False,
    cls: str | None = None,
    why: str = "",
    force: bool = False,
    dry_run: bool = False,
    when: str = "",
) -> Applied:
    """Revert entries by id, or every applied entry of a class (--perf-only = --class perf).
    ``when``: the revert's real time where it is not now (``--when``)."""
    cls = class_selector(refs, perf_only, cls)
    when = _when(s, when)
    with writing(s, dry_run):
        entries = s.ws.entries()
        chosen = resolve_all(s, refs) if refs else planner.select(entries, cls=cls, state="applied")
        plan = planner.plan_revert(entries, chosen, why=why, at=s.now, command=s.command,
                                   when=when)
        return apply_entries(s, plan, why, force, dry_run, when)


def _when(s: Session, when: str) -> str:
    from ledger.core.when import parse_when

    return parse_when(when, s.now) if when else ""


@restartable
def suspect(s: Session, ref: str, why: str, force: bool = False, dry_run: bool = False,
            when: str = "") -> Applied:
    """Revert an entry and mark it suspected, with the hypothesis written down."""
    if not why.strip():
        raise UsageError("suspect needs --why: write the hypothesis down")
    when = _when(s, when)
    with writing(s, dry_run):
        entries = s.ws.entries()
        plan = planner.plan_revert(entries, [s.ws.resolve(ref)], why=why, at=s.now,
                                   command=s.command, suspect=True, when=when)
        return apply_entries(s, plan, why, force, dry_run, when)


def clear(s: Session, ref: str, why: str, dry_run: bool = False, when: str = "") -> Applied:
    """Exonerate a suspect (does not re-apply it: `restore` does)."""
    if not why.strip():
        raise UsageError("clear needs --why: say what exonerated it")
    when = _when(s, when)
    with writing(s, dry_run):
        plan = planner.plan_clear(s.ws.resolve(ref), why=why, at=s.now, command=s.command,
                                  when=when)
        return apply_entries(s, plan, why, False, dry_run, when)


def amend(s: Session, ref: str, why: str, of: str | None = None, dry_run: bool = False,
          when: str = "") -> Applied:
    """Replace a reason or a date typed wrong (`ledger amend ID --why/--when`); the
    history keeps the old (ledger.core.planner.plan_amend)."""
    why = why or ""
    if not why.strip() and not when:
        raise UsageError("amend needs --why (the reason as it should read) or --when (the "
                         "date as it should read)")
    when = _when(s, when)
    with writing(s, dry_run):
        plan = planner.plan_amend(s.ws.resolve(ref), why=why.strip() and why, of=of,
                                  at=s.now, command=s.command, when=when)
        return apply_entries(s, plan, why or f"dated {when}", False, dry_run)


def class_selector(refs: Sequence[str], perf_only: bool, cls: str | None) -> str | None:
    chosen = [x for x in (bool(refs), perf_only, cls is not None) if x]
    if len(chosen) != 1:
        raise UsageError("give entry ids, or --perf-only, or --class CLASS (exactly one)")
    if perf_only:
        return "perf"
    return check_class(cls) if cls is not None else None


def apply_entries(s: Session, plan: planner.Plan, why: str, force: bool, dry_run: bool,
           when: str = "") -> Applied:
    """Carry out ``plan``; a revert that adds a knob back (its entry had removed it) says
    so in the result (ledger.core.inversion.knobs_added), dry run or not."""
    from ledger.core.inversion import knobs_added
    from ledger.store.patch_entries import engine_step_for

    message = commit_message(plan.op, why, [new for _, new in plan.changes])
    if when:
        message += f"\nWhen: {when}\n"
    applied = apply_plan(
        s.ws, plan, command=s.command, now=s.now, message=message, force=force,
        dry_run=dry_run, engine=lambda entries, p: engine_step_for(s.ws, entries, p),
    )
    if plan.op in ("revert", "suspect"):
        applied.notices += knobs_added(plan.changes, plan.knob_edits)
    return applied
