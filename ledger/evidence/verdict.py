"""The verdict of one metric at one load point: the size of the effect, with its uncertainty,
against a practical tolerance.

Pure: numbers in, a decision out; numpy and scipy are imported inside the functions.

The effect is the ratio B/A of the metric, estimated on the log scale (throughputs and
latencies are ratios by nature, and a log-ratio's interval is symmetric):

* **paired** design (``ledger ab`` runs A and B back to back for each repeat, so a pair
  shares the machine's state; imported runs whose timestamps alternate A and B): the
  per-pair log-ratios ``d_i = log(b_i / a_i)``, in which a slow spell of the machine
  lowers both runs of a pair and cancels.  From 6 pairs (at 95%: the fewest
  for which that interval exists) their Hodges-Lehmann estimate and Wilcoxon
  signed-rank interval (:mod:`ledger.evidence.rank_interval`, derivation there); below, the
  mean and its one-sample t interval (n-1 degrees of freedom);
* **unpaired** design (anything else): the difference of the two sides' mean logs and its
  Welch t interval.

Why the rank interval for every paired design it exists for, rather than only when a pair
looks like an outlier: choosing the interval after seeing which is narrower would make the
95% a fiction, and the rank interval costs little where the t interval is best (its
efficiency against t is 3/pi = 95.5% for normal log-ratios: :func:`runs_to_settle` asks
for 5% more pairs) while a lone slow run -- a busy neighbour's 15-20% on one run of a
shared machine -- moves a rank bound by at most half its distance and, from 12 pairs,
not at all (the t interval's half-width grows with it, with no limit).

``delta_pct`` is ``100 * (exp(estimate) - 1)``, the interval likewise: a change of the
metric in percent.  Not a bootstrap: with 3 to 8 runs a side a percentile bootstrap
under-covers (it has only a handful of distinct resamples); the t and rank intervals are
deterministic, so the same runs always give the same verdict without a seed.

``confidence`` is 95% unless the caller asks for another (``ledger ab --until-decided``
looks several times and spends its 5% over the looks: :mod:`ledger.evidence.sequential`).

Decision, with ``tol`` the practical tolerance (``bench: tolerance_pct`` in ledger.yaml,
:data:`DEFAULT_TOLERANCE_PCT` by default) and the interval ``[lo, hi]`` read in the metric's
good direction (a latency's change is negated first):

* ``gain``         - the whole interval above ``+tol``;
* ``regression``   - the whole interval below ``-tol``;
* ``neutral``      - the whole interval inside ``[-tol, +tol]``: *shown* to be too small to matter;
* ``inconclusive`` - the interval crosses ``±tol``, with :func:`runs_to_settle` more runs
  a side suggested; or fewer than :data:`MIN_RUNS` runs (pairs) a side, said as such.

So no verdict is stronger than the data: ``gain``/``regression`` only when the interval
excludes the tolerance band, ``neutral`` only when it fits inside it.

Why ±2% by default (``bench: tolerance_pct`` changes it): the effects operators tune for
are a few percent to a few tens (the story's +12.8% at c64, +5.7% at c96), and a +5.7%
must not read ``neutral``, so the band must sit well below 5%; a bench on a dedicated GPU
repeats to 0.5-1%, where ±2% is settled in 5-8 pairs.  Narrower would call every real
bench's jitter ``inconclusive``; wider would fold real knobs into ``neutral``.  What ±2%
asks of a bench: ``neutral`` from n pairs needs the interval, half-width ``t * s /
sqrt(n)``, inside the band with the estimate's own wobble, which at 8 pairs is a per-pair
spread ``s`` of about 1.4% or less.  A bench noisier than that (a shared 2-core VM under
load: 2-7% measured with the demo's fastest-step measure) gets ``inconclusive`` for an
A/A, with the runs that would settle it -- the truth about that machine; the remedy is a
steadier measure or more pairs, or a band the operator chooses knowingly, never a verdict
the interval does not support.

The Mann-Whitney rank test and its Holm adjustment stay in the table (``p_value``,
``p_adjusted``: a distribution-free check a reader may want beside the interval) but do not
decide: with 3 runs a side its smallest p is 0.1, so it would call the steadiest +12% a
non-result.
"""

from __future__ import annotations

import math
from typing import Any

CONFIDENCE = 0.95
POWER = 0.80  # the chance the suggested run count settles the question
DEFAULT_TOLERANCE_PCT = 2.0
MIN_RUNS = 3  # runs (or pairs) a side below which nothing is judged
MAX_SUGGESTED_RUNS = 1000  # past this, the effect sits on the tolerance's edge
RANK_EFFICIENCY = 3 / math.pi  # the signed-rank interval's efficiency against t (normal data)


def _pct(log_ratio: float) -> float:
    return 100.0 * math.expm1(log_ratio)


def _log1p_pct(pct: float) -> float:
    return math.log1p(pct / 100.0)


def effect_interval(a: Any, b: Any, paired: bool, confidence: float = CONFIDENCE,
                    rank: bool = True) -> dict[str, Any]:
    """Estimate, interval and spread of ``log(B/A)`` for positive samples ``a``, ``b``.

    ``paired``: ``a[i]`` and ``b[i]`` were measured together (equal lengths).  Returns
    ``{"est", "lo", "hi", "sd", "n", "k", "method"}`` on the log scale: ``sd`` the spread
    of one observation (a pair's log-ratio -- robust for the rank interval --, or one run's
    log, pooled over the sides), ``k`` what turns ``sd / sqrt(n)`` into the standard error
    of the method (1 paired t, 1/sqrt(3/pi) signed-rank, sqrt 2 unpaired) and ``method``
    ``signed-rank``, ``t`` or ``welch``.  ``rank=False``: the paired t interval at any
    number of pairs (what was judged before the signed-rank interval; the benchmarks
    compare the two)."""
    import numpy as np

    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if paired:
        return _paired_interval(lb - la, confidence, rank)
    na, nb = la.size, lb.size
    va = float(la.var(ddof=1)) if na > 1 else 0.0
    vb = float(lb.var(ddof=1)) if nb > 1 else 0.0
    est = float(lb.mean() - la.mean())
    se = math.sqrt(va / na + vb / nb)
    # Welch-Satterthwaite degrees of freedom (both variances zero: any df will do).
    num, den = se ** 4, (va / na) ** 2 / max(na - 1, 1) + (vb / nb) ** 2 / max(nb - 1, 1)
    df = num / den if den > 0 else na + nb - 2
    half = _t_quantile(confidence, df) * se if se > 0 else 0.0
    return {"est": est, "lo": est - half, "hi": est + half, "sd": math.sqrt((va + vb) / 2),
            "n": min(na, nb), "k": math.sqrt(2.0), "method": "welch"}


def _t_quantile(confidence: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def _paired_interval(d: Any, confidence: float, rank: bool = True) -> dict[str, Any]:
    """The per-pair log-ratios' Hodges-Lehmann estimate and signed-rank interval where it
    exists at ``confidence``, else their mean and one-sample t interval."""
    from ledger.evidence.rank_interval import robust_sd
    from ledger.evidence.rank_interval import signed_rank_interval

    n = int(d.size)
    ranked = signed_rank_interval(d, confidence) if rank else None
    if ranked is not None:
        return {"est": ranked["est"], "lo": ranked["lo"], "hi": ranked["hi"], "sd": robust_sd(d),
                "n": n, "k": 1 / math.sqrt(RANK_EFFICIENCY), "method": "signed-rank"}
    est = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    half = _t_quantile(confidence, n - 1) * sd / math.sqrt(n) if sd > 0 else 0.0
    return {"est": est, "lo": est - half, "hi": est + half, "sd": sd, "n": n, "k": 1.0,
            "method": "t"}


def runs_to_settle(est: float, sd: float, k: float, tol_pct: float,
                   confidence: float = CONFIDENCE) -> int | None:
    """Runs a side (pairs, when paired) that would settle a crossing interval with
    :data:`POWER`: the normal-approximation sample size ``((z_a + z_b) * k * sd / margin)^2``
    where ``margin`` is how far the estimate sits from the tolerance's edge.  None when the
    estimate is (practically) on the edge: no affordable run count settles it."""
    from scipy import stats

    margin = abs(abs(est) - _log1p_pct(tol_pct))
    if sd <= 0:
        return None
    if margin <= 0:
        return None
    z = float(stats.norm.ppf(0.5 + confidence / 2) + stats.norm.ppf(POWER))
    n = math.ceil((z * k * sd / margin) ** 2)
    return n if n <= MAX_SUGGESTED_RUNS else None


def judge_cell(a: Any, b: Any, higher_is_better: bool, *, paired: bool,
               tol_pct: float = DEFAULT_TOLERANCE_PCT, confidence: float = CONFIDENCE,
               rank: bool = True) -> dict[str, Any]:
    """Delta, interval and verdict of one metric at one load point (rules in the module docs).

    ``a``, ``b``: the sides' finite values (pairs in order when ``paired``).  Returns
    ``delta_pct``, ``ci_low_pct``, ``ci_high_pct``, ``verdict``, ``design`` (``paired`` /
    ``unpaired``), ``interval`` (``signed-rank``, ``t``, ``welch``), ``tolerance_pct``,
    ``confidence`` (only when not 95%) and, for an interval that crosses the tolerance,
    ``runs_needed`` (runs a side in all, None when no affordable count settles it)."""
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out: dict[str, Any] = {"delta_pct": None, "ci_low_pct": None, "ci_high_pct": None,
                           "verdict": "inconclusive", "design": "paired" if paired else
                           "unpaired", "tolerance_pct": float(tol_pct)}
    if (a <= 0).any() or (b <= 0).any():
        return out  # a change in % is not defined
    if min(a.size, b.size) < MIN_RUNS:
        # Too few runs for an interval: the medians' change is shown, nothing is judged.
        if a.size and b.size:
            out["delta_pct"] = 100.0 * (float(np.median(b)) / float(np.median(a)) - 1.0)
        return out
    eff = effect_interval(a, b, paired, confidence, rank)
    out.update(delta_pct=_pct(eff["est"]), ci_low_pct=_pct(eff["lo"]),
               ci_high_pct=_pct(eff["hi"]), interval=eff["method"])
    if confidence != CONFIDENCE:
        out["confidence"] = confidence
    tol = float(tol_pct)
    # The interval in the good direction: a latency going down is a gain.
    lo, hi = (out["ci_low_pct"], out["ci_high_pct"]) if higher_is_better else \
        (-out["ci_high_pct"], -out["ci_low_pct"])
    if lo > tol:
        out["verdict"] = "gain"
    elif hi < -tol:
        out["verdict"] = "regression"
    elif -tol <= lo and hi <= tol:
        out["verdict"] = "neutral"
    else:
        need = runs_to_settle(eff["est"], eff["sd"], eff["k"], tol, confidence)
        out["runs_needed"] = None if need is None else max(need, eff["n"] + 1)
    return out


def cell_reason(cell: dict[str, Any]) -> str | None:
    """Why a cell is what it is, in the reader's words: ``clear of ±2%``, ``within ±2%``,
    ``crosses ±2%: need ~12 more runs a side``, ``fewer than 3 runs a side``."""
    verdict = cell.get("verdict")
    tol = f"±{cell.get('tolerance_pct', DEFAULT_TOLERANCE_PCT):g}%"
    unit = "pairs" if cell.get("design") == "paired" else "runs a side"
    if verdict in ("gain", "regression"):
        return f"clear of {tol}"
    if verdict == "neutral":
        return f"within {tol}"
    if cell.get("ci_low_pct") is None:
        if min(int(cell.get("n_a") or 0), int(cell.get("n_b") or 0)) >= MIN_RUNS:
            return "a value of 0 or below: no change in % is defined"
        return f"fewer than {MIN_RUNS} runs a side"
    need = cell.get("runs_needed")
    n = min(int(cell.get("n_a") or 0), int(cell.get("n_b") or 0))
    if need is None:
        # The estimate sits on the tolerance's edge, or the spread is so wide that no
        # affordable count settles it: say so instead of a number nobody would run.
        return f"crosses {tol}: more than {MAX_SUGGESTED_RUNS} {unit} would not settle it " \
            "at this spread"
    return f"crosses {tol}: need ~{max(need - n, 1)} more {unit}"


__all__ = ["CONFIDENCE", "DEFAULT_TOLERANCE_PCT", "MIN_RUNS", "cell_reason",
           "effect_interval", "judge_cell", "runs_to_settle"]
