"""One change across several targets as one entry: ``ledger record knob
decode,prefill,decode-k8s K=V`` (issue 27 item 6).

The same knob set to the same value in the decode script, the prefill script and the
k8s manifest is one change an operator made for one reason: one entry, one id, shown
once, reverted and restored together.  Each target keeps its own ``before`` (the prefill
script may have had the knob at another value, or not at all), anchor and exact texts
(``Entry.also``); the ledger's layering sees the entry in each target's layer
(:func:`ledger.core.planner.target_view`).  Every file is read and checked (drift,
ambiguity, the catalogs, the inversion trap) before anything is written, and all of them
are written in one transaction (ledger.store.apply): all or nothing across the files.

Decisions (the issue is silent): the targets are told apart by commas, the first is the
entry's ``target``; a target named twice is refused; ``--at/--all`` select places in one
script and do not go with several targets; a target where the knob already has the
value is refused, naming it (leave it out of the list).
"""

from __future__ import annotations

from ledger.commands.catalog import engine_of
from ledger.commands.knob_names import new_name_warnings
from ledger.commands.live import restartable
from ledger.commands.record import Recorded
from ledger.commands.record import before_in
from ledger.commands.record import _check_record_args
from ledger.commands.record import _record_message
from ledger.commands.record import _where
from ledger.commands.record import canonical_knob
from ledger.commands.record import new_entry
from ledger.commands.record import refuse_ambiguous
from ledger.commands.record_past import Past
from ledger.commands.session import writing
from ledger.core import planner
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.store.apply import apply_plan
from ledger.store.apply import drift_in
from ledger.store.targets import read_target


def split_targets(text: str) -> list[str]:
    """``decode,prefill`` as target names, each once, in the order given."""
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise UsageError(f"TARGET {text!r}: name the targets separated by commas")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"TARGET {text!r}: {', '.join(twice)} named twice")
    return names


@restartable
def record_knob_targets(
    s, *, targets: list[str], knob: str, value: str | None, cls: str, title: str,
    why: str = "", adopt: bool = False, before: str | None = None, before_given: bool = False,
    no_validate: bool = False, force: bool = False, dry_run: bool = False,
    past: Past = Past(),
) -> Recorded:
    """Record one change of ``knob`` in every one of ``targets`` as one entry."""
    warnings: list[str] = []
    for name in targets:
        for w in _check_record_args(s, name, knob, value, cls, adopt, before, before_given,
                                    no_validate, None):
            if w not in warnings:
                warnings.append(w)
    past = past.checked(s.now, adopt=adopt)
    with writing(s, dry_run):
        entries = s.ws.entries()
        files = {name: read_target(s.ws, s.ws.target(name)) for name in targets}
        drifts = drift_in(s.ws, entries, files)
        names = {canonical_knob(tf, knob) for tf in files.values()}
        if len(names) > 1:
            raise Refused(f"{knob} is spelled {', '.join(sorted(names))} in these targets: "
                          "record it in each")
        knob = names.pop()
        befores = {}
        for name, tf in files.items():
            refuse_ambiguous(tf, knob, value, adopt)
            warnings += new_name_warnings(tf, knob, value)
            befores[name] = before_in(tf, entries, knob, value, before, adopt=adopt,
                                      force=force, drifts=drifts, past=past, cls=cls,
                                      title=title, several=True,
                                      engine=engine_of(s.ws, tf.target, tf.text))
        where = {name: _where(tf, entries, knob, befores[name], value, adopt)
                 for name, tf in files.items()}
        first, *others = targets
        also = {name: {"before": befores[name],
                       **{k: v for k, v in where[name].items() if v is not None}}
                for name in others}
        entry = new_entry(s, kind="knob", cls=cls, title=title, why=why,
                          adopt=adopt or past.already_reverted, when=past.when,
                          target=first, knob=knob, before=befores[first], after=value,
                          also=also, **where[first])
        entry = past.taken_back(entry, at=s.now, command=s.command)
        message = _record_message(entry, value, past).replace(
            f" in {first}", f" in {','.join(targets)}", 1)
        applied = apply_plan(s.ws, planner.plan_record(entry, adopt=adopt), command=s.command,
                             now=s.now, message=message, force=force, dry_run=dry_run,
                             files=files, drifts=drifts)
        return Recorded(applied.changed[-1], applied, warnings)


__all__ = ["record_knob_targets", "split_targets"]
