"""A/B charts for the rendered docs: the primary metric against the load point, A and B.

The x axis is the summary's load point: concurrency, or request rate for a request-rate
sweep (``inf`` last), see :mod:`ledger.evidence.load`.

Charts are drawn with matplotlib into SVG text.  Two properties matter more than looks:

* **Deterministic bytes.**  The docs are committed and reviewed as diffs, so the same
  evidence must give the same SVG: the SVG hash salt (which seeds clip-path and other
  ids) is fixed per entry, the ``Date`` and ``Creator`` metadata (matplotlib's URL and
  version) are dropped, so upgrading matplotlib does not change the docs, and text is written as SVG
  ``<text>`` (``svg.fonttype = 'none'``) so no font-glyph cache leaks into the output.
  A per-entry salt also keeps element ids unique when several charts are inlined into
  one HTML page.
* **Escaped text.**  Titles and labels come from users (entry titles, metric names).
  matplotlib's SVG writer escapes ``&``, ``<`` and ``>`` in text and attributes; math
  text parsing is switched off so a ``$`` in a title is shown, not interpreted.

matplotlib is imported inside :func:`ab_chart_svg` so that importing the ledger (and
``ledger --help``) stays fast.  No pyplot: a bare :class:`~matplotlib.figure.Figure`
renders through the SVG canvas without selecting a global backend.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any
from typing import Mapping

# Calm, colour-blind-safe pair: A (the entry reverted) recedes, B (applied) stands out.
COLOR_A = "#8c96a8"
COLOR_B = "#2563a6"
COLOR_INK = "#2b3340"
COLOR_MUTED = "#6b7482"
COLOR_GRID = "#e3e7ee"
COLOR_GOOD = "#1d7a4c"
COLOR_BAD = "#b0302a"

# Units of sglang bench_serving keys, for the y axis label.
_UNITS = {
    "output_throughput": "output tok/s",
    "input_throughput": "input tok/s",
    "total_throughput": "total tok/s",
    "total_token_throughput": "total tok/s",
    "request_throughput": "req/s",
}

_TITLE_LIMIT = 70


@dataclass(frozen=True)
class ABPoint:
    """One load point (a concurrency level or a request rate) of an A/B summary."""

    load: float  # the concurrency, or the request rate (inf allowed)
    median_a: float
    median_b: float
    delta_pct: float | None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    verdict: str = ""
    label: str = ""  # the tick label: "64", or "4" / "inf" for rates


def _number(value: Any) -> float | None:
    """A finite float from summary data, or None (summaries come from disk and imports)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def ab_points(summary: Mapping[str, Any]) -> list[ABPoint]:
    """The plottable points of ``summary``'s primary metric, by ascending load point.

    Rows without a load point or without both medians are skipped rather than failing:
    an imported result may cover one side only.
    """
    from ledger.evidence.load import format_rate
    from ledger.evidence.load import of_row

    metric = summary.get("metric")
    points: dict[float, ABPoint] = {}
    for row in summary.get("by_concurrency") or ():
        if not isinstance(row, Mapping):
            continue
        try:
            load = of_row(row)
        except (TypeError, ValueError):
            continue
        metrics = row.get("metrics")
        values = metrics.get(metric) if isinstance(metrics, Mapping) else None
        if load.value <= 0 or not isinstance(values, Mapping):
            continue
        a, b = _number(values.get("median_a")), _number(values.get("median_b"))
        if a is None or b is None:
            continue
        label = format_rate(load.value) if load.kind == "rate" else str(int(load.value))
        points[load.value] = ABPoint(
            load.value,
            a,
            b,
            _number(values.get("delta_pct")),
            _number(values.get("ci_low_pct")),
            _number(values.get("ci_high_pct")),
            str(values.get("verdict") or ""),
            label,
        )
    return [points[c] for c in sorted(points)]


def axis_title(summary: Mapping[str, Any]) -> str:
    """``concurrency`` or ``request rate (req/s)``: what the x axis is."""
    from ledger.evidence.load import AXIS_TITLES

    return AXIS_TITLES.get(str(summary.get("load") or "concurrency"), "concurrency")


def _delta_color(point: ABPoint, higher_is_better: bool) -> str:
    """Green for a verdict of gain, red for regression, grey otherwise."""
    verdict = point.verdict
    low, high = point.ci_low_pct, point.ci_high_pct
    # No per-point verdict: a CI clear of zero still says which way it went.
    if not verdict and low is not None and high is not None and (low > 0 or high < 0):
        verdict = "gain" if (low > 0) == higher_is_better else "regression"
    return {"gain": COLOR_GOOD, "regression": COLOR_BAD}.get(verdict, COLOR_MUTED)


def metric_label(metric: str) -> str:
    """Axis label for a bench metric key: 'output_throughput (output tok/s)'."""
    if metric in _UNITS:
        return f"{metric} ({_UNITS[metric]})"
    if metric.endswith("_ms"):
        return f"{metric} (ms)"
    return metric


def _shorten(text: str, limit: int = _TITLE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def ab_chart_svg(summary: Mapping[str, Any], *, title: str, salt: str) -> str | None:
    """Draw ``summary``'s primary metric against its load point for A and B, as SVG text.

    Left panel: the medians of A and B per load point.  Right panel: the delta of B
    against A in percent with its 95% CI, coloured by verdict.  ``title`` is the entry's
    title (the SVG's ``<title>``, shortened); ``salt`` seeds the
    SVG element ids and must differ between charts inlined into one page (use the entry
    id).  Returns None when the summary has no point with both medians.
    """
    points = ab_points(summary)
    if not points:
        return None
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(_chart_rc(salt)):
        fig = Figure(figsize=(7.6, 3.1))
        medians, deltas = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1]})
        # Load points are evenly spaced categories: sweeps are geometric (1, 16, 64, 96;
        # rates 1, 2, 4 … inf) and a numeric axis would crowd the high end (or have no
        # place for inf), where the differences live.
        xs = list(range(len(points)))
        _draw_medians(medians, xs, points, str(summary.get("metric") or "metric"))
        _draw_deltas(deltas, xs, points, summary.get("higher_is_better") is not False)
        for ax in (medians, deltas):
            ax.set_xticks(xs, [p.label for p in points])
            ax.set_xlabel(axis_title(summary), parse_math=False)
            ax.grid(axis="y", color=COLOR_GRID, lw=0.8)
            ax.set_axisbelow(True)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            ax.tick_params(length=0, pad=5)
        fig.tight_layout(w_pad=2.5)
        buf = io.StringIO()
        # The entry title goes into the SVG's <title> metadata (matplotlib escapes it):
        # the page around an inlined chart already shows it.
        fig.savefig(buf, format="svg",
                    metadata={"Date": None, "Creator": None, "Title": _shorten(title)})
    return buf.getvalue()


def _chart_rc(salt: str) -> dict[str, Any]:
    return {
        "svg.hashsalt": f"knob-ledger:{salt}",
        "svg.fonttype": "none",
        "font.family": "sans-serif",
        # Layout is measured with DejaVu Sans (shipped with matplotlib); viewers fall
        # back to a similar sans face.
        "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
        "font.size": 9.5,
        "axes.edgecolor": COLOR_GRID,
        "axes.labelcolor": COLOR_MUTED,
        "xtick.color": COLOR_MUTED,
        "ytick.color": COLOR_MUTED,
        "text.color": COLOR_INK,
        "path.simplify": False,
    }


def _draw_medians(ax, xs: list[int], points, metric: str) -> None:
    """The left panel: A's and B's medians per load point."""
    ax.plot(xs, [p.median_a for p in points], color=COLOR_A, marker="o", lw=2, ms=5,
            label="A · entry reverted")
    ax.plot(xs, [p.median_b for p in points], color=COLOR_B, marker="o", lw=2.2, ms=5.5,
            label="B · entry applied")
    ax.set_ylim(bottom=0)
    ax.margins(x=0.08, y=0.12)
    ax.set_ylabel(metric_label(metric), parse_math=False)
    ax.set_title("medians, A and B", loc="left", parse_math=False)
    ax.legend(frameon=False, loc="upper left", fontsize=8.5)


def _draw_deltas(ax, xs: list[int], points, higher_is_better: bool) -> None:
    """The right panel: B's delta against A per load point, with its CI."""
    from matplotlib.ticker import MaxNLocator

    for x, p in ((x, p) for x, p in zip(xs, points) if p.delta_pct is not None):
        low, high = p.ci_low_pct, p.ci_high_pct
        color = _delta_color(p, higher_is_better)
        if low is not None and high is not None:
            ax.plot([x, x], [low, high], color=color, lw=6, alpha=0.28, solid_capstyle="round")
        ax.plot([x], [p.delta_pct], color=color, marker="o", ms=6)
        ax.annotate(f"{p.delta_pct:+.1f}%", (x, p.delta_pct), xytext=(9, -3),
                    textcoords="offset points", fontsize=8.5, color=COLOR_INK,
                    parse_math=False)
    ax.axhline(0, color=COLOR_MUTED, lw=0.9)
    ax.margins(x=0.18, y=0.2)
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_title("Δ B vs A, with 95% CI", loc="left", parse_math=False)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:+g}%" if v else "0")


_SVG_ID_RE = re.compile(r'(\bid="|url\(#|href="#)([^"()]+)')


def inline_svg(svg: str, prefix: str) -> str:
    """``svg`` ready to embed in an HTML page next to other charts.

    Drops the XML declaration and DOCTYPE, and prefixes every element id (and every
    reference to one: ``url(#…)``, ``xlink:href="#…"``) with ``prefix``: matplotlib
    numbers its groups ``figure_1``, ``axes_1``… in every file, and duplicate ids in one
    page would make one chart's clip paths and markers resolve to another's.
    """
    start = svg.find("<svg")
    if start < 0:
        raise ValueError("not an SVG document")
    return _SVG_ID_RE.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg[start:])


__all__ = ["ABPoint", "ab_chart_svg", "ab_points", "axis_title", "inline_svg", "metric_label"]
