"""Rendered change-history docs: CHANGELOG.md, entries/<id>.md (+ chart), index.html, and
the Markdown as HTML pages (CHANGELOG.html, entries/<id>.html) the index links to.

``ledger render`` calls :func:`render_docs` with a :class:`~ledger.render.model.RenderModel`
(a file-free snapshot of the workspace).  This module turns that snapshot into *views*
(plain dicts of display values, computed once here so the templates stay logic-light)
and renders the jinja2 templates shipped in the ``templates`` package.

Rules the output keeps:

* **Deterministic.**  Same model, same bytes: no clock, no random ids, stable sort keys
  everywhere, charts with a fixed SVG hash salt (see :mod:`ledger.render.charts`).  Docs can be
  committed and reviewed as diffs.
* **Escaped.**  Every user-supplied string (titles, reasons, knob values, file names,
  evidence fields) is data.  HTML templates autoescape; Markdown templates pass every
  such value through :func:`md_text` or :func:`md_code`, which neutralise HTML and
  whatever would break a table, a link or a list.
* **Self-contained HTML.**  ``index.html`` inlines its CSS and the charts' SVG: it opens
  from a laptop, an artifact store or an air-gapped review box with no network.

Files from an earlier render whose entry is gone are left alone: the renderer never
deletes in a directory the user chose.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.core.display import display_state
from ledger.core.display import happened_at
from ledger.core.display import health_failure
from ledger.core.display import revert_action
from ledger.core.display import revert_reason
from ledger.core.display import status_word
from ledger.core.identifiers import CLASSES
from ledger.core.model import Entry
from ledger.core.planner import restore_blocker
from ledger.core.planner import restore_flags
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.render.charts import ab_chart_svg
from ledger.render.charts import inline_svg
from ledger.render.charts import metric_label
from ledger.render.incident import incident_views
from ledger.render.incident import timeline
from ledger.render.model import KnobRow
from ledger.render.model import RenderModel
from ledger.render.model import TargetState
from ledger.render.text import fmt_ci
from ledger.render.text import fmt_median
from ledger.render.text import fmt_p
from ledger.render.text import fmt_pct
from ledger.render.text import md_code
from ledger.render.text import md_fence
from ledger.render.text import md_text
from ledger.render.text import when

FORMATS = ("md", "html")


def _p_text(cell: Mapping[str, Any]) -> str:
    """The raw p-value, plus the Holm-adjusted one the verdict used when it differs."""
    raw, adjusted = fmt_p(cell.get("p_value")), fmt_p(cell.get("p_adjusted"))
    return raw if adjusted in ("—", raw) else f"{raw} (adj. {adjusted})"


def _load_text(row: Mapping[str, Any]) -> str:
    """The load point of a summary row as the table shows it: ``64``, or ``4``/``inf``."""
    from ledger.evidence.load import format_rate
    from ledger.evidence.load import of_row

    try:
        load = of_row(row)
    except (TypeError, ValueError):
        return "—"
    return format_rate(load.value) if load.kind == "rate" else str(int(load.value))


def _evidence_view(model: RenderModel, entry: Entry) -> dict[str, Any] | None:
    summary = model.evidence.get(entry.id)
    if summary is None:
        return None
    metric = str(summary.get("metric") or "")
    rows, other = [], []
    for row in summary.get("by_concurrency") or ():
        if not isinstance(row, Mapping):
            continue
        metrics = row.get("metrics") if isinstance(row.get("metrics"), Mapping) else {}
        outputs = row.get("outputs") or summary.get("outputs") or "unknown"
        for name in sorted(metrics, key=lambda n: (n != metric, str(n))):
            m = metrics[name] if isinstance(metrics[name], Mapping) else {}
            view = {
                "concurrency": _load_text(row),
                # A metric can have fewer runs than its concurrency level when a bench
                # did not report it every time: prefer the metric's own counts.
                "n": f"{m.get('n_a', row.get('n_a', '—'))}/{m.get('n_b', row.get('n_b', '—'))}",
                "metric": str(name),
                "median_a": fmt_median(m.get("median_a")),
                "median_b": fmt_median(m.get("median_b")),
                "delta": fmt_pct(m.get("delta_pct")),
                "ci": fmt_ci(m.get("ci_low_pct"), m.get("ci_high_pct")),
                "p": _p_text(m),
                "verdict": str(m.get("verdict") or "—"),
                "outputs": str(outputs),
            }
            (rows if name == metric else other).append(view)
    return {
        "headline": str(summary.get("headline") or f"{summary.get('verdict', 'no verdict')}"),
        "verdict": str(summary.get("verdict") or "inconclusive"),
        "outputs": str(summary.get("outputs") or "unknown"),
        "metric": metric,
        "metric_label": metric_label(metric) if metric else "",
        "load_title": "request rate" if summary.get("load") == "rate" else "concurrency",
        "load_header": "Request rate (req/s)" if summary.get("load") == "rate" else
        "Requests in the engine" if summary.get("observed") else "Concurrency",
        # evidence read from Prometheus (ledger.evidence.observed): said, never an A/B
        "observed": str((summary.get("observed") or {}).get("what") or ""),
        "source": str(summary.get("source") or ""),
        "run_id": str(summary.get("run_id") or ""),
        "engine_commit": str(summary.get("engine_commit") or ""),
        "started": when(summary.get("started")),
        "finished": when(summary.get("finished")),
        "stale": entry.id in model.stale,
        # the headline already names what changed since (ledger.evidence.staleness)
        "stale_said": bool(summary.get("stale_said")),
        "rows": rows,
        "other_rows": other,
    }


def _also_view(entry: Entry) -> list[dict[str, Any]]:
    """The other targets of one change across several (``Entry.also``), by name."""
    return [{"target": name, "before": other.get("before")}
            for name, other in sorted((entry.also or {}).items())]


def _upgrade_view(entry: Entry) -> list[dict[str, Any]]:
    """An upgrade entry's plan rows (the defaults it moved first), each in words."""
    from ledger.core.upgrade import row_text

    rows = [r for r in (entry.plan or {}).get("rows", ()) if r.get("change") != "release"]
    rows.sort(key=lambda r: r.get("change") != "default")
    return [{"change": str(r.get("change")), "where": str(r.get("where", "")),
             "text": row_text(r)} for r in rows]


def _note_view(note: Mapping[str, Any]) -> dict[str, Any]:
    """A note or link as the templates show it (text as written; escaped there), with the
    changes its markdown A/B table says (``said``: ``+12.8% @c64, +5.7% @c96``; ``rows``:
    load, A, B, change as the note wrote them), shown in the open beside the measured
    evidence (issue 52) while the note's full text folds away."""
    from ledger.evidence.notes import changes_said
    from ledger.evidence.notes import note_numbers

    text = str(note.get("text") or "")
    rows = note_numbers(text)
    return {"side": str(note.get("side") or ""), "link": str(note.get("link") or ""),
            "file": str(note.get("file") or ""), "title": str(note.get("title") or ""),
            "text": text, "when": when(note.get("when")), "said": changes_said(rows),
            "rows": [{"load": r["load"], "a": f"{r['a']:g}", "b": f"{r['b']:g}",
                      "delta": "" if r.get("delta_pct") is None else f"{r['delta_pct']:+.1f}%"}
                     for r in rows]}


def _restore_plan(entry: Entry, evidence: dict[str, Any] | None) -> dict[str, str]:
    """What `ledger restore` would do with a reverted entry, by the planner's own rule.

    ``held`` says why a plain restore skips it (empty when it would not), ``command`` is
    what brings it back.
    """
    verdict = evidence["verdict"] if evidence is not None else None
    held = restore_blocker(entry, include_suspects=False, force=False, require_evidence=False,
                           verdict=verdict)
    flags = restore_flags(entry, verdict)
    if held or flags:
        return {"held": held or "", "command": " ".join(["ledger restore", entry.id, *flags])}
    command = "ledger restore --perf-only" if entry.cls == "perf" else f"ledger restore {entry.id}"
    return {"held": "", "command": command}


def _default(value: Any) -> str | None:
    """A catalog default as the operator writes it (``true``, ``1 2 4``), None when unknown."""
    from ledger.values import default_text

    return None if value is None else default_text(value)


def _history_view(entry: Entry) -> list[dict[str, Any]]:
    """The entry's actions in the order things happened (real dates: ledger.core.when)."""
    return [{"at": when(a.happened), "at_raw": a.happened,
             "recorded": when(a.at) if a.when else "", "action": a.action, "why": a.why,
             "command": a.command} for a in entry.timeline()]


def _reason_dates(entry: Entry) -> dict[str, str]:
    """The dates beside each card's reasons (a hand revert's --reverted-when, a clear
    --when): the on-call reader's first question after "why" is "when"."""
    reverted = None if entry.applied else revert_action(entry)
    return {
        "reverted_at": when(reverted.happened) if reverted else "",
        "suspected_at": when(happened_at(entry, "suspect")),
        "cleared_at": when(happened_at(entry, "clear")),
    }


def _change_view(model: RenderModel, entry: Entry) -> dict[str, Any]:
    """What the entry changes: the knob and its values, the upgrade's rows, or the patch
    with its files and line counts."""
    stats = [
        {"file": name, "added": int(added), "removed": int(removed)}
        for name, added, removed in model.patch_stats.get(entry.id, ())
    ]
    return {
        "target": entry.target,
        "knob": entry.knob,
        "before": entry.before,
        "also": _also_view(entry),
        "after": entry.after, "upgrade_rows": _upgrade_view(entry),
        "default": _default(model.defaults.get(entry.id)),
        "patch": entry.patch,
        "sha256": entry.sha256 or "",
        "commit": entry.commit or "",
        "origin": entry.origin or "",
        "files": [s["file"] for s in stats] or list(entry.files),
        "stats": stats,
        "added": sum(s["added"] for s in stats),
        "removed": sum(s["removed"] for s in stats),
    }


def entry_view(model: RenderModel, entry: Entry, chart_svg: str | None) -> dict[str, Any]:
    """Everything the templates show about one entry, as display-ready values."""
    evidence = _evidence_view(model, entry)
    last = entry.last_action()
    failure = None if entry.applied else health_failure(entry)
    history = _history_view(entry)
    return {
        "id": entry.id,
        "seq": entry.seq,
        "title": entry.title,
        "cls": entry.cls,
        "kind": entry.kind,
        "status": status_word(entry),
        # A value the health gate rolled back is held back as *failed its health check*
        # wherever its state shows (it is also suspected: `ledger list` says so).
        "state_label": "failed its health check" if failure else display_state(entry),
        "applied": entry.applied,
        "suspicion": entry.suspicion,
        "why": entry.why,
        "suspect_why": entry.suspect_why,
        "clear_why": entry.clear_why,
        "recorded": when(entry.recorded),
        "made": when(entry.made),
        "made_raw": entry.made,
        "last_action": last.action if last else "record",
        # A record's reason is the entry's why; a later action without one says nothing.
        "last_why": (last.why if last else "") or (entry.why if not last or last.action in
                                                     ("record", "adopt") else ""),
        "last_at": when(last.happened) if last else when(entry.recorded),
        "revert_why": "" if entry.applied else revert_reason(entry),
        **_reason_dates(entry),
        "health_failure": failure,
        "restore": None if entry.applied else _restore_plan(entry, evidence),
        **_change_view(model, entry),
        "history": history,
        "evidence": evidence,
        "headline": evidence["headline"] if evidence else "no evidence",
        "notes": [_note_view(n) for n in model.notes.get(entry.id, ())],
        "chart": chart_svg,
        "chart_inline": inline_svg(chart_svg, f"chart-{entry.id}") if chart_svg else None,
        "bisects": [
            {**b, "role": (b.get("roles") or {}).get(entry.id, "")}
            for b in model.bisects if entry.id in b["selection"]
        ],
    }


def build_views(model: RenderModel, charts: Mapping[str, str]) -> dict[str, Any]:
    """The template context shared by every output: entries, groups, knobs, timeline."""
    views = [entry_view(model, e, charts.get(e.id)) for e in model.entries]
    # Newest first by when the change was made (--when, an adopted commit's date), then
    # record order: a history brought in late sorts where it happened.
    newest_first = sorted(views, key=lambda v: (v["made_raw"], v["seq"]), reverse=True)
    titles = {v["id"]: v["title"] for v in views}
    failed = {v["id"] for v in views if v["health_failure"] is not None}

    def knob_rows(target: TargetState) -> list[dict[str, Any]]:
        return [
            {
                "knob": row.knob,
                "live": row.live,
                "full": row.ledger_full,
                "default": _default(row.default),
                "off": row.off_table,
                # The full ledger's value is one the health gate rolled back: not a gap.
                "failed": row.off_table and bool(row.entries) and row.entries[-1] in failed,
                "entries": [(i, titles.get(i, i)) for i in row.entries],
            }
            for row in target.knobs
        ]

    reverted = [v for v in newest_first if not v["applied"]]
    return {
        **incident_views(views, model.entries, model.bisects),
        "title": model.title,
        "entries": views,
        "groups": [(cls, [v for v in newest_first if v["cls"] == cls]) for cls in CLASSES],
        "off_table": reverted,
        "off_perf": [v for v in reverted if v["cls"] == "perf"],
        "off_other": [v for v in reverted if v["cls"] != "perf"],
        "patches": [v for v in views if v["kind"] == "patch"],
        "with_evidence": [v for v in views if v["evidence"] is not None],
        "targets": [
            {"name": t.name, "path": t.path, "format": t.format, "knobs": knob_rows(t)}
            for t in model.targets
        ],
        "timeline": timeline(model.log, model.entries),
        "bisects": list(model.bisects),
        "counts": {
            "entries": len(views),
            "perf": sum(v["cls"] == "perf" for v in views),
            "bugfix": sum(v["cls"] == "bugfix" for v in views),
            "applied": sum(v["applied"] for v in views),
            "reverted": len(reverted),
            "suspected": sum(v["status"] == "suspected" for v in views),
        },
    }


# ---------------------------------------------------------------------------------------
# Templates and files
# ---------------------------------------------------------------------------------------


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        # The templates ship as package data of the top-level `templates` package, so an
        # installed wheel finds them as well as a checkout does.
        loader=jinja2.PackageLoader("templates", ""),
        autoescape=lambda name: bool(name) and name.endswith(".html.j2"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(md=md_text, code=md_code, fence=md_fence)
    return env


def _write(path: Path, text: str) -> None:
    """Write atomically: a reader (or a crash) never sees a half-written doc."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render_docs(out_dir: Path, model: RenderModel, formats: Iterable[str] = FORMATS) -> list[Path]:
    """Render the change-history docs of ``model`` into ``out_dir``; return the files written.

    ``formats`` picks ``md`` (CHANGELOG.md, entries/<id>.md) and/or ``html`` (a
    self-contained index.html, and CHANGELOG.html and entries/<id>.html: the Markdown as
    pages, see ledger.render.pages); either writes the entries' charts, entries/<id>.svg.  The same model always gives the
    same bytes.  Raises :class:`~ledger.errors.InvalidValue` for an unknown format and
    :class:`~ledger.errors.LedgerError` when ``out_dir`` cannot be written.
    """
    chosen = list(dict.fromkeys(formats))
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise InvalidValue(
            f"unknown render format {', '.join(map(repr, unknown)) or '(none)'}: "
            f"use {' and/or '.join(FORMATS)}"
        )
    out_dir = Path(out_dir)
    charts = {}
    for entry in model.entries:
        summary = model.evidence.get(entry.id)
        svg = ab_chart_svg(summary, title=entry.title, salt=entry.id) if summary else None
        if svg is not None:
            charts[entry.id] = svg
    context = build_views(model, charts)
    context["formats"] = chosen
    env = _environment()

    outputs: list[tuple[Path, str]] = []
    changelog = env.get_template("changelog.md.j2").render(context)
    entry_template = env.get_template("entry.md.j2")
    pages = [(view, entry_template.render(context, e=view)) for view in context["entries"]]
    if "md" in chosen:
        outputs.append((out_dir / "CHANGELOG.md", changelog))
        outputs += [(out_dir / "entries" / f"{view['id']}.md", text) for view, text in pages]
    for view, _ in pages:  # the entry pages' charts, .md or .html
        if view["chart"]:
            outputs.append((out_dir / "entries" / f"{view['id']}.svg", view["chart"]))
    if "html" in chosen:
        from ledger.render.pages import html_page

        # Raw source, not a template: CSS braces must not meet jinja's syntax.
        css = env.loader.get_source(env, "style.css")[0]
        outputs.append(
            (out_dir / "index.html", env.get_template("index.html.j2").render(context, css=css))
        )
        outputs.append((out_dir / "CHANGELOG.html",
                        html_page(env, changelog, f"{model.title} · changelog", css,
                                  "index.html")))
        outputs += [(out_dir / "entries" / f"{view['id']}.html",
                     html_page(env, text, f"{view['title']} · {model.title}", css,
                               "../index.html")) for view, text in pages]
    try:
        for path, text in outputs:
            _write(path, text)
    except OSError as e:
        raise LedgerError(f"cannot write the rendered docs to {out_dir}: {e}") from e
    return [path for path, _ in outputs]


__all__ = [
    "KnobRow",
    "RenderModel",
    "TargetState",
    "build_views",
    "entry_view",
    "md_code",
    "md_text",
    "render_docs",
    "when",
]
