"""How often does the demo's A/B of its perf knob come out ``gain``, and an A/A ``neutral``,
on a busy machine?  (Issue 52: 10 A/Bs under a background load of ~3 should read ``gain``
at least 9 times, 10 A/As ``neutral`` at least 9 times.)

Runs the demo's A/B exactly as ``ledger demo`` does (its bench template, metric, load point
and knob values from :mod:`ledger.commands.demo`; one warm-up a side, then pairs A B, B A,
… through :func:`ledger.evidence.runner.run_alternating`), ``--trials`` times with the knob
changed (A/B) and ``--trials`` times with both sides the same (A/A), while ``--load``
busy-loop processes keep the CPUs busy (each ends by itself after ``--load-limit`` seconds
at the latest, and is stopped when the script ends).  Each trial's runs are judged several
ways, all from the same runs: as pairs (what ``ledger ab`` does) and unpaired, at the
tolerance ``--tolerance`` (the default ±2%) and ``--wide-tolerance`` (±5%), and on the
bench's median decode speed (``decode_throughput``, what the demo judged before) beside
its fastest-step speed (``peak_decode_throughput``, what it judges now), so the tally
shows what each choice buys.

    .venv/bin/python benchmarks/ab_stability.py [--trials 10] [--runs 8] [--load 3]
        [--tolerance 2] [--wide-tolerance 5]

Each trial runs 2 + 2 x ``--runs`` benches of ~3 s on a quiet machine (5-10 s under a
load of 10 and more): the defaults take ~15-50 minutes.  Figures depend on the machine
and on what else runs on it: say where and under which load they were taken.

The goals (issue 52) and why they read as they do.  A/B: ``gain`` in at least 9 of 10, at
the default ±2%.  A/A: never a ``gain`` or ``regression`` (a false call is the error that
costs an operator), and ``neutral`` in at least 9 of 10 *at a tolerance the bench can
resolve*: neutral at ±2% from 8 pairs needs a per-pair spread of 1.4% or less (the t
interval's half-width 0.83 s plus the estimate's own 1.645 x 0.35 s must fit in 2%), which
this shared 2-core VM gives only when it is quiet; at a spread of 2-3.5% it takes ±5%.  An
A/A that reads ``inconclusive`` at ±2% is the verdict telling the truth about a noisy
machine, not failing; the default tolerance stays ±2% (see ledger.evidence.verdict).

Measured once before the fastest-step metric and the turning order (2026-12-07, the 2-core
VM shared with seven other sessions, ambient load 11-20, ``--load 0 --trials 10 --runs
5``, median TPOT): A/B paired gain 6/10; A/A inconclusive 10/10, never a false call.

Measured with them (2026-12-07 04:35-05:23, the same VM shared with seven sessions, ambient
load 14 at the start, 4-21 through the run, so ``--load 0``; ``--trials 10 --runs 8``,
2883 s): A/B gain 10/10 (paired ±2%, paired ±5%, unpaired ±2% alike; the median TPOT of
the same runs: gain 7/10, inconclusive 3/10); A/A never a gain or a regression, neutral
1/10 (the quietest trial, load 4.2: -0.2%, CI -1.3..+1.0%), inconclusive 9/10 with
intervals of ±2.5-20% (at ±5% the same).  At these loads a few whole runs are slowed
15-20% at every step (no quiet step to find), and one such run widens a pair's interval
more than any tolerance absorbs: the A/A goal needs a quieter machine, more pairs, or a
rank interval of the pairs that one outlier pair cannot stretch.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
import time
from collections import Counter
from collections import defaultdict

from ledger.commands.demo import DEMO_RUNS
from ledger.commands.demo import PERF_BENCH
from ledger.commands.demo import PERF_CONCURRENCY
from ledger.commands.demo import PERF_KNOB
from ledger.commands.demo import PERF_METRIC
from ledger.evidence.headline import format_headline
from ledger.evidence.runner import Side
from ledger.evidence.runner import run_alternating
from ledger.evidence.stats import analyze

MEDIAN_METRIC = "decode_throughput"  # 1000 / the median TPOT: what the demo judged before


def _busy(deadline: float) -> None:
    while time.time() < deadline:
        pass


def start_load(n: int, limit_s: float) -> list[multiprocessing.Process]:
    """``n`` busy-loop processes that end by themselves after ``limit_s`` seconds."""
    deadline = time.time() + limit_s
    procs = [multiprocessing.Process(target=_busy, args=(deadline,), daemon=True)
             for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def stop_load(procs: list[multiprocessing.Process]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)


def serve_script_env(engine_dir: str) -> dict[str, str]:
    """The knobs the demo's decode serve script exports: the live side of its A/B."""
    path = os.path.join(engine_dir, "engine", "scripts", "serve_decode.sh")
    with open(path, encoding="utf-8") as f:
        return dict(re.findall(r"^export ([A-Z_][A-Z0-9_]*)=(\S+)$", f.read(), re.M))


def one_trial(same: bool, runs: int, engine_dir: str) -> list[dict]:
    """The rows of one A/B (``same``: an A/A) as ``ledger demo`` measures its perf knob."""
    knob, after = PERF_KNOB
    live = serve_script_env(engine_dir)  # A: the script as shipped (CTAS 16)
    side_a = Side("A", live, engine_dir)
    side_b = Side("B", live if same else {**live, knob: after}, engine_dir)
    return run_alternating(PERF_BENCH, side_a, side_b, [int(PERF_CONCURRENCY)], runs).rows


def judgements(rows: list[dict], tolerance: float, wide: float) -> dict[str, dict]:
    """Each way the tally judges one trial's runs, by name."""
    ways = {f"paired ±{tolerance:g}%": (PERF_METRIC, True, tolerance),
            f"paired ±{wide:g}%": (PERF_METRIC, True, wide),
            f"unpaired ±{tolerance:g}%": (PERF_METRIC, False, tolerance),
            f"median TPOT paired ±{tolerance:g}%": (MEDIAN_METRIC, True, tolerance)}
    return {name: analyze(rows, metric, paired=paired, tolerance_pct=tol)
            for name, (metric, paired, tol) in ways.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="A/Bs and A/As each (default 10)")
    ap.add_argument("--runs", type=int, default=DEMO_RUNS, help="runs a side per trial")
    ap.add_argument("--load", type=int, default=3, help="busy-loop processes (default 3)")
    ap.add_argument("--load-limit", type=float, default=3600.0,
                    help="seconds after which the busy loops end by themselves")
    ap.add_argument("--tolerance", type=float, default=2.0, help="tolerance in %% (2)")
    ap.add_argument("--wide-tolerance", type=float, default=5.0,
                    help="the second tolerance the same runs are judged at, in %% (5)")
    args = ap.parse_args(argv)
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.monotonic()
    print(f"ambient load before the busy loops: {os.getloadavg()[0]:.1f}", flush=True)
    load = start_load(args.load, args.load_limit)
    tallies: dict[str, Counter] = defaultdict(Counter)
    try:
        for i in range(args.trials):
            for kind, same in (("A/B", False), ("A/A", True)):
                started = time.monotonic()
                ways = judgements(one_trial(same, args.runs, engine_dir), args.tolerance,
                                  args.wide_tolerance)
                for name, analysis in ways.items():
                    tallies[f"{kind} {name}"][analysis["verdict"]] += 1
                first, *rest = ways.items()
                print(f"{kind} {i + 1}/{args.trials} ({time.monotonic() - started:.0f} s, "
                      f"load {os.getloadavg()[0]:.1f}): {format_headline(first[1])}  | "
                      + ", ".join(f"{n}: {a['verdict']}" for n, a in rest), flush=True)
    finally:
        stop_load(load)
    print(f"\n{args.trials} trials, {args.runs} runs a side, {args.load} busy loops, "
          f"{time.monotonic() - t0:.0f} s in all, load now {os.getloadavg()[0]:.1f}")
    for name, tally in tallies.items():
        print(f"  {name:34s} " + ", ".join(f"{v} {n}/{args.trials}"
                                          for v, n in sorted(tally.items())))
    tol, wide = f"paired ±{args.tolerance:g}%", f"paired ±{args.wide_tolerance:g}%"
    ab, aa, aa_wide = tallies[f"A/B {tol}"], tallies[f"A/A {tol}"], tallies[f"A/A {wide}"]
    false_calls = sum(t["gain"] + t["regression"] for t in (aa, aa_wide))
    print(f"goals: A/B gain >= 9/10 at ±{args.tolerance:g}%: "
          f"{'met' if ab['gain'] >= 0.9 * args.trials else 'not met'}; A/A never a gain or "
          f"regression: {'met' if not false_calls else 'not met'}; A/A neutral >= 9/10 at "
          f"±{args.tolerance:g}%: {'met' if aa['neutral'] >= 0.9 * args.trials else 'not met'}"
          f", at ±{args.wide_tolerance:g}%: "
          f"{'met' if aa_wide['neutral'] >= 0.9 * args.trials else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
