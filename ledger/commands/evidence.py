"""`ledger ab` and `ledger evidence …`: collect, import and show an entry's evidence.

Side A is the entry reverted, side B the entry applied; everything else is as live:

* for a knob entry, each side's environment is the target file's live knobs with the
  entry's knob set to the value the ledger's layering gives with the entry reverted (A)
  or applied (B); the bench runs from the engine repo (or the current directory when the
  workspace has none);
* for a patch entry, A and B run from two temporary git worktrees of the engine repo —
  the live stack with the entry taken out (A) or put in (B) — so the live tree is never
  touched.

The runs, the judgement and the storage are :mod:`ledger.evidence`'s; this module picks
the sides, holds the writer lock for the whole run (so nobody changes what is being
measured), and commits the stored run to the workspace.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable
from typing import Iterator
from typing import Sequence

from ledger.core import layers
from ledger.core.model import Entry
from ledger.errors import EvidenceError
from ledger.errors import Interrupted
from ledger.evidence.defaults import DEFAULT_CONCURRENCY
from ledger.evidence.defaults import DEFAULT_RUNS
from ledger.evidence.view import current_engine_commit
from ledger.store import wsgit
from ledger.store.targets import read_target
from ledger.store.txn import WriterLock
from ledger.store.workspace import Workspace


def _knob_sides(ws: Workspace, e: Entry, command: str | None = None):
    """Sides A and B of a knob (or flag) entry: the live knobs, with the entry's own set
    as its layer gives with the entry reverted (A) or applied (B).  Env knobs go to the
    bench's environment, launch flags to its ``{flags}`` argument.  An entry recorded at
    several places measures its first place's layer (the bench runs one server)."""
    from ledger.evidence.runner import Side

    tf = read_target(ws, ws.target(e.target))
    layer = layers.knob_layers(ws.entries())[layers.entry_keys(e)[0]]
    value_a = layers.layer_value(layer, {e.id: False})
    value_b = layers.layer_value(layer, {e.id: True})
    env = {k: v for k, v in tf.values.items() if not k.startswith("-")}
    flags = {k: v for k, v in tf.values.items() if k.startswith("-")}
    own = flags if e.knob.startswith("-") else env
    if e.knob.startswith("-") and command is not None and "{flags}" not in command.split():
        raise EvidenceError(
            f"{e.knob} is a launch flag: the bench command must pass the side's flags to the "
            "server with a {flags} argument, else A and B would run the same (see --bench)"
        )
    engine_dir = ws.engine_repo_path or Path.cwd()
    a_own, b_own = {**own, e.knob: value_a}, {**own, e.knob: value_b}
    if own is flags:
        side_a, side_b = Side("A", env, engine_dir, a_own), Side("B", env, engine_dir, b_own)
    else:
        side_a = Side("A", a_own, engine_dir, flags)
        side_b = Side("B", b_own, engine_dir, flags)
    context = {k: v for k, v in tf.values.items() if k != e.knob}
    return side_a, side_b, context


@contextmanager
def _patch_sides(ws: Workspace, e: Entry) -> Iterator[tuple]:
    from dataclasses import replace

    from ledger.evidence.runner import Side
    from ledger.store.patch_entries import engine_repo
    from ledger.store.patch_entries import stack_items

    repo = engine_repo(ws)
    items = stack_items(ws, ws.entries(), {})
    scratch = Path(tempfile.mkdtemp(prefix=f"ab-{e.id}-", dir=ws.state_dir))
    made = []
    try:
        dirs = {}
        for name, applied in (("A", False), ("B", True)):
            flipped = [replace(i, applied_after=applied) if i.entry_id == e.id else i
                       for i in items]
            dest = scratch / name
            repo.materialize(flipped, dest)
            made.append(dest)
            dirs[name] = dest
        yield Side("A", {}, dirs["A"]), Side("B", {}, dirs["B"]), None
    finally:
        for dest in made:
            repo.remove_worktree(dest)
        shutil.rmtree(scratch, ignore_errors=True)


def check_bench_reads_knob(ws: Workspace, e: Entry, raw_command: str,
                           allow_other_engine: bool) -> None:
    """Refuse an A/B whose bench measures an engine that never reads the entry's knob
    (rules in :mod:`ledger.evidence.bench_engine`); patch entries are not checked."""
    if e.kind != "knob" or allow_other_engine:
        return
    from ledger.evidence.bench_engine import bench_engine
    from ledger.evidence.bench_engine import knob_engine
    from ledger.evidence.bench_engine import other_engine_reason

    if bench_engine(raw_command) is None:
        return  # a bench of the operator's own: which engine it starts is theirs to say
    from envknobs.catalog import bundled_catalogs
    from envknobs.catalog import load_catalog
    from ledger.commands.catalog import engine_of

    try:
        from engine.knobs import REGISTRY as bundled
    except ImportError:  # installed without the engine
        bundled = ()
    catalogs = {p.stem: load_catalog(p) for p in bundled_catalogs()}
    target = ws.target(e.target)
    spec = engine_of(ws, target)
    reason = other_engine_reason(e.id, e.knob, e.target, raw_command, spec,
                                 knob_engine(e.knob, spec, bundled, catalogs))
    if reason:
        raise EvidenceError(reason)


def judging_of(ws: Workspace) -> dict:
    """The verdict's settings from ledger.yaml's ``bench:``: ``tolerance_pct`` and ``guards``
    (each left to :func:`ledger.evidence.stats.analyze`'s default when not set)."""
    out: dict = {}
    if ws.config.bench_tolerance_pct is not None:
        out["tolerance_pct"] = ws.config.bench_tolerance_pct
    if ws.config.bench_guards:
        out["guards"] = tuple(ws.config.bench_guards)
    return out


def _parse_concurrency(values: Sequence[int] | None) -> list[int]:
    concs = list(values or DEFAULT_CONCURRENCY)
    if not concs or any(c < 1 for c in concs):
        raise EvidenceError(f"concurrency levels must be positive integers, got {concs}")
    return concs


def _load_plan(
    concurrency: Sequence[int] | None, rate: Sequence[float] | None
) -> tuple[list[int], list[float] | None]:
    """(concurrencies, rates): a concurrency sweep (the default) or a request-rate sweep."""
    from ledger.evidence.load import parse_rate

    if rate is None:
        return _parse_concurrency(concurrency), None
    if concurrency:
        raise EvidenceError("give --concurrency or --rate, not both")
    rates = [parse_rate(r) for r in rate]
    if not rates or any(r is None for r in rates):
        raise EvidenceError(f"request rates must be > 0 (or inf), got {list(rate)}")
    return [], [r for r in rates if r is not None]


def _points_text(concs: list[int], rates: list[float] | None) -> list[str]:
    from ledger.evidence.load import format_rate

    return [format_rate(r) for r in rates] if rates is not None else [str(c) for c in concs]


def plan_ab(
    s, ref: str, *, runs: int = DEFAULT_RUNS, concurrency: Sequence[int] | None = None,
    bench: str | None = None, rate: Sequence[float] | None = None,
    allow_other_engine: bool = False,
) -> dict:
    """What `ledger ab --dry-run` shows: the command, what differs between sides, the runs.
    Refused as `ab` itself would be when the bench cannot read the entry's knob."""
    from ledger.evidence.runner import DEFAULT_BENCH_COMMAND
    from ledger.evidence.runner import check_template
    from ledger.evidence.runner import resolve_bench

    ws = s.ws
    raw = bench or ws.config.bench_command or DEFAULT_BENCH_COMMAND
    command = resolve_bench(raw)
    tokens = check_template(command)
    concs, rates = _load_plan(concurrency, rate)
    if rates is not None and not any("{rate}" in t for t in tokens):
        raise EvidenceError("a request-rate sweep needs a bench command that uses {rate}")
    e = ws.resolve(ref)
    check_bench_reads_knob(ws, e, raw, allow_other_engine)
    if e.kind == "knob":
        side_a, side_b, _ = _knob_sides(ws, e, command)
        a_all, b_all = {**side_a.env, **side_a.flags}, {**side_b.env, **side_b.flags}
        differs = {k: {"A": a_all.get(k), "B": b_all.get(k)}
                   for k in sorted(set(a_all) | set(b_all)) if a_all.get(k) != b_all.get(k)}
    else:
        differs = {"engine tree": {"A": f"without patch {e.id}", "B": f"with patch {e.id}"}}
    points = _points_text(concs, rates)
    return {"entry": e.id, "command": command, "load": "rate" if rates is not None else
            "concurrency", "concurrency": concs, "rate": points if rates is not None else [],
            "runs_per_side": runs, "total_runs": 2 + 2 * runs * len(points), "differs": differs,
            "warnings": ab_power_warnings(runs, points)}


def ab_power_warnings(runs: int, points: Sequence[object]) -> list[str]:
    """What :func:`ledger.evidence.stats.power_warnings` says of ``runs`` per side at each
    of ``points`` (concurrencies or rates: only their number matters)."""
    from ledger.evidence.stats import power_warnings

    return power_warnings([(runs, runs)] * len(points))


def run_ab(
    s,
    ref: str,
    *,
    runs: int = DEFAULT_RUNS,
    concurrency: Sequence[int] | None = None,
    bench: str | None = None,
    metric: str = "output_throughput",
    progress: Callable[[int, int, float, str], None] | None = None,
    rate: Sequence[float] | None = None,
    allow_other_engine: bool = False,
    max_runs: int | None = None,
) -> dict:
    """Measure entry ``ref``'s effect; store, commit and return the run's summary.

    ``rate``: sweep these request rates instead of concurrencies (the bench command
    must use ``{rate}``).  ``allow_other_engine``: measure a knob with a bench of another
    engine than the one that reads it (refused otherwise: :func:`check_bench_reads_knob`).
    ``max_runs``: a sequential A/B (``--until-decided``): pairs from ``runs`` up to
    ``max_runs`` until the verdict is decided (:mod:`ledger.evidence.sequential`).
    """
    from ledger.evidence.runner import DEFAULT_BENCH_COMMAND
    from ledger.evidence.runner import resolve_bench
    from ledger.evidence.runner import run_alternating as run_bench
    from ledger.evidence.store import record_ab

    ws = s.ws
    raw = bench or ws.config.bench_command or DEFAULT_BENCH_COMMAND
    command = resolve_bench(raw)
    concs, rates = _load_plan(concurrency, rate)
    if runs < 1:
        raise EvidenceError(f"--runs must be at least 1, got {runs}")
    judging = judging_of(ws)
    seq = _sequential(runs, max_runs, metric, judging)
    pairs = runs if seq is None else seq.last  # the most pairs the runner may run
    bench_args = {"progress": progress, "rates": rates,
                  "until": None if seq is None else seq.look}
    with WriterLock(ws, s.command):
        e = ws.resolve(ref)
        check_bench_reads_knob(ws, e, raw, allow_other_engine)
        try:
            if e.kind == "knob":
                side_a, side_b, context = _knob_sides(ws, e, command)
                result = run_bench(command, side_a, side_b, concs, pairs, **bench_args)
            else:
                with _patch_sides(ws, e) as (side_a, side_b, context):
                    result = run_bench(command, side_a, side_b, concs, pairs, **bench_args)
        except KeyboardInterrupt as err:
            # The runner killed the bench's process group; the sides never touched a file.
            raise Interrupted(f"ab {e.id}", "its bench runs are stopped; the entry, its files "
                              "and the engine tree were never changed by the A/B",
                              "kept: nothing (an A/B is stored whole or not at all: rerun "
                              f"`ledger ab {e.id}`)") from err
        summary = record_ab(ws.root, e.id, result, metric=metric,
                            engine_commit=current_engine_commit(ws), context=context,
                            judging=judging, sequential=None if seq is None else seq.record())
        commit_evidence(ws, e, f"ab {e.id}: {summary.get('headline', '')}")
    return summary


def _sequential(runs: int, max_runs: int | None, metric: str, judging: dict):
    """The looks of ``ab --until-decided`` (None for a fixed A/B): each judges the runs so
    far as the stored summary will, at the look's confidence."""
    if max_runs is None:
        return None
    from ledger.evidence.sequential import Sequential
    from ledger.evidence.stats import analyze

    if max_runs < runs:
        raise EvidenceError(f"--max-runs {max_runs} is below --runs {runs}: a sequential A/B "
                            "looks from --runs pairs up to --max-runs")
    return Sequential(runs, max_runs, lambda rows, confidence: analyze(
        rows, metric, paired=True, confidence=confidence, **judging))


def add_evidence(
    s, ref: str, files: Sequence[str], side: str, concurrency: int | None = None,
    metric: str = "output_throughput", rate: float | None = None,
    workload: Sequence[str] = (), allow_mismatch: Sequence[str] = (), when: str = "",
    engine_commit: str | None = None, knobs: Sequence[str] | None = None,
    new_run: bool = False,
) -> dict:
    """Import bench results the operator ran elsewhere as side A or B of ``ref``.

    ``concurrency`` / ``rate``: the load point of results that say neither.
    ``workload``: ``KEY=VALUE`` items keeping only the results of one workload of a file
    that holds several; ``allow_mismatch``: workload fields in which A and B may differ.
    A bench run before later changes says so instead of being stamped with today's
    state: ``when`` (its time), ``engine_commit`` (a revision of the engine repo it ran
    at) and ``knobs`` (``K=V``: the target's other knobs then).  Against today's engine
    and knobs such evidence is shown stale (docs/ARCHITECTURE.md §5).  ``new_run``: a run of its
    own, not joined to the entry's latest import.
    """
    from ledger.core.when import parse_time
    from ledger.core.when import parse_when
    from ledger.evidence.import_run import import_evidence
    from ledger.evidence.view import knob_context
    from ledger.evidence.workload import parse_selection

    ws = s.ws
    when = parse_when(when, s.now) if when else ""
    moment = parse_time(when) if when else None
    with WriterLock(ws, s.command):
        e = ws.resolve(ref)
        commit = _engine_commit_of(ws, engine_commit) if engine_commit else \
            current_engine_commit(ws)
        context = _knobs_given(e, knobs) if knobs else knob_context(ws, e)
        summary = import_evidence(
            ws.root, e.id, [Path(f) for f in files], side, concurrency=concurrency,
            rate=rate, metric=metric, engine_commit=commit, context=context, now=moment,
            select=parse_selection(workload), allow_mismatch=allow_mismatch,
            new_run=new_run, judging=judging_of(ws),
        )
        commit_evidence(ws, e, f"evidence add {e.id} side {side}: "
                                f"{summary.get('headline', '')}",
                         when=when)
    return summary


def _engine_commit_of(ws: Workspace, rev: str) -> str:
    """``--engine-commit REV`` resolved in the engine repo (refused when it is not there)."""
    from ledger.evidence.view import engine_git
    from ledger.git_runner import check_rev

    git = engine_git(ws)
    if git is None:
        raise EvidenceError(f"--engine-commit {rev}: this workspace has no engine repo "
                            "(ledger init --engine-repo PATH)")
    sha = git.resolve_commit(check_rev(rev))
    if sha is None:
        raise EvidenceError(f"--engine-commit {rev!r}: no such commit in the engine repo "
                            f"{ws.engine_repo_path}")
    return sha


def _knobs_given(e: Entry, knobs: Sequence[str]) -> dict[str, str]:
    """``--knobs K=V ...``: the other knobs of the target when the bench ran."""
    out: dict[str, str] = {}
    for item in knobs:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise EvidenceError(f"--knobs {item!r}: write KNOB=VALUE")
        if name == e.knob:
            raise EvidenceError(f"--knobs {name}: that is the entry's own knob; its value is "
                                "the side (A: reverted, B: applied)")
        out[name] = value
    return out


def check_evidence_files(
    ws: Workspace, ref: str, files: Sequence[str], concurrency: int | None = None,
    rate: float | None = None, workload: Sequence[str] = (), allow_mismatch: Sequence[str] = (),
) -> dict:
    """Parse result files as `evidence add` would, storing nothing (for --dry-run)."""
    from ledger.evidence.importers import read_result_file
    from ledger.evidence.load import of_row
    from ledger.evidence.workload import check_allow
    from ledger.evidence.workload import parse_selection

    e = ws.resolve(ref)
    select = parse_selection(workload)
    out = []
    for f in files:
        parsed = read_result_file(Path(f), concurrency, rate, select=select,
                                  allow=check_allow(allow_mismatch))
        shape, rows = parsed.shape, parsed.rows
        points = sorted({of_row(r) for r in rows})
        out.append({"path": str(f), "shape": shape, "rows": len(rows),
                    "workload": parsed.workload, "origin": parsed.origin,
                    "load": points[0].kind,
                    "points": [p.label for p in points],
                    "concurrency": [int(p.value) for p in points if p.kind == "concurrency"]})
    return {"entry": e.id, "files": out}


def show_evidence(ws: Workspace, ref: str) -> dict:
    """Every stored run of ``ref``'s evidence (oldest first) and the latest's staleness."""
    from ledger.evidence.notes import load_notes
    from ledger.evidence.store import load_summaries
    from ledger.evidence.view import evidence_for

    e = ws.resolve(ref)
    info = evidence_for(ws, e)
    return {"entry": e.id, "title": e.title, "headline": info.headline, "stale": info.stale,
            "stale_why": list(info.stale_why), "runs": load_summaries(ws.root, e.id),
            "notes": load_notes(ws.root, e.id)}


def commit_evidence(ws: Workspace, e: Entry, message: str, when: str = "") -> None:
    """Commit the entry's evidence; ``when``: the bench's real time, as a trailer."""
    trailer = f"\nWhen: {when}\n" if when else ""
    wsgit.commit(ws.root, [f"evidence/{e.id}"],
                 message + f"\n\n- {e.id} [{e.cls}] {e.title}\n" + trailer)


def attach_note(s, ref: str, source: str, side: str | None = None, when: str = "",
                dry_run: bool = False) -> dict:
    """``ledger evidence note ID FILE_OR_URL``: keep a markdown note (its text copied in)
    or a link with the entry's evidence, committed to the workspace.

    ``side``: the note is about side A (the entry reverted) or B (applied); ``when``:
    when it was written (default now).  A note is shown, never judged as numbers: it
    changes no headline or verdict (:mod:`ledger.evidence.notes`)."""
    from ledger.core.when import parse_when
    from ledger.evidence.notes import add_note
    from ledger.evidence.notes import make_note
    from ledger.evidence.notes import note_line

    if side is not None and side not in ("A", "B"):
        raise EvidenceError(f"side must be A or B, got {side!r}")
    when = parse_when(when, s.now) if when else s.now
    note = make_note(source, side, when)
    if dry_run:  # read and checked as it would be kept; nothing stored
        return {"entry": s.ws.resolve(ref).id, "note": note, "line": note_line(note)}
    with WriterLock(s.ws, s.command):
        e = s.ws.resolve(ref)
        add_note(s.ws.root, e.id, note)
        commit_evidence(s.ws, e, f"evidence note {e.id}: {note_line(note)}")
    return {"entry": e.id, "note": note, "line": note_line(note)}
