"""How often does the demo's A/B of its perf knob come out ``gain``, and an A/A ``neutral``,
on a busy machine?  (Issue 52: 10 A/Bs under a background load of ~3 should read ``gain``
at least 9 times, 10 A/As ``neutral`` at least 9 times.)

Runs the demo's A/B exactly as ``ledger demo`` does (its bench template, metric, load point
and knob values from :mod:`ledger.commands.demo`; A then B for each repeat after one
warm-up a side, through :func:`ledger.evidence.runner.run_alternating`), ``--trials`` times
with the knob changed (A/B) and ``--trials`` times with both sides the same (A/A), while
``--load`` busy-loop processes keep the CPUs busy (each ends by itself after
``--load-limit`` seconds at the latest, and is stopped when the script ends).  Each trial is
judged twice from the same runs: as pairs (what ``ledger ab`` does) and unpaired (the
analysis before issue 52), so the tally shows what pairing buys.

    .venv/bin/python benchmarks/ab_stability.py [--trials 10] [--runs 8] [--load 3]
        [--tolerance 2] [--output-len 192]

Each trial runs 2 + 2 x ``--runs`` benches of ~3 s on a quiet machine (more under load):
the defaults take ~15-20 minutes; ``--trials 3 --runs 5`` about 3-4.  Figures depend on the
machine and on what else runs on it: say where and under which load they were taken.

Measured once (2026-12-07, the 2-core VM shared with seven other sessions, whose load
alone was 11-20, so ``--load 0``): ``--trials 10 --runs 5`` took 2610 s; A/B paired gain
6/10, inconclusive 4/10 (unpaired: gain 7/10); A/A inconclusive 10/10 (paired and
unpaired), never a gain or a regression.  At that load a run's noise is not a slow drift
both runs of a pair share (intervals of ±25-45% on 5 pairs), so pairing did not help and
its 4 degrees of freedom cost a little against Welch's ~8.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
import time
from collections import Counter

from ledger.commands.demo import DEMO_RUNS
from ledger.commands.demo import PERF_BENCH
from ledger.commands.demo import PERF_CONCURRENCY
from ledger.commands.demo import PERF_KNOB
from ledger.commands.demo import PERF_METRIC
from ledger.evidence.headline import format_headline
from ledger.evidence.runner import Side
from ledger.evidence.runner import run_alternating
from ledger.evidence.stats import analyze


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


def one_trial(same: bool, runs: int, tolerance: float, output_len: int, engine_dir: str):
    knob, after = PERF_KNOB
    live = serve_script_env(engine_dir)  # A: the script as shipped (CTAS 16)
    side_a = Side("A", live, engine_dir)
    side_b = Side("B", live if same else {**live, knob: after}, engine_dir)
    bench = PERF_BENCH.replace("--output-len 192", f"--output-len {output_len}")
    result = run_alternating(bench, side_a, side_b, [int(PERF_CONCURRENCY)], runs)
    paired = analyze(result.rows, PERF_METRIC, paired=True, tolerance_pct=tolerance)
    unpaired = analyze(result.rows, PERF_METRIC, tolerance_pct=tolerance)
    return paired, unpaired


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="A/Bs and A/As each (default 10)")
    ap.add_argument("--runs", type=int, default=DEMO_RUNS, help="runs a side per trial")
    ap.add_argument("--load", type=int, default=3, help="busy-loop processes (default 3)")
    ap.add_argument("--load-limit", type=float, default=3600.0,
                    help="seconds after which the busy loops end by themselves")
    ap.add_argument("--tolerance", type=float, default=2.0, help="tolerance in %% (2)")
    ap.add_argument("--output-len", type=int, default=192, help="tokens decoded a run")
    args = ap.parse_args(argv)
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.monotonic()
    load = start_load(args.load, args.load_limit)
    tallies: dict[str, Counter] = {k: Counter() for k in
                                   ("A/B paired", "A/B unpaired", "A/A paired", "A/A unpaired")}
    try:
        for i in range(args.trials):
            for kind, same in (("A/B", False), ("A/A", True)):
                started = time.monotonic()
                paired, unpaired = one_trial(same, args.runs, args.tolerance,
                                             args.output_len, engine_dir)
                tallies[f"{kind} paired"][paired["verdict"]] += 1
                tallies[f"{kind} unpaired"][unpaired["verdict"]] += 1
                print(f"{kind} {i + 1}/{args.trials} ({time.monotonic() - started:.0f} s, "
                      f"load {os.getloadavg()[0]:.1f}): paired {format_headline(paired)}"
                      f"  | unpaired {unpaired['verdict']}", flush=True)
    finally:
        stop_load(load)
    print(f"\n{args.trials} trials, {args.runs} runs a side, {args.load} busy loops, "
          f"tolerance ±{args.tolerance:g}%, {time.monotonic() - t0:.0f} s in all")
    for name, tally in tallies.items():
        print(f"  {name:13s} " + ", ".join(f"{v} {n}/{args.trials}"
                                          for v, n in sorted(tally.items())))
    goal_ab = tallies["A/B paired"]["gain"] >= 0.9 * args.trials
    goal_aa = tallies["A/A paired"]["neutral"] >= 0.9 * args.trials
    print(f"goal: A/B gain >= 9/10: {'met' if goal_ab else 'not met'}; "
          f"A/A neutral >= 9/10: {'met' if goal_aa else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
