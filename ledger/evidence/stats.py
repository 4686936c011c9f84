"""A/B statistics: from a runs table to per-concurrency deltas, intervals and a verdict.

Pure: no files, no clock, no printing.  numpy, pandas and scipy are imported inside the
functions so that importing this module (and ``ledger --help``) stays cheap.

Input is a *runs table*: one row per side x load point x repeat, as mappings (or a
DataFrame) with ``side`` (``A`` = entry reverted, ``B`` = entry applied), the load point --
``concurrency`` (closed loop) or ``rate`` (open loop, requests/s, ``inf`` allowed; see
:mod:`ledger.evidence.load`), one kind per table -- ``repeat``, numeric bench metrics, and
optionally ``output_digest``.  "Concurrency" below stands for whichever load point the
table has: a rate sweep is judged per rate exactly as a concurrency sweep per concurrency.

Per concurrency and metric we report
  * ``median_a``, ``median_b`` (the imported / measured numbers, never altered);
  * ``delta_pct`` and its 95% interval ``ci_low_pct..ci_high_pct``, the ``verdict``, the
    ``design`` (``paired`` / ``unpaired``), the ``tolerance_pct`` and, for an interval
    that crosses the tolerance, ``runs_needed``: :mod:`ledger.evidence.verdict` decides;
  * the two-sided Mann-Whitney U p-value (``scipy.stats.mannwhitneyu``), Holm-adjusted
    across the concurrencies of that metric (scipy has no Holm step-down, so it is the
    five lines in :func:`_holm`): reported beside the interval, not deciding.

Pairing: ``ledger ab`` runs A then B for each repeat at a load point, so ``analyze(...,
paired=True)`` pairs them by repeat and judges the per-pair log-ratios, in which a slow
spell of a shared machine cancels (from 6 pairs by their signed-rank interval, which one
slow run cannot stretch: :mod:`ledger.evidence.verdict`).  Imported runs pair when each has a ``run_time`` and
the sides alternate in time (:func:`_pairs`); otherwise they are judged unpaired.

Metric direction comes from the name: ``*_ms`` is a latency (lower is better);
``*throughput*``, ``*goodput*`` and ``*_per_s`` are rates (higher is better).  Columns
with neither (``duration``, ``completed``, token counts, ``run_time``) are kept in
``runs.csv`` but not judged.

The entry verdict looks only at the primary metric (default ``output_throughput``):
``regression`` when any load point is one; ``gain`` when at least one is a gain (and none
is a regression); ``neutral`` when every point is shown neutral; ``inconclusive``
otherwise.  Other metrics carry their own per-point verdicts and do not change the entry
verdict, except **guards** (``bench: guards:`` in ledger.yaml, e.g. ``p99_itl_ms``): a
guard metric judged a regression at any point vetoes a gain, and the entry is a
regression (:func:`guard_veto`).  Judging twenty correlated metrics at once would
multiply false alarms; the operator chooses the few that matter.

Outputs: ``identical`` when, at every concurrency that has digests, A and B produced one
and the same ``output_digest``; ``differ`` when any concurrency shows two digests;
``unknown`` when the bench gave none (or only one side did).
The headline line of a summary is :mod:`ledger.evidence.headline`.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING
from typing import Any
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.errors import EvidenceError
from ledger.evidence.defaults import PRIMARY_METRIC
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import KINDS
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.runs_csv import DIGEST_COLUMN
from ledger.evidence.runs_csv import ID_COLUMNS
from ledger.evidence.runs_csv import RUN_TIME
from ledger.evidence.verdict import CONFIDENCE
from ledger.evidence.verdict import DEFAULT_TOLERANCE_PCT
from ledger.evidence.verdict import MIN_RUNS
from ledger.evidence.verdict import judge_cell

if TYPE_CHECKING:
    import pandas as pd

ALPHA = 0.05
SIDES = ("A", "B")
VERDICTS = ("gain", "neutral", "regression", "inconclusive")


def metric_direction(name: str) -> bool | None:
    """True when higher is better, False when lower is better, None when not a judged metric
    (the rule is :func:`ledger.core.guards.name_direction`'s)."""
    from ledger.core.guards import name_direction

    direction = name_direction(name)
    return None if direction is None else direction == "higher"


def load_column(df: "pd.DataFrame") -> str:
    """``concurrency`` or ``rate``: the load point a runs table is measured at."""
    has = [c for c in KINDS if c in df.columns and df[c].notna().any()]
    if len(has) > 1:
        raise EvidenceError(
            "runs table mixes concurrency and rate load points: judge them separately"
        )
    return has[0] if has else CONCURRENCY


def runs_frame(rows: Iterable[Mapping[str, Any]] | "pd.DataFrame") -> "pd.DataFrame":
    """Validate a runs table and return it as a DataFrame with typed id columns."""
    import pandas as pd

    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        return pd.DataFrame(columns=["side", CONCURRENCY, "repeat"])
    load = load_column(df)
    missing = [c for c in ("side", load, "repeat") if c not in df.columns]
    if missing:
        raise EvidenceError(f"runs table lacks column(s) {', '.join(missing)}")
    bad_sides = sorted(set(df["side"].astype(str)) - set(SIDES))
    if bad_sides:
        raise EvidenceError(f"runs table has unknown side(s) {bad_sides}: use A or B")
    df["side"] = df["side"].astype(str)
    other = RATE if load == CONCURRENCY else CONCURRENCY
    if other in df.columns:
        df = df.drop(columns=[other])
    try:
        df[load] = df[load].astype(int if load == CONCURRENCY else float)
        df["repeat"] = df["repeat"].astype(int)
    except (TypeError, ValueError) as e:
        raise EvidenceError(
            f"runs table: {load} must be a number and repeat an integer ({e})"
        ) from e
    if load == RATE and not (df[RATE] > 0).all():
        raise EvidenceError("runs table: a request rate must be > 0 (or inf)")
    return df


def judged_metrics(df: "pd.DataFrame") -> list[str]:
    """Numeric columns whose direction is known, sorted for a stable report."""
    import pandas as pd

    out = []
    for col in df.columns:
        if col in ID_COLUMNS or col in KINDS or col == DIGEST_COLUMN:
            continue
        if metric_direction(col) is None:
            continue
        if pd.api.types.is_numeric_dtype(df[col]):
            out.append(col)
    return sorted(out)


def _mann_whitney(a: Any, b: Any) -> float:
    import numpy as np
    from scipy import stats

    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0  # every value identical: no evidence of any difference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def _holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (family-wise error control), in input order."""
    m = len(pvalues)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: pvalues[k])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def compare_metric(a: Any, b: Any, higher_is_better: bool, *, paired: bool = False,
                   tol_pct: float = DEFAULT_TOLERANCE_PCT,
                   confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Medians, delta %, its interval, verdict and raw Mann-Whitney p for one metric at
    one load point (:func:`ledger.evidence.verdict.judge_cell` decides).

    ``paired``: ``a[i]`` and ``b[i]`` ran together (a pair with a non-finite value on
    either side is dropped).  ``p_adjusted`` is filled in by :func:`analyze`.
    """
    import numpy as np

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if paired and a.size == b.size:
        keep = np.isfinite(a) & np.isfinite(b)
        a, b = a[keep], b[keep]
    else:
        paired = False
        # Sorted: the result must not depend on the order rows were stored in.
        a = np.sort(a[np.isfinite(a)])
        b = np.sort(b[np.isfinite(b)])
    out: dict[str, Any] = {
        "median_a": float(np.median(a)) if a.size else None,
        "median_b": float(np.median(b)) if b.size else None,
        "p_value": None,
        "higher_is_better": higher_is_better,
        "n_a": int(a.size),
        "n_b": int(b.size),
    }
    out.update(judge_cell(a, b, higher_is_better, paired=paired, tol_pct=tol_pct,
                          confidence=confidence))
    if out["ci_low_pct"] is not None:
        out["p_value"] = _mann_whitney(a, b)
    return out


def _pairs(side_a: "pd.DataFrame", side_b: "pd.DataFrame", by_repeat: bool):
    """Row positions ``(ia, ib)`` of A/B pairs that ran together, or None (unpaired).

    ``by_repeat``: ``ledger ab`` ran A then B for each repeat, so repeat ``r`` of A and of B
    are a pair.  Otherwise runs pair only when every run has a ``run_time`` (imported
    results that carry their date) and, in time order, each couple of runs (1st and 2nd,
    3rd and 4th, …) is one A and one B -- A B A B, B A B A, or A B B A as ``ledger ab``
    runs them: each couple is a pair.  Anything else is analysed unpaired.
    """
    if by_repeat:
        ra, rb = list(side_a["repeat"]), list(side_b["repeat"])
        common = sorted(set(ra) & set(rb))
        if len(ra) != len(set(ra)) or len(rb) != len(set(rb)) or not common:
            return None
        return [(ra.index(r), rb.index(r)) for r in common]
    if RUN_TIME not in side_a.columns or len(side_a) != len(side_b) or side_a.empty:
        return None
    times = [(t, s, i) for s, frame in (("A", side_a), ("B", side_b))
             for i, t in enumerate(frame[RUN_TIME])]
    if any(t is None or t != t for t, _, _ in times):  # a missing (NaN) time
        return None
    times.sort()
    order = [s for _, s, _ in times]
    if any(order[k] == order[k + 1] for k in range(0, len(order), 2)):
        return None
    pairs = []
    for k in range(0, len(times), 2):
        (_, s1, i1), (_, _, i2) = times[k], times[k + 1]
        pairs.append((i1, i2) if s1 == "A" else (i2, i1))
    return pairs


def analyze(
    rows: Iterable[Mapping[str, Any]] | "pd.DataFrame",
    metric: str = PRIMARY_METRIC,
    *,
    paired: bool = False,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    guards: Sequence[str] = (),
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """Judge a runs table.

    ``paired``: the rows come from ``ledger ab`` (A then B for each repeat): each repeat's
    A and B are analysed as a pair.  Without it, runs pair only by their ``run_time``
    (see :func:`_pairs`).  ``tolerance_pct``: the practical tolerance of the verdict.
    ``guards``: metrics that veto a gain (see :func:`entry_verdict`).  ``confidence``: of
    every interval (95%; a sequential A/B's looks ask for more).

    Returns ``{"metric", "higher_is_better", "verdict", "outputs", "warnings", "load",
    "tolerance_pct", "guards", "veto", "by_concurrency"}`` (``warnings``:
    :func:`power_warnings` of the primary metric; ``veto``: the guard cell that turned
    the verdict, or None) where ``load`` is ``concurrency`` or ``rate`` and
    ``by_concurrency`` is a list (ascending load) of ``{LOAD: value, "n_a", "n_b",
    "metrics": {name: {...}}}`` as in summary.yaml.
    Raises EvidenceError when the primary metric (or a guard) is not a judged metric.
    """
    direction = metric_direction(metric)
    tol = check_tolerance(tolerance_pct)
    df, metrics = _judged_table(rows, metric, direction)
    guards = _checked_guards(guards)
    tol_of = {name: tol for name in metrics}
    tol_of.update({g.metric: g.max_change_pct for g in guards if g.max_change_pct is not None})
    load = load_column(df)
    by_conc = [_judge_point(load, value, group, metrics, paired, tol_of, confidence)
               for value, group in sorted(df.groupby(load), key=lambda kv: kv[0])]
    _adjust_p_values(by_conc, metrics)
    primary = [b["metrics"][metric] for b in by_conc if metric in b["metrics"]]
    verdict = entry_verdict(c["verdict"] for c in primary)
    critical = [g.metric for g in guards if g.critical]
    veto = guard_veto(by_conc, load, critical) if verdict != "regression" else None
    return {
        "metric": metric,
        "higher_is_better": direction,
        "verdict": "regression" if veto else verdict,
        "outputs": outputs_check(df),
        "warnings": power_warnings((c["n_a"], c["n_b"]) for c in primary) +
        _soft_guard_notes(by_conc, load, [g.metric for g in guards if not g.critical]),
        "load": load,
        "tolerance_pct": tol,
        "guards": [g.metric for g in guards],
        "veto": veto,
        "by_concurrency": by_conc,
    }


def _judged_table(rows: Any, metric: str,
                  direction: bool | None) -> tuple["pd.DataFrame", list[str]]:
    """The runs table and its judged metrics, or EvidenceError when the primary metric has
    no direction or no column."""
    if direction is None:
        raise EvidenceError(
            f"cannot judge {metric!r}: the primary metric must be a rate "
            "(…throughput, …_per_s: higher is better) or a latency (…_ms: lower is better)"
        )
    df = runs_frame(rows)
    metrics = judged_metrics(df)
    if len(df) and metric not in metrics:
        raise EvidenceError(
            f"the runs have no {metric!r} column; judged metrics present: "
            + (", ".join(metrics) or "none")
        )
    return df, metrics


def _judge_point(load: str, value: Any, group: "pd.DataFrame", metrics: Sequence[str],
                 paired: bool, tol_of: Mapping[str, float],
                 confidence: float) -> dict[str, Any]:
    """One load point's block: its runs (as pairs where they ran as pairs) judged for each
    metric at that metric's tolerance."""
    side_a = group[group["side"] == "A"].reset_index(drop=True)
    side_b = group[group["side"] == "B"].reset_index(drop=True)
    pairs = _pairs(side_a, side_b, paired)
    if pairs is not None:
        side_a = side_a.iloc[[i for i, _ in pairs]]
        side_b = side_b.iloc[[j for _, j in pairs]]
    point = LoadPoint(load, float(value)).row_value
    block = {load: point, "n_a": len(side_a), "n_b": len(side_b), "metrics": {}}
    for name in metrics:
        cmp = compare_metric(
            side_a[name].to_numpy(), side_b[name].to_numpy(), bool(metric_direction(name)),
            paired=pairs is not None, tol_pct=tol_of[name], confidence=confidence,
        )
        if cmp["n_a"] == 0 and cmp["n_b"] == 0:
            continue  # this bench did not report the metric at this concurrency
        block["metrics"][name] = cmp
    return block


def _adjust_p_values(by_conc: list[dict[str, Any]], metrics: Sequence[str]) -> None:
    """Holm across load points, separately for each metric (reported, not deciding)."""
    for name in metrics:
        cells = [b["metrics"][name] for b in by_conc if name in b["metrics"]]
        tested = [c for c in cells if c["p_value"] is not None]
        for cell, p_adj in zip(tested, _holm([c["p_value"] for c in tested]), strict=True):
            cell["p_adjusted"] = p_adj


def _checked_guards(guards: Sequence[Any]) -> list[Any]:
    """Guards as :class:`ledger.core.guards.Guard` (a name is a critical guard judged with
    the run's tolerance), or EvidenceError naming the one that is no judged metric."""
    from ledger.core.guards import as_guard
    from ledger.errors import InvalidValue

    out = []
    for g in guards:
        try:
            out.append(as_guard(g))
        except InvalidValue:
            raise EvidenceError(f"cannot guard with {getattr(g, 'metric', g)!r}: a guard "
                                "metric is a rate (…throughput) or a latency (…_ms)") from None
    return out


def check_tolerance(tolerance_pct: Any) -> float:
    """The practical tolerance as a float in (0, 100), or EvidenceError naming the value."""
    try:
        tol = float(tolerance_pct)
    except (TypeError, ValueError):
        tol = float("nan")
    if not (0 < tol < 100):
        raise EvidenceError(f"tolerance_pct must be a number of percent in (0, 100), "
                            f"got {tolerance_pct!r}")
    return tol


def guard_veto(by_conc: list[dict[str, Any]], load: str,
               guards: Sequence[str]) -> dict[str, Any] | None:
    """The first guard metric cell (guards in the order given, load points ascending) whose
    own verdict is ``regression``, as ``{"metric", LOAD, "delta_pct", "ci_low_pct",
    "ci_high_pct"}``; None when no guard regressed.  A gain in throughput that costs a
    regression of a guarded latency (p99 ITL, TTFT) is not a gain: the entry is judged
    a regression and the headline says which guard and where."""
    for name in guards:
        for block in by_conc:
            cell = block["metrics"].get(name)
            if cell and cell["verdict"] == "regression":
                return {"metric": name, load: block[load], "delta_pct": cell["delta_pct"],
                        "ci_low_pct": cell["ci_low_pct"], "ci_high_pct": cell["ci_high_pct"]}
    return None


def _soft_guard_notes(by_conc: list[dict[str, Any]], load: str,
                      names: Sequence[str]) -> list[str]:
    """A line for each non-critical guard that regressed: reported, never deciding."""
    out = []
    for name in names:
        hit = guard_veto(by_conc, load, [name])
        if hit:
            out.append(f"non-critical guard {name} regressed {hit['delta_pct']:+.1f}% at "
                       f"{load} {hit[load]} (reported, not deciding)")
    return out


def power_warnings(sizes: Iterable[tuple[int, int]]) -> list[str]:
    """What a reader should know of the run counts before reading a verdict: fewer than
    :data:`MIN_RUNS` runs on a side (nothing can be judged), or exactly that many (only
    a large or very steady change clears the tolerance: the t interval of 3 runs uses
    t = 4.3).  Empty otherwise."""
    sizes = list(sizes)
    tested = [(a, b) for a, b in sizes if a >= MIN_RUNS and b >= MIN_RUNS]
    if not tested:
        return [f"fewer than {MIN_RUNS} runs on a side: the verdict can only be inconclusive"
                ] if any(a or b for a, b in sizes) else []
    fewest = min(min(a, b) for a, b in tested)
    if fewest > MIN_RUNS:
        return []
    return [f"{fewest} runs a side: the interval is wide (few degrees of freedom), so only "
            "a large or very steady change is told apart from the tolerance; 5 or more "
            "runs a side narrow it"]


def entry_verdict(verdicts: Iterable[str]) -> str:
    """Combine the primary metric's per-load-point verdicts into the entry verdict:
    ``regression`` if any point is one, else ``gain`` if any is, else ``neutral`` only
    when every point is shown neutral, else ``inconclusive``."""
    vs = list(verdicts)
    if "regression" in vs:
        return "regression"
    if "gain" in vs:
        return "gain"
    if vs and all(v == "neutral" for v in vs):
        return "neutral"
    return "inconclusive"


def outputs_check(df: "pd.DataFrame") -> str:
    """``identical``, ``differ`` or ``unknown`` from the ``output_digest`` column."""
    if DIGEST_COLUMN not in df.columns:
        return "unknown"
    have = df[df[DIGEST_COLUMN].notna() & (df[DIGEST_COLUMN].astype(str) != "")]
    if have.empty:
        return "unknown"
    complete = True
    for _, group in have.groupby(load_column(df)):
        if group[DIGEST_COLUMN].astype(str).nunique() > 1:
            return "differ"
        if set(group["side"]) != set(SIDES):
            complete = False  # only one side reported digests here: nothing to compare
    return "identical" if complete else "unknown"


VERDICT_RULE = (
    "per load point, the 95% interval of the metric's change (when A and B ran in pairs: "
    "the per-pair log-ratios' signed-rank interval from 6 pairs, t below; else Welch's t) "
    "against the tolerance: wholly beyond +tol (-tol) in the "
    "metric's good direction is a gain (regression), wholly within ±tol neutral, crossing "
    f"it inconclusive (with the runs a side that would settle it), fewer than {MIN_RUNS} "
    "runs a side inconclusive.  The entry: regression if any point is one (or a guard "
    "metric regressed), else gain if any is, else neutral when all are, else inconclusive"
)
__all__ = [
    "ALPHA",
    "MIN_RUNS",
    "PRIMARY_METRIC",
    "VERDICT_RULE",
    "analyze",
    "compare_metric",
    "entry_verdict",
    "power_warnings",
    "judged_metrics",
    "load_column",
    "metric_direction",
    "outputs_check",
    "runs_frame",
]
