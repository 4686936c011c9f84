"""How often does the demo's A/B of its perf knob come out ``gain``, and an A/A ``neutral``,
on a busy machine?  (Issue 52: 10 A/Bs under a background load of ~3 should read ``gain``
at least 9 times, 10 A/As ``neutral`` at least 9 times.)

Runs the demo's A/B exactly as ``ledger demo`` does (its bench template, metric, load point
and knob values from :mod:`ledger.commands.demo`; one warm-up a side, then pairs A B, B A,
… through :func:`ledger.evidence.runner.run_alternating`), ``--trials`` times with the knob
changed (A/B) and ``--trials`` times with both sides the same (A/A: ``--aa shipped``, both
as the serve script ships, CTAS 16; ``--aa knob``, both at the knob's value, CTAS 2; by
default each trial runs both), while ``--load``
busy-loop processes keep the CPUs busy (each ends by itself after ``--load-limit`` seconds
at the latest, and is stopped when the script ends).  Each trial runs ``--runs`` +
``--more`` pairs and judges them several ways, all from the same runs:

* ``ab now``: the first ``--runs`` pairs as ``ledger ab --runs N`` judges them (paired,
  Hodges-Lehmann with the signed-rank interval, ±``--tolerance``);
* ``demo now``: the looks ``ledger demo``'s ``ab --until-decided --max-runs N+M`` makes,
  replayed on the runs in the order they ran (:func:`ledger.evidence.sequential.replay`:
  a sequential A/B that stopped after k pairs saw exactly the first k), with the pairs it
  stopped at;
* ``ab before``: the same pairs under the paired t interval judged before;
* beside them: signed-rank at ``--wide-tolerance`` (±5%), unpaired (Welch), and the median
  decode speed (``decode_throughput``) instead of the fastest step.

    .venv/bin/python benchmarks/ab_stability.py [--trials 10] [--runs 8] [--more 4]
        [--load 3] [--tolerance 2] [--wide-tolerance 5] [--aa shipped knob]

Each comparison (the A/B, each A/A) runs 2 + 2 x (``--runs`` + ``--more``) benches of
~3 s on a quiet machine (5-10 s under a load of 10 and more): the defaults take ~30-100
minutes.  Figures depend on the machine and on what else runs on it: say where and under
which load they were taken.

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

With the signed-rank interval and the sequential demo (2026-12-07 11:13-11:39, the VM
shared with 3 other helpers' builds and tests, ambient load 6.7 at the start, 15-20 through
the run, plus ``--load 3``; ``--trials 3 --runs 8``, 12 pairs a trial, 1343 s): A/B gain
3/3 every way but the median TPOT (2/3), ``demo now`` decided after 8 pairs each time
(+44.6..+60.2%); A/A inconclusive 3/3 every way, never a false call (HL -2.6..+6.7%,
intervals ±7-15% wide: at a load of 15-20 several runs of each trial were slowed, more
than one pair in 8 or 12, which no interval of 12 pairs absorbs).  A short, loaded run:
the integrator's 10-trial run on a quieter machine is the measurement.

Where the A/A's spread comes from (2026-12-07 13:59-14:07, 2 cores, ``--load``-style 3 busy
loops, ambient load 2-4; 9 rounds of A, A, B on the demo's bench, every decode step's time
kept): the fastest step of the shipped side (CTAS 16, ~1.4 ms a step) spread 8-9% from run
to run (571-747 tok/s) and 10.9% within an A/A pair (-21.6..+16.3%), the knob's side (CTAS 2,
~0.95 ms) 1.5% (1012-1059).  The slow runs are slow at every step (their 10th percentile
fell with their fastest), so neither the mean of the fastest 10% (A/A spread 21.7%) nor a
low percentile (p05 22.8%, p10 29.3%) was steadier than the fastest step, and one thread
was checked to run the whole step (``top -H``: one busy thread).  At 11% a pair, an
interval inside ±2% needs some 100 pairs: at such a spread an A/A of this bench can only
read ``inconclusive``, which is what it says (never a false call).

The tally with all of it (2026-12-07, ``--trials 10 --runs 8 --load 3``, 1069 s, ambient
load ~4 before the busy loops): A/B ``gain`` 10/10; A/A ``neutral`` 8/10 and
``inconclusive`` 2/10 (-19.5..+9.3% and -6.4..+27.4%: the last two trials, which ran 30-40%
slower than the first eight), never a false call.

Both A/As in one tally (2026-12-07 17:04-17:37, ``--trials 10 --runs 8 --load 3``, 1957 s,
ambient load 1.2 before the busy loops, 4.0-4.2 through the run): A/B ``gain`` 10/10 every
way (+40..+80%); A/A never a false call, but neutral only 1/10 as shipped (CTAS 16) and
3/10 at the knob's value (CTAS 2; the sequential demo's 12 pairs 5/10), the rest
``inconclusive`` with intervals of ±5-25%.  The same hour's quick check (8 runs a side
under 3 busy loops) spread 10.7% at CTAS 16 and 0.6% at CTAS 2; with glibc's malloc
thresholds pinned CTAS 16 still spread 7.3%, slow in the same rounds (so not mainly the
per-step allocations): the split path (for the tiny preset, torch's eager ops: a gather
of the whole context per layer per step) is moved by whatever else the host runs, the
unsplit dense path far less, but at this hour not enough for ±2% either.  The A/A goal
is not met on this VM: it needs a quieter machine than a shared 2-core VM gives, and the
verdict says so (``inconclusive``, with the pairs it would take) instead of a neutral it
cannot show.

A quiet VM of its own (2026-12-07 23:59-00:09, nothing else running, ambient load 0.7,
``--trials 10 --runs 8 --load 3``, stopped after 3 trials, 9 comparisons of ~60 s, load
3.1-4.1): A/B ``gain`` 3/3 (+40.9..+54.1%, decided after 8 pairs each time); A/A never a
false call, ``neutral`` 0/6: as shipped -1.4% (CI -4.0..+1.2%), -0.5% (-6.0..+18.0%),
-1.4% (-17.8..+0.8%); at the knob's value -0.1% (-13.8..+13.9%), +0.8% (-17.2..+35.1%),
-0.3% (-17.4..+9.1%), all after 12 pairs.  Why, run by run: ``benchmarks/ab_noise.py``
(spells of runs 30-47% slow with or without address-space randomisation, and ~2% a run
between the fast ones: a ±2% neutral is 11-18 pairs away before a slow run lands).
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

from ledger.commands.demo import DEMO_MORE_PAIRS
from ledger.commands.demo import DEMO_RUNS
from ledger.commands.demo import PERF_BENCH
from ledger.commands.demo import PERF_CONCURRENCY
from ledger.commands.demo import PERF_KNOB
from ledger.commands.demo import PERF_METRIC
from ledger.evidence.headline import format_headline
from ledger.evidence.runner import Side
from ledger.evidence.runner import run_alternating
from ledger.evidence.sequential import replay
from ledger.evidence.sequential import rows_of_first_pairs
from ledger.evidence.stats import analyze
from ledger.evidence.verdict import judge_cell

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


def one_trial(kind: str, pairs: int, engine_dir: str) -> list[dict]:
    """The rows of one comparison as ``ledger demo`` measures its perf knob: ``A/B`` (the
    script as shipped against the knob's value), or an A/A with both sides as shipped
    (``A/A shipped``) or both at the knob's value (``A/A knob``)."""
    knob, after = PERF_KNOB
    live = serve_script_env(engine_dir)  # the script as shipped (CTAS 16)
    changed = {**live, knob: after}
    a, b = {"A/B": (live, changed), "A/A shipped": (live, live),
            "A/A knob": (changed, changed)}[kind]
    return run_alternating(PERF_BENCH, Side("A", a, engine_dir), Side("B", b, engine_dir),
                           [int(PERF_CONCURRENCY)], pairs).rows


def t_verdict(rows: list[dict], metric: str, tolerance: float) -> str:
    """The verdict of the paired t interval (judged before the signed-rank interval)."""
    by = {(r["side"], r["repeat"]): r[metric] for r in rows}
    pairs = sorted({r["repeat"] for r in rows})
    return judge_cell([by["A", i] for i in pairs], [by["B", i] for i in pairs], True,
                      paired=True, tol_pct=tolerance, rank=False)["verdict"]


def judgements(rows: list[dict], runs: int, more: int, tolerance: float,
               wide: float) -> dict[str, tuple[str, str]]:
    """Each way the tally judges one trial's runs: name -> (verdict, what to print)."""
    first = rows_of_first_pairs(rows, runs)
    now = analyze(first, PERF_METRIC, paired=True, tolerance_pct=tolerance)
    seq = replay(rows, runs, runs + more, lambda r, c: analyze(
        r, PERF_METRIC, paired=True, tolerance_pct=tolerance, confidence=c))
    demo = {**seq.analysis, "sequential": seq.record()}
    ways = {f"ab now (signed-rank ±{tolerance:g}%)": (now["verdict"], format_headline(now)),
            f"demo now (until decided, {runs}..{runs + more})":
                (demo["verdict"], format_headline(demo)),
            f"ab before (paired t ±{tolerance:g}%)":
                (t_verdict(first, PERF_METRIC, tolerance), "")}
    for name, metric, paired, tol in (
            (f"signed-rank ±{wide:g}%", PERF_METRIC, True, wide),
            (f"unpaired ±{tolerance:g}%", PERF_METRIC, False, tolerance),
            (f"median TPOT paired ±{tolerance:g}%", MEDIAN_METRIC, True, tolerance)):
        ways[name] = (analyze(first, metric, paired=paired, tolerance_pct=tol)["verdict"], "")
    return ways


def run_trials(args: argparse.Namespace, engine_dir: str) -> dict[str, Counter]:
    """Every trial, printed as it ends; the tallies by way of judging."""
    tallies: dict[str, Counter] = defaultdict(Counter)
    for i in range(args.trials):
        for kind in ("A/B", *(f"A/A {side}" for side in args.aa)):
            started = time.monotonic()
            rows = one_trial(kind, args.runs + args.more, engine_dir)
            ways = judgements(rows, args.runs, args.more, args.tolerance, args.wide_tolerance)
            for name, (verdict, _) in ways.items():
                tallies[f"{kind} {name}"][verdict] += 1
            print(f"{kind} {i + 1}/{args.trials} ({time.monotonic() - started:.0f} s, load "
                  f"{os.getloadavg()[0]:.1f}):", flush=True)
            for name, (verdict, line) in ways.items():
                print(f"    {name}: {line or verdict}", flush=True)
    return tallies


def print_tallies(args: argparse.Namespace, tallies: dict[str, Counter]) -> None:
    """The tally of every way, then the issue's goals for what ab and demo now do."""
    for name, tally in tallies.items():
        print(f"  {name:46s} " + ", ".join(f"{v} {n}/{args.trials}"
                                          for v, n in sorted(tally.items())))
    enough = 0.9 * args.trials
    for way in (f"ab now (signed-rank ±{args.tolerance:g}%)",
                f"demo now (until decided, {args.runs}..{args.runs + args.more})"):
        ab = tallies[f"A/B {way}"]
        said = [f"A/B gain {ab['gain']}/{args.trials} "
                f"(goal 9 in 10: {'met' if ab['gain'] >= enough else 'not met'})"]
        for side in args.aa:
            aa = tallies[f"A/A {side} {way}"]
            said.append(f"A/A {side} neutral {aa['neutral']}/{args.trials} (goal 9 in 10: "
                        f"{'met' if aa['neutral'] >= enough else 'not met'}), false calls "
                        f"{aa['gain'] + aa['regression']}")
        print(f"{way}: " + "; ".join(said))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="A/Bs and A/As each (default 10)")
    ap.add_argument("--runs", type=int, default=DEMO_RUNS, help="pairs a fixed A/B runs, and "
                    "the first look of the sequential one (default: the demo's)")
    ap.add_argument("--more", type=int, default=DEMO_MORE_PAIRS, help="pairs the sequential "
                    "A/B may add (default: the demo's)")
    ap.add_argument("--load", type=int, default=3, help="busy-loop processes (default 3)")
    ap.add_argument("--load-limit", type=float, default=3600.0,
                    help="seconds after which the busy loops end by themselves")
    ap.add_argument("--tolerance", type=float, default=2.0, help="tolerance in %% (2)")
    ap.add_argument("--wide-tolerance", type=float, default=5.0,
                    help="the second tolerance the same runs are judged at, in %% (5)")
    ap.add_argument("--aa", nargs="+", choices=("shipped", "knob"),
                    default=["shipped", "knob"], help="the A/As each trial runs: both sides "
                    "as the script ships (CTAS 16), both at the knob's value (CTAS 2); "
                    "default both")
    args = ap.parse_args(argv)
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.monotonic()
    print(f"ambient load before the busy loops: {os.getloadavg()[0]:.1f}", flush=True)
    load = start_load(args.load, args.load_limit)
    try:
        tallies = run_trials(args, engine_dir)
    finally:
        stop_load(load)
    print(f"\n{args.trials} trials, {args.runs} pairs (+ up to {args.more} until decided), "
          f"{args.load} busy loops, {time.monotonic() - t0:.0f} s in all, load now "
          f"{os.getloadavg()[0]:.1f}")
    print_tallies(args, tallies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
