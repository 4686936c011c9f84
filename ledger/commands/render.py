"""`ledger render`: build the render model from the workspace and write the docs.

The model is a snapshot (see :mod:`ledger.render.model`): entries, the knob state of
every target (live value and the value with every entry applied), the latest evidence
of each entry with its staleness, and a diffstat per patch entry.  The renderer itself
touches no file but its output, so the same ledger renders byte-identical docs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from ledger.commands.catalog import knob_defaults
from ledger.core.layers import full_knobs
from ledger.core.layers import knob_layers
from ledger.core.model import Entry
from ledger.core.when import dated_log
from ledger.errors import LedgerError
from ledger.evidence.view import evidence_for
from ledger.store import wsgit
from ledger.store.targets import read_target
from ledger.store.workspace import Workspace

_DIFF_FILE = re.compile(r"^diff --git a/(.*?) b/(.*)$")


def diffstat(text: str) -> list[tuple[str, int, int]]:
    """(file, lines added, lines removed) per file of a unified diff, in order."""
    stats: list[list] = []
    for line in text.splitlines():
        m = _DIFF_FILE.match(line)
        if m:
            stats.append([m.group(2), 0, 0])
        elif line.startswith("+++ ") or line.startswith("--- "):
            if not stats:
                stats.append([line[4:].removeprefix("b/"), 0, 0])
        elif stats and line.startswith("+"):
            stats[-1][1] += 1
        elif stats and line.startswith("-"):
            stats[-1][2] += 1
    return [(f, a, r) for f, a, r in stats]


def build_model(ws: Workspace):
    from ledger.evidence.notes import load_notes
    from ledger.render.docs import KnobRow
    from ledger.render.docs import RenderModel
    from ledger.render.docs import TargetState

    entries = ws.entries()
    layers = knob_layers(entries)
    full = full_knobs(entries)
    defaults = knob_defaults(ws, entries)  # loads catalogs only if some side is unset
    targets = []
    for name, t in ws.config.targets.items():
        try:
            tf = read_target(ws, t)
            live = {key: tf.live(key) for (tname, key) in layers if tname == name}
        except LedgerError:
            live = {}
        rows = [
            KnobRow(knob, live.get(knob), full[(tname, knob)], [e.id for e in layer],
                    defaults.get((tname, knob)))
            for (tname, knob), layer in sorted(layers.items()) if tname == name
        ]
        targets.append(TargetState(name, t.path, t.format, rows))
    evidence, stale = {}, set()
    for e in entries:
        info = evidence_for(ws, e)
        if info.summary is not None:
            # The headline as `show` says it: a stale one with what changed since (issue 52).
            evidence[e.id] = {**info.summary, "headline": info.text, "stale_said": True} \
                if info.stale else info.summary
            if info.stale:
                stale.add(e.id)
    patch_stats = {e.id: _patch_stats(ws, e) for e in entries if e.kind == "patch"}
    notes = {e.id: n for e in entries if (n := load_notes(ws.root, e.id))}
    return RenderModel(title=docs_title(ws), entries=list(entries), targets=targets,
                       evidence=evidence, stale=stale, patch_stats=patch_stats, notes=notes,
                       bisects=bisect_views(ws, {e.id for e in entries}),
                       log=dated_log(wsgit.log(ws.root)),
                       defaults={e.id: defaults[(e.target, e.knob)] for e in entries
                                 if e.kind == "knob" and (e.target, e.knob) in defaults})


def docs_title(ws: Workspace) -> str:
    """The docs' title: ledger.yaml's ``title:``; else "Change history — " and the engines
    its targets run (``sglang==0.5.23, vllm``; each target's, see
    ledger.commands.catalog.engine_of), else its targets' names: what the workspace is
    for, never the name of the directory it happens to sit in."""
    if ws.config.title:
        return ws.config.title
    from ledger.commands.catalog import engine_of

    engines = []
    for t in ws.config.targets.values():
        try:
            engine = engine_of(ws, t)
        except LedgerError:
            engine = None
        engines.append(engine)
    named = list(dict.fromkeys(e for e in engines if e))
    if named:
        return "Change history — " + ", ".join(named)
    if ws.config.targets:
        return "Change history — " + ", ".join(ws.config.targets)
    return "Change history"


def bisect_views(ws: Workspace, known: set[str]) -> list[dict]:
    """Each committed bisect record as the docs show it: conclusion, roles, timeline."""
    from ledger.render.bisect import role_of
    from ledger.render.bisect import summary
    from ledger.render.bisect import timeline
    from ledger.store.bisect_state import list_records

    views = []
    for r in list_records(ws):
        selection = [s.get("id") for s in r.get("selection") or () if s.get("id") in known]
        conclusion = r.get("conclusion") or {}
        views.append({
            "id": str(r.get("id", "")), "started": str(r.get("started", "")),
            "status": str(r.get("status", "")), "summary": summary(r),
            "text": str(conclusion.get("text") or ""),
            "confidence": str((conclusion.get("confidence") or {}).get("text") or ""),
            "check": str((r.get("check") or {}).get("text", "")), "runs": r.get("runs", 1),
            "kind": str(conclusion.get("kind") or ""),
            "culprits": [i for i in conclusion.get("entries") or () if i in known]
            if conclusion.get("kind") in ("culprit", "interaction") else [],
            "selection": selection, "roles": {i: role_of(r, i) for i in selection},
            "steps": timeline(r),
        })
    return views


def _patch_stats(ws: Workspace, e: Entry) -> list[tuple[str, int, int]]:
    try:
        return diffstat((ws.root / e.patch).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return [(f, 0, 0) for f in e.files]


def render(ws: Workspace, out: Path | None = None, formats: Sequence[str] = ("md", "html")) -> list[Path]:
    """Write the change-history docs to ``out`` (default ``<workspace>/docs``)."""
    from ledger.render.docs import render_docs

    out_dir = Path(out) if out is not None else ws.root / "docs"
    # normpath: `--out ../docs` is reported as the folder it is, not ws/../docs.
    return render_docs(Path(os.path.normpath(out_dir.absolute())), build_model(ws),
                       tuple(formats))
