"""`ledger ab` and `ledger evidence add|show`."""

from __future__ import annotations

import sys

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import show_value
from ledger.cli.output import table
from ledger.errors import UsageError
from ledger.evidence.defaults import DEFAULT_CONCURRENCY
from ledger.evidence.defaults import DEFAULT_RUNS
from ledger.evidence.defaults import PRIMARY_METRIC


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise UsageError("give at least one concurrency level")
    return values


def _rate_list(text: str | None) -> list[float] | None:
    from ledger.evidence.load import parse_rate

    if text is None:
        return None
    values = [parse_rate(x) for x in text.split(",") if x.strip()]
    if not values or any(v is None for v in values):
        raise UsageError(f"expected comma-separated request rates (> 0, or inf), got {text!r}")
    return [v for v in values if v is not None]


def _rate(text: str | None) -> float | None:
    rates = _rate_list(text)
    if rates is not None and len(rates) != 1:
        raise UsageError(f"--rate takes one request rate here, got {text!r}")
    return rates[0] if rates else None


def _points_phrase(found: dict) -> str:
    """``concurrency 16,64`` or ``request rate 1,2,inf``."""
    if found["load"] == "rate":
        return "request rate " + ",".join(p.removeprefix("rate ") for p in found["points"])
    return "concurrency " + ",".join(map(str, found["concurrency"]))


class Progress:
    """`[ab] 7/22 runs  B @c16  ETA 41s` on stderr, redrawn in place on a terminal."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, eta_s: float, label: str) -> None:
        line = f"[ab] {done}/{total} runs  {label}  ETA {eta_s:.0f}s"
        if self.tty:
            click.echo(f"\r\x1b[2K{line}", err=True, nl=done == total)
        else:
            click.echo(line, err=True)


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--runs", type=int, default=DEFAULT_RUNS, show_default=True, help="Runs per side and "
              "concurrency (after one warm-up per side).")
@click.option("--concurrency", default=None, metavar="LIST",
              help=f"Concurrency levels [default: {','.join(map(str, DEFAULT_CONCURRENCY))}].")
@click.option("--rate", metavar="LIST", help="Sweep request rates instead (req/s, e.g. "
              "1,2,4,inf): the bench command must use {rate}.")
@click.option("--bench", metavar="CMD", help="Bench command template (default: bench.command in "
              "ledger.yaml); placeholders {out} {concurrency} {rate} {engine_dir} {env_file} "
              "{python} {flags}; aiperf:MODEL_DIR = AIPerf driving the bundled engine "
              "serving MODEL_DIR.")
@click.option("--metric", default=PRIMARY_METRIC, show_default=True,
              help="Primary metric for the verdict.")
@click.option("--until-decided", "until_decided", is_flag=True,
              help="Sequential A/B: after --runs pairs, look after every pair and stop once the "
              "verdict is gain, regression or neutral (each look at a stricter confidence, so "
              "the 5% error holds over all looks).")
@click.option("--max-runs", "max_runs", type=int, metavar="N", help="With --until-decided: "
              "stop undecided (inconclusive, with the pairs it would need) after N pairs "
              "[default: 3 x --runs].")
@click.option("--allow-other-engine", "allow_other_engine", is_flag=True,
              help="Measure a knob although the bench runs an engine that does not read it "
              "(the bundled engine's bench on an SGLang/vLLM knob is refused otherwise).")
@json_option
@dry_run_option
@click.pass_context
def ab(ctx, ref, runs, concurrency, rate, bench, metric, until_decided, max_runs,
       allow_other_engine, json_out, dry_run) -> None:
    """Collect A/B evidence for an entry: A = reverted, B = applied, alternating.

    With --until-decided it runs --runs pairs, then one more pair at a time until the
    verdict is decided or --max-runs pairs ran; the evidence says after how many."""
    from ledger.commands.evidence import plan_ab
    from ledger.commands.evidence import run_ab

    s = ctx.find_object(State).session(ctx)
    concs = None if concurrency is None else _int_list(concurrency)
    rates = _rate_list(rate)
    max_runs = _max_runs(until_decided, max_runs, runs)
    if dry_run:
        plan = plan_ab(s, ref, runs=max_runs or runs, concurrency=concs, bench=bench,
                       rate=rates, allow_other_engine=allow_other_engine)
        if wants_json(ctx, json_out):
            return emit_json(plan)
        points = plan["rate"] if plan["load"] == "rate" else plan["concurrency"]
        click.echo(f"would run {'up to ' if max_runs else ''}{plan['total_runs']} benches for "
                   f"{plan['entry']} (1 warm-up per side, then pairs A B, B A, …: "
                   f"{f'{runs} to {max_runs}, until decided,' if max_runs else runs} per side at "
                   f"{'request rate' if plan['load'] == 'rate' else 'concurrency'} "
                   f"{','.join(map(str, points))}):")
        click.echo(f"  {safe(plan['command'])}")
        for k, v in plan["differs"].items():
            click.echo(f"  {safe(k)}: A {show_value(v['A'])}  B {show_value(v['B'])}")
        _warn(plan["warnings"])
        return None
    from ledger.commands.evidence import ab_power_warnings

    points = len(rates) if rates is not None else len(concs or DEFAULT_CONCURRENCY)
    _warn(ab_power_warnings(runs, [0] * points))  # before minutes of benches
    summary = run_ab(s, ref, runs=runs, concurrency=concs, bench=bench,
                     metric=metric, progress=Progress(), rate=rates,
                     allow_other_engine=allow_other_engine, max_runs=max_runs)
    if wants_json(ctx, json_out):
        return emit_json(summary)
    click.echo(f"{summary.get('entry', ref)}: {safe(summary.get('headline', ''))}")
    _print_summary_table(summary)


def _max_runs(until_decided: bool, max_runs: int | None, runs: int) -> int | None:
    """The most pairs of a sequential A/B (None for a fixed one)."""
    if not until_decided:
        if max_runs is not None:
            raise UsageError("--max-runs goes with --until-decided")
        return None
    return 3 * runs if max_runs is None else max_runs


def _num(value, spec: str, unit: str = "") -> str:
    """A summary number, or a dash where the statistics have none (too few runs)."""
    return "—" if value is None else f"{value:{spec}}{unit}"


def _print_summary_table(summary: dict) -> None:
    from ledger.evidence.load import of_row

    metric = summary.get("metric", "output_throughput")
    from ledger.evidence.stats import VERDICT_RULE
    from ledger.evidence.headline import neutral_reason

    rows = []
    for c in summary.get("by_concurrency") or []:
        m = (c.get("metrics") or {}).get(metric)
        if not m:
            continue
        low, high = m.get("ci_low_pct"), m.get("ci_high_pct")
        ci = "—" if low is None or high is None else f"{low:+.1f}..{high:+.1f}%"
        why = neutral_reason(m, summary.get("warnings") or ())
        label = of_row(c).label
        rows.append([label[1:] if summary.get("observed") else label, _num(m.get("median_a"), ".2f"),
                     _num(m.get("median_b"), ".2f"), _num(m.get("delta_pct"), "+.1f", "%"), ci,
                     _num(m.get("p_adjusted", m.get("p_value")), ".3f"),
                     f"{c.get('n_a')}/{c.get('n_b')}",
                     m.get("verdict", "") + (f" ({why})" if why else "")])
    if rows:
        click.echo(f"{metric}:")
        load = "RATE" if summary.get("load") == "rate" else \
            "LOAD" if summary.get("observed") else "CONC"  # observed: requests in the engine
        level = (summary.get("sequential") or {}).get("confidence") or 0.95
        click.echo(table(rows, [load, "MEDIAN A", "MEDIAN B", "DELTA", f"{100 * level:.4g}% CI",
                                "P (HOLM)", "N", "VERDICT"]))
    workload = summary.get("workload") or {}
    if workload:
        click.echo("workload: " + safe(", ".join(f"{k} {_said(v)}" for k, v in workload.items()
                                                 if v is not None)))
    if summary.get("observed"):
        click.echo(f"{summary['observed'].get('what')}: not a controlled A/B (A before, B "
                   "after the change, live traffic; LOAD = requests in the engine)")
    click.echo(f"verdict {summary.get('verdict')}; outputs {summary.get('outputs')}")
    seq = summary.get("sequential")
    if seq:
        stopped = "decided" if seq.get("stopped") == "decided" else "at --max-runs"
        click.echo(f"sequential: {seq.get('pairs')} pairs, {seq.get('looks')} of "
                   f"{seq.get('planned_looks')} planned looks (from {seq.get('min_pairs')} to "
                   f"{seq.get('max_pairs')} pairs), stopped {stopped}; this look's intervals "
                   f"at {100 * float(seq.get('confidence') or 0.95):.4g}%")
    click.echo(f"rule: {VERDICT_RULE}")
    _warn(summary.get("warnings") or [])


def _said(value) -> str:
    """A workload value; ``A x / B y`` where A and B were allowed to differ."""
    from ledger.evidence.workload import show

    if isinstance(value, dict) and set(value) == {"A", "B"}:
        return f"A {show(value['A'])} / B {show(value['B'])}"
    return show(value)


def _warn(warnings: list[str]) -> None:
    for w in warnings:
        click.echo(f"warning: {safe(w)}", err=True)


@click.group()
def evidence() -> None:
    """Import and inspect A/B evidence."""


@evidence.command("add")
@click.argument("ref", metavar="ID")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--side", required=True, type=click.Choice(["A", "B"]),
              help="A: the entry reverted; B: the entry applied.")
@click.option("--concurrency", type=int, help="Concurrency of results that say no load point.")
@click.option("--rate", metavar="R", help="Request rate (req/s, or inf) of results that say "
              "no load point.")
@click.option("--metric", default=PRIMARY_METRIC, show_default=True)
@click.option("--workload", "workload", multiple=True, metavar="KEY=VALUE",
              help="Keep only the results with this value of a key of the file (e.g. "
              "dataset_name=random), for a file that holds several workloads; repeatable.")
@click.option("--allow-mismatch", "allow_mismatch", multiple=True, metavar="FIELD",
              help="Compare A and B although they differ in this workload field (tool, "
              "backend, dataset, input_len, output_len, model, …); repeatable.")
@click.option("--new-run", "new_run", is_flag=True, help="Start a run of its own instead of "
              "joining the entry's latest import (the results measured another workload, or "
              "should not be repeats of the earlier ones).")
@click.option("--when", default="", metavar="TIME", help="When the bench ran (ISO 8601, UTC "
              "unless +HH:MM), for results from before the ledger knew.")
@click.option("--engine-commit", metavar="REV", help="The engine repo revision the bench ran "
              "at (default: the live one).")
@click.option("--knobs", multiple=True, metavar="K=V", help="The target's other knobs when "
              "the bench ran (repeatable; default: as live now).")
@json_option
@dry_run_option
@click.pass_context
def evidence_add(ctx, ref, files, side, concurrency, rate, metric, workload, allow_mismatch,
                 new_run, when, engine_commit, knobs, json_out, dry_run) -> None:
    """Import bench results (engine JSON, sglang bench_serving / bench_one_batch[_server] /
    bench_offline_throughput JSONL, vLLM --save-result, AIPerf and genai-perf profile
    exports, guidellm reports, llmperf summaries and per-request lists).

    A result's load point is its max_concurrency when set, else its request_rate (and a
    sweep of rates under one max_concurrency cap is a rate sweep).  Results are repeats
    only when they measured one workload: tool, backend, dataset, input/output lengths,
    num_prompts, model and the other load parameter; A and B must match too.  A bench
    run before later changes says so (--when, --engine-commit, --knobs) instead of being
    stamped with today's state; it then shows as stale against today's.
    """
    from ledger.commands.evidence import add_evidence
    from ledger.commands.evidence import check_evidence_files

    s = ctx.find_object(State).session(ctx)
    rate_value = _rate(rate)
    if dry_run:
        found = check_evidence_files(s.ws, ref, files, concurrency, rate_value, workload,
                                     allow_mismatch)
        if wants_json(ctx, json_out):
            return emit_json(found)
        for f in found["files"]:
            click.echo(f"would import {safe(f['path'])} as side {side}: {f['shape']} results, "
                       f"{f['rows']} row(s) at {_points_phrase(f)}")
        return None
    summary = add_evidence(s, ref, files, side, concurrency, metric, rate=rate_value,
                           workload=workload, allow_mismatch=allow_mismatch, when=when,
                           engine_commit=engine_commit, knobs=knobs, new_run=new_run)
    if wants_json(ctx, json_out):
        return emit_json(summary)
    click.echo(f"imported {len(files)} file(s) as side {side}: {safe(summary.get('headline'))}")


@evidence.command("note")
@click.argument("ref", metavar="ID")
@click.argument("source", metavar="FILE_OR_URL")
@click.option("--side", type=click.Choice(["A", "B"]),
              help="The note is about side A (the entry reverted) or B (applied).")
@click.option("--when", default="", metavar="TIME", help="When the note was written (ISO "
              "8601, UTC unless +HH:MM; default now).")
@json_option
@dry_run_option
@click.pass_context
def evidence_note(ctx, ref, source, side, when, json_out, dry_run) -> None:
    """Attach a markdown note (its text is copied in) or an http(s) link to an entry.

    Shown by show, diff and the rendered docs; never read as bench numbers.
    """
    from ledger.commands.evidence import attach_note

    s = ctx.find_object(State).session(ctx)
    d = attach_note(s, ref, source, side, when, dry_run=dry_run)
    if wants_json(ctx, json_out):
        return emit_json(d)
    click.echo(f"{'would note' if dry_run else 'noted'} on {d['entry']}: {safe(d['line'])}")


@evidence.command("show")
@click.argument("ref", metavar="ID")
@json_option
@click.pass_context
def evidence_show(ctx, ref, json_out) -> None:
    """The evidence table of an entry (latest run), and its headline."""
    from ledger.commands.evidence import show_evidence

    s = ctx.find_object(State).session(ctx)
    d = show_evidence(s.ws, ref)
    if wants_json(ctx, json_out):
        return emit_json(d)
    click.echo(f"{d['entry']}  {safe(d['title'])}")
    why = "; ".join(d.get("stale_why") or []) or "recorded at another engine commit or with " \
        "other knob values"
    click.echo(f"  {safe(d['headline'])}" + (f"  [stale: {safe(why)}]" if d["stale"] else ""))
    from ledger.evidence.notes import note_line

    for n in d.get("notes") or ():
        click.echo(f"  note  {safe(note_line(n))}")
    if not d["runs"]:
        return
    latest = d["runs"][-1]
    click.echo(f"  run {latest.get('run_id')} ({latest.get('source')}), "
               f"{len(d['runs'])} run(s) stored\n")
    _print_summary_table(latest)
