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
  * ``median_a``, ``median_b`` and ``delta_pct`` = 100 * (median_b / median_a - 1);
  * a 95% percentile-bootstrap interval of that delta (``scipy.stats.bootstrap``, each side
    resampled independently, seeded from the data so the same input gives the same
    interval);
  * the two-sided Mann-Whitney U p-value (``scipy.stats.mannwhitneyu``), Holm-adjusted
    across the concurrencies of that metric (scipy has no Holm step-down, so it is the
    five lines in :func:`_holm`).

Metric direction comes from the name: ``*_ms`` is a latency (lower is better);
``*throughput*``, ``*goodput*`` and ``*_per_s`` are rates (higher is better).  Columns
with neither (``duration``, ``completed``, token counts) are kept in ``runs.csv`` but not
judged.

Verdict rules (per concurrency and metric, then for the entry):
  * ``inconclusive`` - fewer than :data:`MIN_RUNS` runs on either side, or a median of A
    that is zero (no percentage change is defined).
  * ``gain`` / ``regression`` - *significant* in the good / bad direction: the
    Holm-adjusted p-value is below :data:`ALPHA` **and** the bootstrap interval lies
    entirely on that side of zero.  Both are required: at n=5 a percentile bootstrap of
    medians is too narrow (it under-covers), so on its own it would call noise a gain; the
    rank test is exact for small samples without ties and keeps the false-call rate at or
    below ALPHA for the whole set of concurrencies of a metric.
  * ``neutral`` - otherwise.
  * The entry verdict looks only at the primary metric (default ``output_throughput``):
    ``inconclusive`` when no concurrency has enough runs; ``regression`` when any
    concurrency is a regression; ``gain`` when at least one is a gain (and none is a
    regression); ``neutral`` otherwise.  Other metrics carry their own per-concurrency
    verdicts but do not change the entry verdict: judging twenty correlated metrics at
    once would multiply false alarms, and the operator chose the metric that matters.

Honest limits: with 5 runs per side the smallest exact two-sided Mann-Whitney p is
2/252 = 0.0079 and the test's real size at ALPHA = 0.05 is 8/252 = 0.032; with three
concurrencies Holm needs p <= 0.0167, i.e. at most one A/B pair out of order.  Small
effects (5% at 3% noise) therefore need more runs; ``benchmarks/ab_power.py`` measures
how many.  With too few runs to reach ALPHA at all (3 vs 3: p >= 0.1) the summary carries
a warning (:func:`power_warnings`) and ``ledger ab`` prints it, before and after running.

Outputs: ``identical`` when, at every concurrency that has digests, A and B produced one
and the same ``output_digest``; ``differ`` when any concurrency shows two digests;
``unknown`` when the bench gave none (or only one side did).

Headline: the concurrency shown is the most significant one supporting the verdict
(smallest adjusted p, then the largest effect, then the highest concurrency); for
``neutral`` and ``inconclusive`` it is the concurrency with the smallest p / largest
effect, so the operator sees the best case the data could not confirm.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from typing import TYPE_CHECKING
from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.errors import EvidenceError
from ledger.evidence.defaults import PRIMARY_METRIC
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import KINDS
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import of_row
from ledger.evidence.runs_csv import DIGEST_COLUMN
from ledger.evidence.runs_csv import ID_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

ALPHA = 0.05
CONFIDENCE = 0.95
MIN_RUNS = 3
N_RESAMPLES = 2000
SIDES = ("A", "B")
VERDICTS = ("gain", "neutral", "regression", "inconclusive")


def metric_direction(name: str) -> bool | None:
    """True when higher is better, False when lower is better, None when not a judged metric."""
    if name.endswith("_ms"):
        return False
    if "throughput" in name or "goodput" in name or name.endswith("_per_s"):
        return True
    return None


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


def _seed(a: Any, b: Any) -> int:
    # Seed from the data itself: the same runs always give the same interval.
    h = hashlib.sha256(a.tobytes() + b"|" + b.tobytes()).digest()
    return int.from_bytes(h[:8], "little")


def _delta_ci(a: Any, b: Any) -> tuple[float | None, float | None]:
    """95% percentile-bootstrap interval of 100*(median(b)/median(a) - 1)."""
    import numpy as np
    from scipy import stats

    def delta_pct(x: Any, y: Any, axis: int = -1) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * (np.median(y, axis=axis) / np.median(x, axis=axis) - 1.0)

    with warnings.catch_warnings():
        # Degenerate resamples (all values equal) are legitimate here, not a problem.
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (a, b),
            delta_pct,
            n_resamples=N_RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            vectorized=True,
            paired=False,
            random_state=np.random.default_rng(_seed(a, b)),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None, None
    return lo, hi


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


def compare_metric(a: Any, b: Any, higher_is_better: bool) -> dict[str, Any]:
    """Medians, delta %, bootstrap CI and raw Mann-Whitney p for one metric at one concurrency.

    ``verdict`` is filled in by :func:`analyze` once p-values are adjusted.
    """
    import numpy as np

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    # Sorted: the result must not depend on the order rows were stored in (the seed does).
    a = np.sort(a[np.isfinite(a)])
    b = np.sort(b[np.isfinite(b)])
    out: dict[str, Any] = {
        "median_a": float(np.median(a)) if a.size else None,
        "median_b": float(np.median(b)) if b.size else None,
        "delta_pct": None,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "p_value": None,
        "verdict": "inconclusive",
        "higher_is_better": higher_is_better,
        "n_a": int(a.size),
        "n_b": int(b.size),
    }
    if out["median_a"] is not None and out["median_b"] is not None and out["median_a"] != 0:
        out["delta_pct"] = 100.0 * (out["median_b"] / out["median_a"] - 1.0)
    if a.size >= MIN_RUNS and b.size >= MIN_RUNS and out["delta_pct"] is not None:
        out["ci_low_pct"], out["ci_high_pct"] = _delta_ci(a, b)
        out["p_value"] = _mann_whitney(a, b)
    return out


def _judge(m: dict[str, Any], p_adj: float) -> str:
    lo, hi = m["ci_low_pct"], m["ci_high_pct"]
    if lo is None or hi is None or p_adj >= ALPHA:
        return "neutral"
    good_side = lo > 0 if m["higher_is_better"] else hi < 0
    bad_side = hi < 0 if m["higher_is_better"] else lo > 0
    if good_side:
        return "gain"
    if bad_side:
        return "regression"
    return "neutral"


def analyze(
    rows: Iterable[Mapping[str, Any]] | "pd.DataFrame", metric: str = PRIMARY_METRIC
) -> dict[str, Any]:
    """Judge a runs table.

    Returns ``{"metric", "higher_is_better", "verdict", "outputs", "warnings", "load",
    "by_concurrency"}`` (``warnings``: :func:`power_warnings` of the primary metric)
    where ``load`` is ``concurrency`` or ``rate`` and ``by_concurrency`` is a list
    (ascending load) of ``{LOAD: value, "n_a", "n_b", "metrics": {name: {...}}}`` as in
    summary.yaml.
    Raises EvidenceError when the primary metric is not a judged metric of the table.
    """
    direction = metric_direction(metric)
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
    load = load_column(df)
    by_conc: list[dict[str, Any]] = []
    for value, group in sorted(df.groupby(load), key=lambda kv: kv[0]):
        side_a = group[group["side"] == "A"]
        side_b = group[group["side"] == "B"]
        point = LoadPoint(load, float(value)).row_value
        block = {load: point, "n_a": len(side_a), "n_b": len(side_b), "metrics": {}}
        for name in metrics:
            cmp = compare_metric(
                side_a[name].to_numpy(), side_b[name].to_numpy(), bool(metric_direction(name))
            )
            if cmp["n_a"] == 0 and cmp["n_b"] == 0:
                continue  # this bench did not report the metric at this concurrency
            block["metrics"][name] = cmp
        by_conc.append(block)
    # Holm across concurrencies, separately for each metric.
    for name in metrics:
        cells = [b["metrics"][name] for b in by_conc if name in b["metrics"]]
        tested = [c for c in cells if c["p_value"] is not None]
        for cell, p_adj in zip(tested, _holm([c["p_value"] for c in tested]), strict=True):
            cell["p_adjusted"] = p_adj
            cell["verdict"] = _judge(cell, p_adj)
    primary = [b["metrics"][metric] for b in by_conc if metric in b["metrics"]]
    return {
        "metric": metric,
        "higher_is_better": direction,
        "verdict": entry_verdict(c["verdict"] for c in primary),
        "outputs": outputs_check(df),
        "warnings": power_warnings((c["n_a"], c["n_b"]) for c in primary),
        "load": load,
        "by_concurrency": by_conc,
    }


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact Mann-Whitney test can give for ``n_a`` vs ``n_b`` runs.

    Both extreme orderings (every B above every A, or below) are one arrangement each out
    of C(n_a + n_b, n_a): 3 vs 3 -> 2/20 = 0.1, 5 vs 5 -> 2/252 = 0.0079.
    """
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def runs_needed(levels: int = 1, alpha: float = ALPHA) -> int:
    """The fewest runs per side (equal sides) that can reach ``alpha`` after Holm over
    ``levels`` concurrencies (the smallest adjusted p is ``levels`` x the smallest p)."""
    n = 1
    while levels * min_p_value(n, n) >= alpha:
        n += 1
    return n


def power_warnings(sizes: Iterable[tuple[int, int]], alpha: float = ALPHA) -> list[str]:
    """Why no verdict but ``neutral`` is possible: none of the (n_a, n_b) cells of a
    metric can reach ``alpha`` even if every B run beat every A run.  Empty when one can.

    A cell with fewer than :data:`MIN_RUNS` runs on a side is not tested (it is
    ``inconclusive``) and does not count; when no cell is tested, that is the warning.
    """
    sizes = list(sizes)
    tested = [(a, b) for a, b in sizes if a >= MIN_RUNS and b >= MIN_RUNS]
    if not tested:
        return [f"fewer than {MIN_RUNS} runs on a side: the verdict can only be inconclusive"
                ] if any(a or b for a, b in sizes) else []
    m = len(tested)
    best = min(tested, key=lambda ab: min_p_value(*ab))
    p = min_p_value(*best)
    if m * p < alpha:
        return []
    holm = f" (x{m} concurrencies, Holm: {min(1.0, m * p):.3g})" if m > 1 else ""
    return [f"{best[0]} vs {best[1]} runs cannot reach p < {alpha:g}: the smallest two-sided "
            f"Mann-Whitney p is {p:.3g}{holm}, so the verdict can only be neutral; use at "
            f"least {runs_needed(m, alpha)} runs per side"]


def entry_verdict(verdicts: Iterable[str]) -> str:
    """Combine the primary metric's per-concurrency verdicts into the entry verdict."""
    vs = list(verdicts)
    judged = [v for v in vs if v != "inconclusive"]
    if not judged:
        return "inconclusive"
    if "regression" in judged:
        return "regression"
    if "gain" in judged:
        return "gain"
    return "neutral"


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


def pick_headline_cell(analysis: Mapping[str, Any]) -> tuple[LoadPoint, dict[str, Any]] | None:
    """The (load point, metric cell) the headline shows; rules in the module docs."""
    metric, verdict = analysis["metric"], analysis["verdict"]
    cells = [
        (of_row(b), b["metrics"][metric])
        for b in analysis["by_concurrency"]
        if metric in b["metrics"]
    ]
    if not cells:
        return None
    if verdict in ("gain", "regression"):
        cells = [c for c in cells if c[1]["verdict"] == verdict]

    def strength(item: tuple[LoadPoint, dict[str, Any]]) -> tuple[float, float, int, float]:
        point, cell = item
        p = cell.get("p_adjusted", cell["p_value"])
        effect = abs(cell["delta_pct"]) if cell["delta_pct"] is not None else -1.0
        runs = min(cell["n_a"], cell["n_b"])
        return (p if p is not None else 2.0, -effect, -runs, -point.value)

    return min(cells, key=strength)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}"


VERDICT_RULE = (
    f"a load point is a gain (regression) when the Holm-adjusted two-sided Mann-Whitney "
    f"p < {ALPHA:g} and the {CONFIDENCE:.0%} bootstrap CI of the median's change lies "
    f"wholly above (below) 0 in the metric's good direction; inconclusive with fewer than "
    f"{MIN_RUNS} runs a side; neutral otherwise.  The entry: regression if any point is "
    "one, else gain if any is, else neutral"
)
COMPACT_AFTER = 4  # more load points than this are summed up as a range


def neutral_reason(cell: Mapping[str, Any], warnings: Iterable[str] = ()) -> str | None:
    """Why a cell is ``neutral`` or ``inconclusive`` (None for a gain or a regression):
    too few runs to conclude, a CI that crosses 0, or a p-value that is not small enough."""
    verdict = cell.get("verdict")
    n_a, n_b = cell.get("n_a", 0), cell.get("n_b", 0)
    if verdict == "inconclusive":
        return f"n={n_a}/{n_b}: fewer than {MIN_RUNS} runs a side"
    if verdict != "neutral":
        return None
    if any("cannot reach" in w for w in warnings):
        return f"n={n_a}/{n_b} cannot reach p<{ALPHA:g}"
    lo, hi = cell.get("ci_low_pct"), cell.get("ci_high_pct")
    if lo is not None and hi is not None and lo <= 0 <= hi:
        return "CI crosses 0"
    p = cell.get("p_adjusted", cell.get("p_value"))
    if p is not None and p >= ALPHA:
        return f"Holm p {p:.3g} >= {ALPHA:g}"
    return "the CI and the p-value disagree on the direction"


def _others(analysis: Mapping[str, Any], point: LoadPoint) -> str:
    """The other load points' changes: ``, +5.7% @c96``, or a range over many points."""
    metric = analysis["metric"]
    cells = [(of_row(b), b["metrics"][metric]) for b in analysis["by_concurrency"]
             if metric in b["metrics"]]
    rest = [(p, c) for p, c in cells if p != point]
    if not rest:
        return ""
    if len(cells) <= COMPACT_AFTER:
        return "".join(f", {_pct(c['delta_pct'])}{'%' if c['delta_pct'] is not None else ''}"
                       f" @{p.label}" for p, c in rest)
    deltas = [c["delta_pct"] for _, c in cells if c["delta_pct"] is not None]
    span = f"{_pct(min(deltas))}..{_pct(max(deltas))}%" if deltas else "n/a"
    first, last = cells[0][0].label, cells[-1][0].label
    last = last.removeprefix("rate ") if first.startswith("rate ") else last.lstrip("c")
    return f", {span} over {first}..{last} ({len(cells)} points)"


def format_headline(analysis: Mapping[str, Any] | None) -> str:
    """One line for `ledger show/list/diff/restore`, e.g.
    ``gain +12.8% output_throughput @c64 (CI +9.1..+16.0%, n=5/5), +5.7% @c96; outputs
    identical``: the most telling load point with its CI and run counts (and, when it is
    not a gain or a regression, why: ``n=4/4 cannot reach p<0.05``), then every other
    point's change (a range past four points), then what the outputs did.
    """
    if not analysis:
        return "no evidence"
    picked = pick_headline_cell(analysis)
    verdict, metric, outputs = analysis["verdict"], analysis["metric"], analysis["outputs"]
    if picked is None:
        return f"{verdict} {metric} (no runs, outputs {outputs})"
    point, cell = picked
    delta = "n/a" if cell["delta_pct"] is None else f"{cell['delta_pct']:+.1f}%"
    if cell["ci_low_pct"] is None:
        ci = "CI n/a"
    else:
        ci = f"CI {_pct(cell['ci_low_pct'])}..{_pct(cell['ci_high_pct'])}%"
    why = neutral_reason(cell, analysis.get("warnings") or ())
    runs = why if why and why.startswith("n=") else f"n={cell['n_a']}/{cell['n_b']}"
    extra = f", {why}" if why and not why.startswith("n=") else ""
    return (
        f"{verdict} {delta} {metric} @{point.label} ({ci}, {runs}{extra})"
        f"{_others(analysis, point)}; outputs {outputs}"
    )


__all__ = [
    "ALPHA",
    "MIN_RUNS",
    "PRIMARY_METRIC",
    "VERDICT_RULE",
    "neutral_reason",
    "analyze",
    "compare_metric",
    "entry_verdict",
    "format_headline",
    "min_p_value",
    "power_warnings",
    "runs_needed",
    "judged_metrics",
    "load_column",
    "metric_direction",
    "outputs_check",
    "pick_headline_cell",
    "runs_frame",
]
