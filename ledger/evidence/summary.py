"""summary.yaml: building it from an analysis, its headline, and staleness.

Pure (no files).  The schema is the contract with the render engineer and the CLI::

    entry, run_id, source (ab|import), metric, higher_is_better, verdict, outputs,
    warnings, engine_commit, context {KNOB: value}, started, finished, headline, load,
    tolerance_pct, guards [metric…] and veto {metric, LOAD, delta_pct, ci_…} (when any),
    workload {tool, backend, dataset, input_len, …} (absent in older files),
    by_concurrency: [{concurrency, n_a, n_b, metrics: {name: {median_a, median_b,
        delta_pct, ci_low_pct, ci_high_pct, p_value, p_adjusted, verdict,
        higher_is_better, n_a, n_b, design, tolerance_pct, runs_needed, interval,
        confidence}}}]

``design`` is ``paired`` (per-pair log-ratios; ``n_a`` = ``n_b`` = pairs) or ``unpaired``;
``runs_needed`` (runs a side in all) only on a cell whose interval crosses the tolerance;
``interval`` (``signed-rank``, ``t``, ``welch``: :mod:`ledger.evidence.verdict`) on every
judged cell, ``confidence`` only where it is not 95% (a sequential A/B's last look).
Files written before the interval verdict lack ``design``, ``tolerance_pct`` and
``runs_needed``; their stored verdicts and headlines are shown as they were written.

A sequential A/B (``ledger ab --until-decided``) adds ``sequential`` {pairs, looks,
planned_looks, stopped (decided|max_runs), confidence, min_pairs, max_pairs}: its cells
were judged at ``confidence``, the last look's.

``load`` is ``concurrency`` or ``rate`` (:mod:`ledger.evidence.load`); in a rate sweep each
block of ``by_concurrency`` (the name is kept for the readers of older files) has ``rate``
(requests/s, ``.inf`` for all at once) where a concurrency sweep has ``concurrency``.  A
summary without ``load`` is a concurrency sweep.

``p_value`` is the raw two-sided Mann-Whitney p; ``p_adjusted`` the Holm-adjusted one
the verdict used.  Per-metric ``n_a``/``n_b`` can be lower than the concurrency's when a
bench did not report that metric on every run.  Numbers are rounded for a stable,
readable file: medians to 6 significant digits, percentages to 2 decimals, p-values to
4 decimals (0.0 means below 0.0001).
"""

from __future__ import annotations

from typing import Any
from typing import Mapping

from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import of_row
from ledger.evidence.headline import format_headline

SOURCES = ("ab", "import", "observed")  # observed: ledger.evidence.observed
CELL_KEYS = (
    "median_a",
    "median_b",
    "delta_pct",
    "ci_low_pct",
    "ci_high_pct",
    "p_value",
    "p_adjusted",
    "verdict",
    "higher_is_better",
    "n_a",
    "n_b",
    "design",
    "tolerance_pct",
    "runs_needed",
    "interval",
    "confidence",
)


def _sig(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{digits}g}")


def _dec(x: float | None, places: int) -> float | None:
    return None if x is None else round(float(x), places) + 0.0  # +0.0 turns -0.0 into 0.0


def _cell(cell: Mapping[str, Any]) -> dict[str, Any]:
    rounded = {
        "median_a": _sig(cell.get("median_a")),
        "median_b": _sig(cell.get("median_b")),
        "delta_pct": _dec(cell.get("delta_pct"), 2),
        "ci_low_pct": _dec(cell.get("ci_low_pct"), 2),
        "ci_high_pct": _dec(cell.get("ci_high_pct"), 2),
        "p_value": _dec(cell.get("p_value"), 4),
        "p_adjusted": _dec(cell.get("p_adjusted"), 4),
        "verdict": cell["verdict"],
        "higher_is_better": bool(cell["higher_is_better"]),
        "n_a": int(cell["n_a"]),
        "n_b": int(cell["n_b"]),
        "design": cell.get("design"),
        "tolerance_pct": cell.get("tolerance_pct"),
        "runs_needed": cell.get("runs_needed"),
        "interval": cell.get("interval"),
        "confidence": cell.get("confidence"),
    }
    # Keys a cell does not have (older files, a cell judged before pairing existed) stay out.
    return {k: rounded[k] for k in CELL_KEYS if rounded[k] is not None or k in CELL_KEYS[:11]}


def build_summary(
    analysis: Mapping[str, Any],
    *,
    entry: str,
    run_id: str,
    source: str,
    engine_commit: str | None,
    context: Mapping[str, str | None] | None,
    started: str,
    finished: str,
    workload: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary.yaml mapping (fixed key order) for an :func:`stats.analyze` result.

    ``workload``: what was measured (see :mod:`ledger.evidence.workload`), kept when given.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    blocks = [
        {
            **of_row(block).to_row(),
            "n_a": int(block["n_a"]),
            "n_b": int(block["n_b"]),
            "metrics": {name: _cell(c) for name, c in sorted(block["metrics"].items())},
        }
        for block in analysis["by_concurrency"]
    ]
    return {
        "entry": entry,
        "run_id": run_id,
        "source": source,
        "metric": analysis["metric"],
        "higher_is_better": bool(analysis["higher_is_better"]),
        "verdict": analysis["verdict"],
        "outputs": analysis["outputs"],
        # Said in the summary itself: a neutral verdict that was the only one possible.
        "warnings": list(analysis.get("warnings") or []),
        "engine_commit": engine_commit,
        "context": {
            str(k): (None if v is None else str(v)) for k, v in sorted((context or {}).items())
        },
        "started": started,
        "finished": finished,
        # From the stored (rounded) numbers, as the table is: one CI everywhere.
        "headline": format_headline({**analysis, "by_concurrency": blocks}),
        "load": analysis.get("load", CONCURRENCY),
        **({"tolerance_pct": analysis["tolerance_pct"]} if "tolerance_pct" in analysis else {}),
        **({"guards": list(analysis["guards"])} if analysis.get("guards") else {}),
        **({"veto": _veto(analysis["veto"])} if analysis.get("veto") else {}),
        **({"workload": dict(workload)} if workload else {}),
        "by_concurrency": blocks,
    }


def with_sequential(summary: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a sequential A/B adds to its summary: ``sequential`` (its looks, see
    :meth:`ledger.evidence.sequential.Sequential.record`) and the headline that says
    ``decided after N pairs``."""
    return {"sequential": dict(record),
            "headline": format_headline({**summary, "sequential": dict(record)})}


def _veto(veto: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _dec(v, 2) if k.endswith("_pct") else v for k, v in veto.items()}


def headline(summary: Mapping[str, Any] | None) -> str:
    """The evidence headline of a summary, or ``no evidence`` for None."""
    if not summary:
        return "no evidence"
    stored = summary.get("headline")
    return stored if isinstance(stored, str) and stored else format_headline(summary)


def _same_commit(a: str, b: str) -> bool:
    # Operators and tools mix short and full shas; a prefix of 7+ hex digits is the same commit.
    a, b = a.strip().lower(), b.strip().lower()
    if a == b:
        return True
    short, full = sorted((a, b), key=len)
    return len(short) >= 7 and full.startswith(short)


def is_stale(
    summary: Mapping[str, Any],
    engine_commit: str | None,
    context: Mapping[str, str | None] | None,
) -> bool:
    """True when the evidence no longer describes the live setup (see :func:`stale_reasons`)."""
    return bool(stale_reasons(summary, engine_commit, context))


def _shown(value: str | None) -> str:
    return "(unset)" if value is None else value


def stale_reasons(
    summary: Mapping[str, Any],
    engine_commit: str | None,
    context: Mapping[str, str | None] | None,
) -> list[str]:
    """What differs between the evidence and the live setup, each as ``what then → now``:
    ``engine commit 1a2b3c4 → 5d6e7f8`` when it was recorded at another engine commit
    (unknown on either side is not proof of a change), ``--mem-fraction-static 0.85 →
    0.90`` for each other knob of the target with another value (``(unset)`` on the
    side that lacks it).  Empty when the evidence still describes the live setup."""
    reasons = []
    recorded = summary.get("engine_commit")
    if recorded and engine_commit and not _same_commit(str(recorded), engine_commit):
        reasons.append(f"engine commit {str(recorded)[:12]} → {engine_commit[:12]}")
    if context is None:
        return reasons
    then = {
        str(k): (None if v is None else str(v)) for k, v in (summary.get("context") or {}).items()
    }
    now = {str(k): (None if v is None else str(v)) for k, v in context.items()}
    for k in sorted(then.keys() | now.keys()):
        if then.get(k) != now.get(k):
            reasons.append(f"{k} {_shown(then.get(k))} → {_shown(now.get(k))}")
    return reasons


__all__ = ["SOURCES", "build_summary", "headline", "is_stale", "stale_reasons"]
