"""The one-line headline of an A/B summary, shown by `ledger show/list/diff/restore`.

Pure: it reads an analysis as :func:`ledger.evidence.stats.analyze` returns it.

Every headline says the verdict, the change, which metric, at which load point, the
interval, *why* the verdict (``clear of ±2%``, ``within ±2%``, ``crosses ±2%: need ~7 more
runs a side``, ``fewer than 3 runs a side``) and how many runs it rests on (``3 runs a
side``, ``5 pairs``, ``n=4/3``); a sequential A/B (``ab --until-decided``) says after how many
pairs it stopped and whether decided.

The load point shown: for ``gain`` / ``regression`` the one that clears the tolerance by
the widest margin (then the larger effect, more runs, the higher load); otherwise the one
with the largest change, so the operator sees the best case the data could not settle.
Every other load point follows with its change (a range past :data:`COMPACT_AFTER`
points).  A guard's veto (:func:`ledger.evidence.stats.guard_veto`) leads the line.
"""

from __future__ import annotations

from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.evidence.load import LoadPoint
from ledger.evidence.load import of_row
from ledger.evidence.sequential import sequential_said
from ledger.evidence.stats import entry_verdict
from ledger.evidence.verdict import cell_reason

COMPACT_AFTER = 4  # more load points than this are summed up as a range


def _good_interval(cell: Mapping[str, Any]) -> tuple[float, float] | None:
    lo, hi = cell.get("ci_low_pct"), cell.get("ci_high_pct")
    if lo is None or hi is None:
        return None
    return (lo, hi) if cell.get("higher_is_better", True) else (-hi, -lo)


def pick_headline_cell(analysis: Mapping[str, Any]) -> tuple[LoadPoint, dict[str, Any]] | None:
    """The (load point, metric cell) the headline shows; rules in the module docs."""
    metric = analysis["metric"]
    cells = [
        (of_row(b), b["metrics"][metric])
        for b in analysis["by_concurrency"]
        if metric in b["metrics"]
    ]
    if not cells:
        return None
    verdict = entry_verdict(c["verdict"] for _, c in cells)
    if verdict in ("gain", "regression"):
        cells = [c for c in cells if c[1]["verdict"] == verdict]

    def strength(item: tuple[LoadPoint, dict[str, Any]]) -> tuple[float, float, int, float]:
        point, cell = item
        good = _good_interval(cell)
        margin = 0.0
        if good is not None and verdict in ("gain", "regression"):
            margin = good[0] if verdict == "gain" else -good[1]
        effect = abs(cell["delta_pct"]) if cell["delta_pct"] is not None else -1.0
        runs = min(cell["n_a"], cell["n_b"])
        return (-margin, -effect, -runs, -point.value)

    return min(cells, key=strength)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}"


def runs_said(cell: Mapping[str, Any]) -> str:
    """How many runs a cell rests on: ``5 pairs``, ``3 runs a side`` or ``n=4/3``."""
    n_a, n_b = int(cell.get("n_a") or 0), int(cell.get("n_b") or 0)
    if cell.get("design") == "paired":
        return f"{n_a} pair{'s' if n_a != 1 else ''}"
    if n_a == n_b:
        return f"{n_a} run{'s' if n_a != 1 else ''} a side"
    return f"n={n_a}/{n_b}"


def neutral_reason(cell: Mapping[str, Any], warnings: Iterable[str] = ()) -> str | None:
    """Why a cell has its verdict (:func:`ledger.evidence.verdict.cell_reason`); None for a
    cell judged before the interval verdict (an older summary: no ``design``), whose
    stored headline says it."""
    if "design" not in cell:
        return None
    return cell_reason(dict(cell))


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


def _veto_text(analysis: Mapping[str, Any]) -> str:
    veto = analysis.get("veto")
    if not veto:
        return ""
    point = of_row(veto)
    return (f"regression: guard {veto['metric']} {_pct(veto.get('delta_pct'))}% "
            f"@{point.label} (CI {_pct(veto.get('ci_low_pct'))}.."
            f"{_pct(veto.get('ci_high_pct'))}%) vetoes ")


def format_headline(analysis: Mapping[str, Any] | None) -> str:
    """One line for `ledger show/list/diff/restore`, e.g.
    ``gain +12.1% output_throughput @c64 (CI +11.2..+13.8%, clear of ±2%; 3 runs a side),
    +5.7% @c96; outputs identical``: the most telling load point with its interval, why,
    and the runs it rests on, then every other point's change, then for a sequential A/B
    ``decided after 9 pairs`` (or ``not decided in 16 pairs (--max-runs)``), then what the
    outputs did.
    """
    if not analysis:
        return "no evidence"
    picked = pick_headline_cell(analysis)
    metric, outputs = analysis["metric"], analysis["outputs"]
    if picked is None:
        return f"{analysis['verdict']} {metric} (no runs, outputs {outputs})"
    point, cell = picked
    verdict = entry_verdict(b["metrics"][metric]["verdict"] for b in analysis["by_concurrency"]
                            if metric in b["metrics"]) if analysis.get("veto") else \
        analysis["verdict"]
    delta = "n/a" if cell["delta_pct"] is None else f"{cell['delta_pct']:+.1f}%"
    level = f"{100 * cell['confidence']:.4g}% " if cell.get("confidence") else ""
    ci = "CI n/a" if cell["ci_low_pct"] is None else \
        f"{level}CI {_pct(cell['ci_low_pct'])}..{_pct(cell['ci_high_pct'])}%"
    why = neutral_reason(cell)
    why = f", {why}" if why else ""
    seq = sequential_said(analysis.get("sequential"))
    return (
        f"{_veto_text(analysis)}{verdict} {delta} {metric} @{point.label} "
        f"({ci}{why}; {runs_said(cell)}){_others(analysis, point)}"
        f"{'; ' + seq if seq else ''}; outputs {outputs}"
    )


__all__ = ["COMPACT_AFTER", "format_headline", "neutral_reason", "pick_headline_cell",
           "runs_said"]
