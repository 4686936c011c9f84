"""`ledger restore`: put reverted entries back, holding back suspects and regressions.

Plans with :func:`ledger.core.planner.plan_restore` (pure) and applies through the same
path as a revert (:func:`ledger.commands.revert.apply_entries`); each entry comes back with
its evidence headline, judged as of after the restore."""

from __future__ import annotations

from typing import Sequence

from ledger.commands.live import restartable
from ledger.commands.revert import apply_entries
from ledger.commands.revert import class_selector
from ledger.commands.revert import resolve_all
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.store.apply import Applied


@restartable
def restore(
    s: Session,
    *,
    refs: Sequence[str] = (),
    perf_only: bool = False,
    cls: str | None = None,
    include_suspects: bool = False,
    force: bool = False,
    require_evidence: bool = False,
    why: str = "",
    dry_run: bool = False,
) -> Applied:
    """Re-apply reverted entries, holding back suspects and regressions
    (docs/ARCHITECTURE.md §2)."""
    cls = class_selector(refs, perf_only, cls)
    with writing(s, dry_run):
        entries = s.ws.entries()
        chosen = resolve_all(s, refs) if refs else planner.select(entries, cls=cls, state="reverted")
        from ledger.evidence.view import evidence_of

        # The operator sees what they claw back (docs/ARCHITECTURE.md §2): each entry's
        # headline comes with the result, from the same evidence the verdicts gate on.
        evidence = evidence_of(s.ws, chosen)
        plan = planner.plan_restore(
            entries, chosen, why=why, at=s.now, command=s.command, explicit=bool(refs),
            include_suspects=include_suspects, force=force, require_evidence=require_evidence,
            verdicts={i: ev.verdict for i, ev in evidence.items()},
        )
        applied = apply_entries(s, plan, why, force, dry_run)
        if not dry_run and applied.commit:
            # Shown as of after the restore: a headline judged against the engine and
            # knobs before it (the perf patch still reverted) would read [stale] for
            # evidence the restore just made current again.
            evidence = evidence_of(s.ws, chosen)
        applied.evidence = {i: ev.text for i, ev in evidence.items()}
        return applied
