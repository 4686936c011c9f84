"""The one-line headline of an A/B summary, shown by `ledger show/list/diff/restore`.

Pure: it reads an analysis as :func:`ledger.evidence.stats.analyze` returns it.

Headline: the concurrency shown is the most significant one supporting the verdict
(smallest adjusted p, then the largest effect, then the highest concurrency); for
``neutral`` and ``inconclusive`` it is the concurrency with the smallest p / largest
effect, so the operator sees the best case the data could not confirm.  Every other
load point follows with its change (a range past :data:`COMPACT_AFTER` points), and a
``neutral`` or ``inconclusive`` cell says why (:func:`neutral_reason`).
"""

from __future__ import annotations

from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.evidence.load import LoadPoint
from ledger.evidence.load import of_row
from ledger.evidence.stats import ALPHA
from ledger.evidence.stats import MIN_RUNS

COMPACT_AFTER = 4  # more load points than this are summed up as a range


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


__all__ = ["COMPACT_AFTER", "format_headline", "neutral_reason", "pick_headline_cell"]
