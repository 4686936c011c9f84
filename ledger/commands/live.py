"""``--restart`` on mutating commands, what they tell without it, and ``status --live``.

:func:`restartable` gives a library mutation (record, revert, restore, suspect) its
``restart`` keyword, so the CLI makes one call and formats the result's ``live``
outcome.  What it runs, :func:`run_mutation`, adds:

* ``--dry-run --restart``: the plan, plus the restarts it would run and the health checks
  it would wait for (refusing now if a touched target has no restart or health);
* ``--restart``: the mutation and its restarts under one writer lock; a failed health check
  rolls the mutation back as a new recorded command, restarts again and waits for health
  again (see :mod:`ledger.live.rollback`); the outcome says all of it, and ``failed``
  makes the CLI exit 1;
* neither: the mutation, then which touched targets' running services now differ from
  their files (for targets with a live probe).

Touched targets are the targets whose files the command writes; a command that flips
patch entries touches every target with a restart hook (the engine code is theirs all).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from dataclasses import field
from typing import Callable
from typing import Sequence

from ledger.commands.catalog import knob_registry
from ledger.commands.session import Session
from ledger.errors import Interrupted
from ledger.live.restart import RestartResult
from ledger.live.restart import check_restartable
from ledger.live.restart import restart_and_check
from ledger.live.rollback import RestartRecord
from ledger.live.rollback import crash_point
from ledger.live.rollback import record_restarts
from ledger.live.rollback import rollback_op
from ledger.live.status import TargetLive
from ledger.live.status import differing
from ledger.live.status import live_status
from ledger.store import wsgit
from ledger.store.apply import Applied
from ledger.store.txn import WriterLock
from ledger.store.txn import sha256_or_none
from ledger.store.managed import refuse_symlinked_targets


@dataclass
class PlannedRestart:
    target: str
    argv: list[str]
    health: str

    def to_dict(self) -> dict:
        return {"target": self.target, "argv": self.argv, "health": self.health}


@dataclass
class LiveOutcome:
    """What a mutating command did to the running services (besides its files)."""

    applied: Applied
    planned: list[PlannedRestart] = field(default_factory=list)
    restart: RestartResult | None = None
    rollback_commit: str | None = None
    rollback_restart: RestartResult | None = None
    record_commits: list[str] = field(default_factory=list)
    differing: list[TargetLive] = field(default_factory=list)
    error: str = ""
    bake: object | None = None  # ledger.commands.observe.BakeResult after --bake

    @property
    def failed(self) -> bool:
        return bool(self.rollback_commit or self.error or
                    (self.restart is not None and not self.restart.ok))

    def to_dict(self) -> dict:
        return {
            "planned_restarts": [p.to_dict() for p in self.planned],
            "restart": self.restart.to_dict() if self.restart else None,
            "rollback_commit": self.rollback_commit,
            "rollback_restart": self.rollback_restart.to_dict() if self.rollback_restart
            else None,
            "record_commits": self.record_commits,
            "pending_restart": [t.to_dict() for t in self.differing],
            "failed": self.failed, "error": self.error,
            "bake": self.bake.to_dict() if self.bake else None,
        }


def touched_targets(s: Session, applied: Applied) -> list[str]:
    """Targets whose files ``applied`` writes (all restartable ones for patch flips)."""
    by_path = {str(p): name for name, p in s.ws.target_paths_here().items()}
    names = {by_path[p] for p in applied.files if p in by_path}
    if applied.patch_diff:
        names |= {n for n, t in s.ws.config.targets.items()
                  if t.service and t.service.restart is not None}
    return sorted(names)


def planned_restarts(s: Session, names: Sequence[str]) -> list[PlannedRestart]:
    return [PlannedRestart(t.name, t.service.restart_argv(), t.service.health.describe())
            for t in check_restartable(s.ws, names)]


def run_mutation(s: Session, mutate: Callable[[bool], Applied], *, restart: bool,
                 dry_run: bool) -> LiveOutcome:
    """Run ``mutate(dry_run)`` with what ``--restart`` (or its absence) adds."""
    if s.bake is not None and not restart:
        from ledger.errors import Refused

        raise Refused("--bake waits after a restart's health gate: give --restart too")
    if dry_run:
        applied = mutate(True)
        out = LiveOutcome(applied)
        if restart:
            out.planned = planned_restarts(s, touched_targets(s, applied))
        return out
    if not restart:
        applied = mutate(False)
        return LiveOutcome(applied, differing=_differing(s, touched_targets(s, applied)))
    planned_restarts(s, touched_targets(s, mutate(True)))  # refuse before any change
    if s.bake is not None:
        s.bake.checked()  # a bad --bake or no --prometheus: refused before any change
    with WriterLock(s.ws, s.command) as lock:
        if lock.notice:
            s.notices.append(lock.notice)
        s.ws.reload()
        refuse_symlinked_targets(s.ws)
        s.locked = True
        try:
            return _mutate_and_restart(s, mutate)
        finally:
            s.locked = False


def restartable(mutation):
    """Give ``mutation(s, ..., dry_run=...)`` a ``restart`` keyword, run through
    :func:`run_mutation`; its result (an ``Applied``, or a record with ``.applied``) comes
    back with ``.live`` set to the :class:`LiveOutcome`.

    With ``restart`` and no dry run the mutation runs twice: dry first (to refuse a
    target without a restart or health check before any change), then for real."""

    @functools.wraps(mutation)
    def run(s: Session, *args, restart: bool = False, dry_run: bool = False, **kwargs):
        results = []

        def mutate(dry: bool) -> Applied:
            results.append(mutation(s, *args, dry_run=dry, **kwargs))
            return getattr(results[-1], "applied", results[-1])

        live = run_mutation(s, mutate, restart=restart, dry_run=dry_run)
        results[-1].live = live
        return results[-1]

    return run


def _differing(s: Session, names: Sequence[str]) -> list[TargetLive]:
    try:
        return differing(s.ws, names, known=knob_registry())
    except OSError:
        return []  # telling is a courtesy: it never fails the command that succeeded


def _mutate_and_restart(s: Session, mutate: Callable[[bool], Applied]) -> LiveOutcome:
    ws = s.ws
    rec = RestartRecord(s.command, s.now, wsgit.head(ws.root))
    rec.save(ws)
    changed_at = time.time()
    try:
        applied = mutate(False)
    except BaseException:
        RestartRecord.clear(ws)  # the transaction rolled itself back
        raise
    out = LiveOutcome(applied)
    if not applied.commit:
        RestartRecord.clear(ws)
        return out
    rec.targets = touched_targets(s, applied)
    rec.commit, rec.backup = applied.commit, applied.backup_id
    for name in rec.targets:
        path = ws.target_path(ws.target(name))
        if str(path) in applied.files:
            rec.files[str(path)] = sha256_or_none(path) or ""
    rec.save(ws)
    crash_point("before-restart")
    try:
        out.restart = restart_and_check(ws, rec.targets)
    except KeyboardInterrupt as e:
        raise _interrupted_restart(s, applied) from e
    if out.restart.ok:
        out.record_commits.append(record_restarts(
            ws, rec, out.restart, at=s.now, command=s.command, context=f"after {applied.op}"))
        reason = _bake(s, rec, out, changed_at, applied) if s.bake is not None else ""
        if not reason:
            RestartRecord.clear(ws)
            return out
    else:
        reason = "health check failed on " + ", ".join(st.target for st in out.restart.failed)
    out.rollback_commit = rollback_op(ws, rec, reason=reason, at=s.now, command=s.command,
                                      result=None if out.restart.ok else out.restart)
    rec.phase = "rollback"
    rec.save(ws)
    crash_point("before-rollback-restart")
    out.rollback_restart = restart_and_check(ws, out.restart.restarted)
    out.record_commits.append(record_restarts(
        ws, rec, out.rollback_restart, at=s.now, command=s.command,
        context=f"after the rollback of {applied.op}"))
    RestartRecord.clear(ws)
    return out


def _bake(s: Session, rec: RestartRecord, out: LiveOutcome, changed_at: float,
          applied: Applied) -> str:
    """Wait the bake and judge it (ledger.commands.observe.bake_verdict); its result goes
    into the history.  Returns why to roll back, "" to keep the change.  The restart
    record stays until then: a kill during the bake is rolled back by the next command."""
    from ledger.commands.observe import bake_verdict
    from ledger.live.rollback import changed_by
    from ledger.live.rollback import record_bake

    entry = next((e for e in changed_by(s.ws, rec) if e.kind == "knob"), None)
    try:
        out.bake = bake_verdict(s.ws, s.bake, changed_at, time.time(), entry)
    except KeyboardInterrupt as e:
        raise _interrupted_restart(s, applied) from e
    out.record_commits.append(record_bake(s.ws, rec, out.bake.describe(), out.bake.ok,
                                          at=s.now, command=s.command))
    return "" if out.bake.ok else out.bake.describe()


def _interrupted_restart(s: Session, applied: Applied) -> Interrupted:
    """Ctrl-C while the services restart: the change's health was never confirmed, so it is
    rolled back now, as the next command would after a kill (:func:`recover_restart`)."""
    from ledger.live.rollback import recover_restart

    notice = recover_restart(s.ws, command=s.command, at=s.now) or ""
    return Interrupted(f"`ledger {s.command}`", f"its change (workspace commit "
                       f"{(applied.commit or '')[:10]}) is rolled back before its health check "
                       "passed: files and entries are as before it",
                       "kept: the rollback in `ledger log`; the services may run either "
                       "configuration: check `ledger status --live`" if notice else "")


def status_live(s: Session, names: Sequence[str] = ()) -> list[TargetLive]:
    """``ledger status --live``: every probed target (or the named ones)."""
    from ledger.commands.catalog import engine_of
    from ledger.commands.catalog import name_defaults

    return live_status(s.ws, names, known=knob_registry(),
                       defaults=lambda t, unset: name_defaults(engine_of(s.ws, t), unset))
