"""How many runs per side does the A/B verdict need?  Ours vs a plain t-test.

Draws A/B runs from the fake bench's distribution (throughput = 1000 * (1 + shift) *
(1 + noise * N(0, 1)), one concurrency, every run independent: no drift, so nothing to
pair) in-process, and for n = 3, 4, … runs per side measures how often

* ``ledger.evidence.stats.analyze`` calls a +5% change ``gain``: unpaired, the Welch t
  interval of the change in log-throughput must lie wholly above the practical tolerance
  (``--tolerance``, the default ±2% of ``bench: tolerance_pct``; see
  :mod:`ledger.evidence.verdict`), and
* a plain two-sample Student t-test on the means (``scipy.stats.ttest_ind``, equal
  variances; p < 0.05 and mean B > mean A) calls it a gain, i.e. its interval excludes 0,

then prints the smallest n reaching 90% power for each, plus both methods' false-gain
rate on A/A data at that n (what the power costs).  The t-test answers "is there any
change?", ours "is the change larger than the tolerance?", so ours needs more runs for
the same effect (a +5% change must clear +2%, not 0): the price of never calling a
change that might be 1% a gain.

    .venv/bin/python benchmarks/ab_power.py [--shift 0.05] [--noise 0.03] [--trials 200]
        [--tolerance 2]

Measured (2026-12-07, shared VM, ``--trials 100``, +5%, 3% noise, ±2%): ours 21 runs a
side for 90% power, A/A false gains 0%; the t-test 9 runs a side, A/A false gains 1%.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
from scipy import stats

from ledger.evidence.stats import ALPHA
from ledger.evidence.stats import analyze


def draw(
    rng: np.random.Generator, n: int, shift: float, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    a = 1000.0 * (1 + noise * rng.standard_normal(n))
    b = 1000.0 * (1 + shift) * (1 + noise * rng.standard_normal(n))
    return a, b


def ours_says_gain(a: np.ndarray, b: np.ndarray, tolerance_pct: float = 2.0) -> bool:
    rows = [
        {"side": s, "concurrency": 64, "repeat": i, "output_throughput": float(v)}
        for s, vals in (("A", a), ("B", b))
        for i, v in enumerate(vals)
    ]
    return analyze(rows, tolerance_pct=tolerance_pct)["verdict"] == "gain"


def ttest_says_gain(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(stats.ttest_ind(b, a).pvalue < ALPHA and b.mean() > a.mean())


def rate(method, n: int, shift: float, noise: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return sum(method(*draw(rng, n, shift, noise)) for _ in range(trials)) / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shift", type=float, default=0.05)
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--power", type=float, default=0.90)
    ap.add_argument("--max-n", type=int, default=30)
    ap.add_argument("--tolerance", type=float, default=2.0, help="ours: tolerance in %%")
    args = ap.parse_args()
    ours = functools.partial(ours_says_gain, tolerance_pct=args.tolerance)
    t0 = time.monotonic()
    print(
        f"shift {args.shift:+.1%}, noise {args.noise:.1%}, {args.trials} trials per n, "
        f"target power {args.power:.0%}, tolerance ±{args.tolerance:g}%"
    )
    print(f"{'n/side':>6}  {'ours':>6}  {'t-test':>6}")
    needed: dict[str, int | None] = {"ours": None, "t-test": None}
    for n in range(3, args.max_n + 1):
        p_ours = rate(ours, n, args.shift, args.noise, args.trials, seed=n)
        p_t = rate(ttest_says_gain, n, args.shift, args.noise, args.trials, seed=n)
        print(f"{n:>6}  {p_ours:>6.1%}  {p_t:>6.1%}")
        for name, p in (("ours", p_ours), ("t-test", p_t)):
            if needed[name] is None and p >= args.power:
                needed[name] = n
        if all(needed.values()):
            break
    for name, method in (("ours", ours), ("t-test", ttest_says_gain)):
        n = needed[name]
        if n is None:
            print(f"{name}: not reached by n={args.max_n}")
            continue
        false_gain = rate(method, n, 0.0, args.noise, args.trials, seed=10_000 + n)
        print(
            f"{name}: {n} runs per side for {args.power:.0%} power; "
            f"A/A false-gain rate at that n: {false_gain:.1%}"
        )
    print(f"({time.monotonic() - t0:.1f}s)")


if __name__ == "__main__":
    main()
