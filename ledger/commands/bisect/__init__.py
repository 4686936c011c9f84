"""`ledger bisect`: run the search of :mod:`ledger.core.bisect` against a real check.

For each probe the driver sets the selected entries applied or reverted through the
normal transactional path (the planner's :func:`~ledger.core.planner.plan_states` and
:func:`~ledger.store.apply.apply_plan`: target files and the engine repo's patch stack
follow, one workspace commit per probe that also carries the record so far), optionally
restarts the services (``--restart``), runs the check ``--runs N`` times and feeds the
verdict back.  At the end the workspace is put back byte-identical to its start
(:func:`ledger.store.bisect_state.restore_start`) with the record committed under
``bisect/<id>/record.json`` — unless ``--keep-result``, which then reverts the culprits as
an ordinary recorded command.  Crash safety: see :mod:`ledger.store.bisect_state`.

Decisions where the issue is silent:

* ``--class C`` selects every entry of the class, reverted ones included: the failure is
  confirmed with all of them applied, so an entry reverted on a hunch is tested too.
  ``--all-applied`` selects what is applied now.
* Probe toggles write no history line (the record is their history); the entries end
  as they started.  ``show``, ``render`` link each entry to the bisects that selected it.
* "Cannot reproduce" changes nothing and commits nothing when no toggle was needed
  (the selection was applied already); otherwise the record is committed with the restore.
* The check runs in the directory ``ledger`` was started from, with
  ``LEDGER_BISECT_ID`` and ``LEDGER_BISECT_STEP`` in its environment.
* ``--restart``: after each toggle the services of the targets it wrote (every target
  with a restart hook, when patch entries flipped: the engine code is theirs all) are
  restarted and their health checks waited for (:func:`ledger.live.restart.
  restart_and_check`); the check runs only once they are healthy.  A restart that fails
  or a health check that does not pass makes that configuration *bad* without running
  the check (a server that will not come up with a subset applied fails that subset),
  and the step records why.  A restart command that cannot be run at all stops the
  bisect (the start is put back).  Every selected knob's target must have a restart and
  a health check, refused before anything changes otherwise (naming each target).  When
  the start is put back, the services restarted during the search are restarted once
  more, so they run the starting configuration again (``final_restart`` in the result).
  A probe that changes no file (the confirm step, when everything selected is applied
  already) restarts nothing: the services are taken to run the files as they are
  (``ledger status --live`` shows where they do not).
* ``ledger_seconds`` of a step is the ledger's own time in it: everything but the check
  runs and the restarts (toggle, record saves, commit).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from ledger.commands.bisect.run import CheckSpec
from ledger.commands.bisect.run import parse_check
from ledger.commands.bisect.run import run_check
from ledger.commands.live import touched_targets
from ledger.commands.session import Session
from ledger.core import bisect as core
from ledger.core import planner
from ledger.core.model import Entry
from ledger.errors import Interrupted
from ledger.errors import LedgerError
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.live.restart import RestartResult
from ledger.live.restart import check_restartable
from ledger.live.restart import restart_and_check
from ledger.render.bisect import conclusion_record
from ledger.store import bisect_state as state_store
from ledger.store.apply import apply_plan
from ledger.store.apply import commit_message
from ledger.store.apply import drift_in
from ledger.store.apply import read_targets
from ledger.store.managed import refuse_symlinked_targets
from ledger.store.txn import WriterLock
from ledger.store.workspace import utc_now

Progress = Callable[[str], None]


@dataclass
class Options:
    check: str
    refs: Sequence[str] = ()
    cls: str | None = None
    all_applied: bool = False
    runs: int = 1
    restart: bool = False
    timeout_s: float | None = None
    shell: bool = False
    dry_run: bool = False
    keep_result: bool = False
    clear_suspects: bool = False
    upgrade: str | None = None  # an upgrade entry: bisect the defaults it moved


@dataclass
class BisectResult:
    id: str
    selection: list[Entry]
    check: CheckSpec
    runs: int
    dry_run: bool = False
    record: dict = field(default_factory=dict)
    commit: str | None = None
    cleared: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    max_checks: int = 0
    final_restart: dict | None = None
    upgrade: dict | None = None  # --upgrade: the moves tried (ledger.commands.bisect.upgrade)

    @property
    def conclusion(self) -> dict | None:
        return self.record.get("conclusion")


def select(s: Session, opts: Options) -> list[Entry]:
    """The entries to bisect over, in record order (exactly one way of choosing)."""
    ways = [bool(opts.refs), opts.cls is not None, opts.all_applied]
    if sum(ways) != 1:
        raise UsageError("choose the entries: ID..., or --class perf|bugfix, or --all-applied "
                         "(exactly one)")
    entries = s.ws.entries()
    if opts.refs:
        chosen = {e.id: e for e in (s.ws.resolve(r) for r in opts.refs)}
        picked = sorted(chosen.values(), key=lambda e: e.seq)
    elif opts.cls is not None:
        picked = planner.select(entries, cls=planner_class(opts.cls))
    else:
        picked = planner.select(entries, state="applied")
    if not picked:
        raise Refused("no entries selected: nothing to bisect over")
    return picked


def planner_class(cls: str) -> str:
    from ledger.core.identifiers import check_class

    return check_class(cls)


def restart_names(s: Session, selection: Sequence[Entry]) -> list[str]:
    """The targets ``--restart`` may restart: every selected knob's target, and every
    target with a restart hook when patch entries are selected."""
    names = {n for e in selection if e.kind != "patch" for n in e.targets}
    if any(e.kind == "patch" for e in selection):
        names |= {n for n, t in s.ws.config.targets.items()
                  if t.service and t.service.restart is not None}
    return sorted(names)


def bisect(s: Session, opts: Options, cwd: Path, progress: Progress = lambda _: None
           ) -> BisectResult:
    """Find the selected entries that make ``opts.check`` fail (see the module docs)."""
    if opts.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {opts.runs}")
    spec = parse_check(opts.check, shell=opts.shell, timeout_s=opts.timeout_s)
    if opts.upgrade is not None:
        return _bisect_upgrade(s, opts, spec, cwd, progress)
    selection = select(s, opts)
    if opts.restart:
        check_restartable(s.ws, restart_names(s, selection))  # refuse before any change
    bid = s.now.replace("-", "").replace(":", "") + "-" + secrets.token_hex(2)
    result = BisectResult(bid, selection, spec, opts.runs, dry_run=opts.dry_run,
                          max_checks=core.max_checks(len(selection)))
    if opts.dry_run:
        return result
    with WriterLock(s.ws, s.command):
        refuse_symlinked_targets(s.ws)
        _preflight(s, selection)
        run = _Run(s, opts, spec, selection, bid, cwd, progress)
        _finish(run, result, opts)
    return result


def _finish(run: _Run, result: BisectResult, opts: Options) -> None:
    """Search, put the start back, and what the options ask after it (under the lock)."""
    result.record = run.record
    run.search()
    if run.pins is not None:
        from ledger.commands.bisect.upgrade import upgrade_answer

        run.record["conclusion"] = upgrade_answer(run.record["conclusion"], run.pins, run.bid)
    result.commit = run.finish()
    result.final_restart = run.restart_back()
    result.cleared = run.clear_suspects() if opts.clear_suspects else []
    result.kept = run.keep_result() if opts.keep_result else []


def _bisect_upgrade(s: Session, opts: Options, spec: CheckSpec, cwd: Path, progress: Progress
                    ) -> BisectResult:
    """``--upgrade ID``: bisect temporary entries pinning the defaults the upgrade moved
    (rules in :mod:`ledger.commands.bisect.upgrade`)."""
    from ledger.commands.bisect.upgrade import plan_pins

    if opts.refs or opts.cls is not None or opts.all_applied:
        raise UsageError("--upgrade ID selects the entries itself: drop ID..., --class and "
                         "--all-applied")
    if opts.keep_result or opts.clear_suspects:
        raise UsageError("--upgrade offers the pin to record; --keep-result and "
                         "--clear-suspects do not apply")
    bid = s.now.replace("-", "").replace(":", "") + "-" + secrets.token_hex(2)
    with WriterLock(s.ws, s.command) if not opts.dry_run else _no_lock():
        entries = s.ws.entries()
        pins = plan_pins(entries, s.ws.resolve(opts.upgrade), now=s.now, command=s.command)
        selection = pins.entries
        if opts.restart:
            check_restartable(s.ws, restart_names(s, selection))
        result = BisectResult(bid, selection, spec, opts.runs, dry_run=opts.dry_run,
                              max_checks=core.max_checks(len(selection)),
                              upgrade=pins.to_dict())
        if opts.dry_run:
            return result
        refuse_symlinked_targets(s.ws)
        _preflight(s, selection)
        run = _Run(s, opts, spec, selection, bid, cwd, progress, pins=pins)
        _finish(run, result, opts)
    return result


def _no_lock():
    from contextlib import nullcontext

    return nullcontext()


def _preflight(s: Session, selection: Sequence[Entry]) -> None:
    """Refuse to start on drift, a dirty engine repo, or a bisect in progress."""
    ongoing = state_store.in_progress(s.ws)
    if ongoing is not None:
        raise Refused(f"bisect {ongoing.id} (started {ongoing.started}) has not finished: "
                      "`ledger bisect reset` puts its starting state back")
    entries = s.ws.entries()
    names = sorted({n for e in selection if e.kind != "patch" for n in e.targets})
    drifts = drift_in(s.ws, entries, read_targets(s.ws, names))
    if drifts:
        from ledger.errors import DriftError

        raise DriftError(drifts)
    if any(e.kind == "patch" for e in selection):
        from ledger.store.patch_entries import engine_repo

        engine_repo(s.ws).require_clean()


class _Run:
    """One bisect in progress: the record, the probes, the restore."""

    def __init__(self, s: Session, opts: Options, spec: CheckSpec, selection: list[Entry],
                 bid: str, cwd: Path, progress: Progress, pins=None) -> None:
        self.s, self.opts, self.spec, self.bid = s, opts, spec, bid
        self.pins = pins  # --upgrade: the temporary entries, added after the start is kept
        self.selection, self.cwd, self.progress = selection, cwd, progress
        self.ids = [e.id for e in selection]
        self.toggled = False
        self.restarted: set[str] = set()  # targets whose services a toggle restarted
        ws = s.ws
        names = sorted({n for e in selection if e.kind != "patch" for n in e.targets})
        paths = [ws.target_path(ws.target(n)) for n in names]
        engine_path = engine_head = None
        if any(e.kind == "patch" for e in selection):
            from ledger.store.patch_entries import engine_repo

            repo = engine_repo(ws)
            engine_path, engine_head = Path(repo.path), repo.head()
        self.record = {
            "id": bid, "started": s.now, "finished": None, "status": "running",
            "command": s.command, "check": spec.to_dict(), "runs": opts.runs,
            "selection": [_selected(e) for e in selection], "steps": [],
            "conclusion": None, "result": None, "cleared": [], "kept": [],
        }
        if pins is not None:
            self.record["upgrade"] = pins.to_dict()
        self.state = state_store.begin(ws, bisect_id=bid, command=s.command, now=s.now,
                                       target_paths=paths, engine_path=engine_path,
                                       engine_head=engine_head)
        state_store.save_working(ws, self.record)
        if pins is not None:
            self._add_temporary(pins.entries)

    def _add_temporary(self, added: Sequence[Entry]) -> None:
        """Record the --upgrade pins as entries (the files hold them already: the start,
        kept by begin(), has them not, so putting it back removes them)."""
        try:
            apply_plan(self.s.ws, planner.Plan("bisect", (), added=tuple(added)),
                       command=self.s.command, now=utc_now(),
                       message=f"bisect {self.bid}: {len(added)} temporary entries, the "
                               f"defaults upgrade {self.pins.upgrade.id} moved\n",
                       extra_ledger_writes={state_store.record_rel(self.bid):
                                            state_store.record_bytes(self.record)})
        except BaseException as e:
            self._abort(e)
            raise
        self.toggled = True

    # -- the search ---------------------------------------------------------------------
    def search(self) -> None:
        gen = core.search(self.ids)
        try:
            probe = next(gen)
            while True:
                step = self._probe(probe)
                try:
                    probe = gen.send(step["verdict"] == "bad")
                except StopIteration as stop:
                    conclusion = stop.value
                    break
        except BaseException as e:
            self._abort(e)
            if isinstance(e, (KeyboardInterrupt, Interrupted)):
                steps = len(self.record["steps"])
                raise Interrupted(
                    f"bisect {self.bid}", "the starting configuration is back (every "
                    "selected entry as it was, its check stopped)",
                    f"kept: its record ({steps} step{'s' if steps != 1 else ''}, interrupted) "
                    "in `ledger bisect show`") from e
            raise
        self.record["conclusion"] = conclusion_record(conclusion, self.record, self.selection)
        self.record["status"] = "concluded"

    def _probe(self, probe: core.Probe) -> dict:
        n = len(self.record["steps"]) + 1
        applied = [i for i in self.ids if i in probe.applied]
        reverted = [i for i in self.ids if i not in probe.applied]
        self.progress(f"step {n} ({probe.purpose}): {len(applied)} of {len(self.ids)} "
                      "selected entries applied")
        step = {"n": n, "purpose": probe.purpose, "applied": applied, "reverted": reverted,
                "verdict": None, "runs": [], "commit": None, "ledger_seconds": 0.0,
                "check_seconds": 0.0}
        t0 = time.perf_counter()
        # In the record before the toggle: a kill from here on leaves it named as pending.
        self.record["steps"].append(step)
        state_store.save_working(self.s.ws, self.record)
        step["commit"], restart = self._toggle(probe, step)
        if restart is not None and not restart.ok:
            step["verdict"] = "bad"
            step["restart_failed"] = restart.describe()
            self.progress(f"  {restart.describe()}: bad, without running the check")
        else:
            self._run_checks(step, n)
        outside = step["check_seconds"] + step.get("restart_seconds", 0.0)
        step["ledger_seconds"] = round(max(0.0, time.perf_counter() - t0 - outside), 4)
        state_store.save_working(self.s.ws, self.record)
        return step

    def _run_checks(self, step: dict, n: int) -> None:
        env = {**os.environ, "LEDGER_BISECT_ID": self.bid, "LEDGER_BISECT_STEP": str(n)}
        for k in range(self.opts.runs):
            r = run_check(self.spec, self.cwd, env)
            step["runs"].append(r.to_dict())
            step["check_seconds"] = round(step["check_seconds"] + r.seconds, 4)
            self.progress(f"  run {k + 1}/{self.opts.runs}: "
                          + ("timed out" if r.timed_out else f"exit {r.exit_code}")
                          + f" in {r.seconds:.1f}s")
            state_store.save_working(self.s.ws, self.record)
        step["verdict"] = "bad" if any(r["exit"] != 0 for r in step["runs"]) else "good"

    def _toggle(self, probe: core.Probe, step: dict) -> tuple[str | None, RestartResult | None]:
        """Set the probe's entries; with --restart, restart what changed (the result)."""
        ws = self.s.ws
        entries = ws.entries()
        wanted = {i: i in probe.applied for i in self.ids}
        plan = planner.plan_states(entries, wanted, op="bisect")
        if plan.empty:
            return None, None
        from ledger.store.patch_entries import engine_step_for

        changed = [new for _, new in plan.changes]
        message = (f"bisect {self.bid} step {step['n']} ({probe.purpose}): "
                   f"{len(step['applied'])} of {len(self.ids)} applied\n\n"
                   + "".join(f"- {e.id} {'applied' if e.applied else 'reverted'}: {e.title}\n"
                             for e in changed))
        done = apply_plan(ws, plan, command=self.s.command, now=utc_now(), message=message,
                          extra_ledger_writes={state_store.record_rel(self.bid):
                                               state_store.record_bytes(self.record)},
                          engine=lambda es, p: engine_step_for(ws, es, p))
        self.toggled = True
        if not self.opts.restart:
            return done.commit, None
        names = touched_targets(self.s, done)
        t0 = time.perf_counter()
        result = restart_and_check(ws, names)
        step["restart_seconds"] = round(time.perf_counter() - t0, 4)
        step["restart"] = result.to_dict()
        self.restarted |= {st.target for st in result.steps}
        unrunnable = [st for st in result.steps if st.error.startswith("cannot run")]
        if unrunnable:
            raise Refused(f"--restart: target {unrunnable[0].target}: {unrunnable[0].error}")
        return done.commit, result

    def restart_back(self) -> dict | None:
        """After the start is put back: restart the services the search restarted."""
        if not self.restarted:
            return None
        return restart_and_check(self.s.ws, sorted(self.restarted)).to_dict()

    def _abort(self, error: BaseException) -> None:
        """Put the start back after Ctrl-C or an error; leave the marker if that fails."""
        interrupted = isinstance(error, (KeyboardInterrupt, Interrupted))
        self.record["status"] = "interrupted" if interrupted else "failed"
        self.record["error"] = "interrupted (Ctrl-C)" if interrupted else str(error)
        self.record["finished"] = utc_now()
        self.record["result"] = "restored the starting state"
        try:
            state_store.restore_start(
                self.s.ws, self.state, self.record, now=utc_now(),
                message=f"bisect {self.bid} {self.record['status']}: restored the starting "
                        f"state\n\n{self.record['error'][:500]}\n")
        except LedgerError as e:
            raise LedgerError(
                f"bisect {self.bid} stopped ({self.record['error']}) and its starting state "
                f"could not be put back: {e}\n`ledger bisect reset` puts it back") from error
        if self.restarted:
            back = restart_and_check(self.s.ws, sorted(self.restarted))
            if not back.ok:
                raise LedgerError(
                    f"bisect {self.bid} stopped ({self.record['error']}); its starting state "
                    f"is back, but restarting its services failed: {back.describe()}"
                ) from error

    # -- the end ------------------------------------------------------------------------
    def finish(self) -> str | None:
        """Restore the start and commit the record (nothing at all for an untoggled
        cannot-reproduce)."""
        self.record["finished"] = utc_now()
        self.record["result"] = "restored the starting state"
        kind = self.record["conclusion"]["kind"]
        if kind == "cannot-reproduce" and not self.toggled:
            state_store.finish(self.s.ws)
            return None
        summary = self.record["conclusion"]["text"].splitlines()[0]
        return state_store.restore_start(
            self.s.ws, self.state, self.record, now=utc_now(),
            message=f"bisect {self.bid}: {summary[:150]}\n\n"
                    f"{len(self.record['steps'])} checks; record {state_store.record_rel(self.bid)}\n")

    def _apply(self, plan: planner.Plan, why: str) -> None:
        from ledger.store.patch_entries import engine_step_for

        ws = self.s.ws
        apply_plan(ws, plan, command=self.s.command, now=self.s.now,
                   message=commit_message(plan.op, why, [n for _, n in plan.changes]),
                   engine=lambda es, p: engine_step_for(ws, es, p))

    def clear_suspects(self) -> list[str]:
        """After "not in these entries": clear every suspect of the selection."""
        if self.record["conclusion"]["kind"] != "not-in-entries":
            return []
        entries = {e.id: e for e in self.s.ws.entries()}
        suspects = [entries[i] for i in self.ids if entries[i].suspected]
        if not suspects:
            return []
        why = (f"bisect {self.bid}: the failure persists with all {len(self.ids)} selected "
               f"entries reverted (check: {self.spec.text})")
        changes = []
        for e in suspects:
            changes += planner.plan_clear(e, why=why, at=self.s.now, command=self.s.command).changes
        self._apply(planner.Plan("clear", tuple(changes)), why)
        return [e.id for e in suspects]

    def keep_result(self) -> list[str]:
        """With --keep-result: revert the culprits (a recorded command of its own)."""
        conclusion = self.record["conclusion"]
        if conclusion["kind"] not in ("culprit", "interaction"):
            return []
        entries = self.s.ws.entries()
        chosen = [e for e in entries if e.id in conclusion["entries"] and e.applied]
        why = f"bisect {self.bid}: {conclusion['text'].splitlines()[0]}"
        plan = planner.plan_revert(entries, chosen, why=why, at=self.s.now, command=self.s.command)
        if not plan.empty:
            self._apply(plan, why)
        return [e.id for e in chosen]


def _selected(e: Entry) -> dict:
    from ledger.core.display import change_text

    return {"id": e.id, "title": e.title, "class": e.cls, "kind": e.kind,
            "change": change_text(e), "start": e.state, "suspicion": e.suspicion}


def reset(s: Session, force: bool = False) -> str | None:
    """`ledger bisect reset`: put back the start of an interrupted bisect; a notice or None."""
    with WriterLock(s.ws, s.command):
        return state_store.recover_bisect(s.ws, s.now, force=force)


__all__ = ["BisectResult", "Options", "bisect", "reset", "restart_names", "select"]
