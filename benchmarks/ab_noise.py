"""How far apart do runs of one and the same configuration land on a busy machine?  The
noise floor under the A/A goal of issue 52 (``benchmarks/ab_stability.py``).

Runs the demo's bench (:data:`ledger.commands.demo.PERF_BENCH`, its metric and load
point) ``--runs`` times in a row for each configuration (``shipped``: the decode serve
script as it ships, CTAS 16; ``knob``: the perf knob's value, CTAS 2), while ``--load``
busy loops keep the CPUs busy -- through :func:`ledger.evidence.runner.run_alternating`
with the same configuration on both sides, so exactly as ``ledger ab`` runs them.  Each
configuration runs once with address-space randomisation as the machine has it and once
without (``setarch -R``, where it exists): a run that is slow for where its memory landed
would be slow with ASLR on only; a run slowed by the machine is slow either way.

For each series it prints the values in the order they ran, their median, the runs more
than 15% below it (``slow runs``: interference only ever adds time), the robust spread
of one run (1.4826 x the MAD of the log values), and the pairs a paired A/A would need
for its interval to fit inside ±2% at that spread (:func:`ledger.evidence.verdict.
runs_to_settle`, the estimate at 0 and the signed-rank interval's efficiency) -- with the
slow runs and without them.

    .venv/bin/python benchmarks/ab_noise.py [--runs 12] [--load 3] [--tolerance 2]

Measured 2026-12-07 (a 2-core AMD EPYC VM with nothing else running; ``--load 3``).  By
hand first, 12 runs of ``knob`` a series: with ASLR 905-1710 tok/s (4 of 12 runs 30-47%
slow), 927-1762 (1 slow); without ASLR 1530-1758 (none slow), 1094-1705 (5 slow),
1077-1783 (1 slow).  Then this script (00:20 UTC, ambient load 1.5, 135 s): ``shipped``
with ASLR 807-1217 (1 slow; the rest spread 1.6% a run: ~11 pairs for a ±2% neutral),
without 778-1189 (1 slow; 7.9%: ~263 pairs); ``knob`` with ASLR 1717-1822 (none slow,
2.1%: ~18 pairs), without 1216-1832 (1 slow, 1.8%: ~14 pairs).  So the slow runs come
in spells of one to four runs whether the layout is randomised or not -- the machine's
(its virtual CPUs' share of the host), not the process's -- and even the fast runs
spread ~2% a run, which puts a ±2% neutral of an A/A at 11-18 pairs *before* a slow run
lands in one of them: past the demo's 12, and past what any interval of 12 pairs with a
30-47% slow run in it can fit inside ±2%.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time

from ab_stability import serve_script_env  # run as a script: its folder is on the path
from ab_stability import start_load
from ab_stability import stop_load

from ledger.commands.demo import PERF_BENCH
from ledger.commands.demo import PERF_CONCURRENCY
from ledger.commands.demo import PERF_KNOB
from ledger.commands.demo import PERF_METRIC
from ledger.evidence.rank_interval import robust_sd
from ledger.evidence.runner import Side
from ledger.evidence.runner import run_alternating
from ledger.evidence.verdict import RANK_EFFICIENCY
from ledger.evidence.verdict import runs_to_settle

SLOW = 0.15  # a run this far below its series' median is counted slow


def series(env: dict[str, str], runs: int, engine_dir: str, prefix: str) -> list[float]:
    """``runs`` values of the demo's metric for one configuration, in the order they ran
    (``runs`` is made even: the runs go as pairs of the same configuration)."""
    side = Side("A", env, engine_dir)
    rows = run_alternating(prefix + PERF_BENCH, side, Side("B", env, engine_dir),
                           [int(PERF_CONCURRENCY)], max(1, runs // 2)).rows
    return [float(r[PERF_METRIC]) for r in rows]


def describe(values: list[float], tolerance: float) -> str:
    """The series' values, median, slow runs, spread and the pairs a neutral would need."""
    import numpy as np

    median = float(np.median(values))
    fast = [v for v in values if v >= (1 - SLOW) * median]
    lines = [" ".join(f"{v:.0f}" for v in values),
             f"median {median:.0f}, {len(values) - len(fast)} of {len(values)} runs slow "
             f"(more than {SLOW:.0%} below it)"]
    for name, kept in (("all runs", values), ("without the slow runs", fast)):
        if len(kept) < 3:
            continue
        sd = robust_sd(np.log(kept))
        # An A/A pair's log-ratio spreads sqrt(2) x one run's.
        need = runs_to_settle(0.0, math.sqrt(2) * sd, 1 / math.sqrt(RANK_EFFICIENCY), tolerance)
        lines.append(f"{name}: a run spreads {100 * sd:.1f}%; neutral within "
                     f"±{tolerance:g}% needs ~{need if need is not None else 'more than 1000'}"
                     " pairs")
    return "\n    ".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12, help="runs of each series (default 12)")
    ap.add_argument("--load", type=int, default=3, help="busy-loop processes (default 3)")
    ap.add_argument("--tolerance", type=float, default=2.0, help="tolerance in %% (2)")
    ap.add_argument("--config", nargs="+", choices=("shipped", "knob"),
                    default=["shipped", "knob"], help="the configurations (default both)")
    args = ap.parse_args(argv)
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shipped = serve_script_env(engine_dir)
    configs = {"shipped": shipped, "knob": {**shipped, PERF_KNOB[0]: PERF_KNOB[1]}}
    layouts = {"ASLR on": ""}
    if shutil.which("setarch"):
        layouts["ASLR off"] = "setarch -R "
    print(f"ambient load before the busy loops: {os.getloadavg()[0]:.1f}", flush=True)
    load = start_load(args.load, 3600.0)
    try:
        for config in args.config:
            for layout, prefix in layouts.items():
                t0 = time.monotonic()
                values = series(configs[config], args.runs, engine_dir, prefix)
                print(f"{config}, {layout} ({time.monotonic() - t0:.0f} s, load "
                      f"{os.getloadavg()[0]:.1f}):\n    {describe(values, args.tolerance)}",
                      flush=True)
    finally:
        stop_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
