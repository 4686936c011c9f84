"""``ledger evidence prom`` and the bake of ``--restart --bake``: verdicts read from the
metrics production already exports, scraped by the operator's Prometheus.

``evidence prom ID --prometheus URL``: the windows come from the entry's history
(:func:`ledger.evidence.observed.history_windows`), the PromQL from the metric catalog of
the target's engine release (the bundled engine and a release-less target read SGLang's
newest names), the verdict from the statistics and guards every verdict uses.  The run is
stored as evidence of source ``observed`` and committed; Prometheus unreachable is an
error naming the URL and nothing is stored.

The bake (:func:`bake_verdict`): the same reading, with the windows of a restart that just
passed its health gate: before = the bake length up to the command, after = the bake
length from the health gate on.  It judges the command (before vs after), whatever it did
to the entries.  A bake that cannot read Prometheus is a failed bake: the caller rolls
back, as after a failed health check, and says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ledger.core.model import Entry
from ledger.errors import EvidenceError
from ledger.evidence.defaults import PRIMARY_METRIC
from ledger.store.txn import WriterLock
from ledger.store.workspace import Workspace

BUNDLED = "sglang"  # the bundled engine exports SGLang's names (engine/serving/metrics.py)


def engine_release(ws: Workspace, e: Entry | None) -> tuple[str, str | None]:
    """(engine, release) whose metric names to query: the entry's target's engine
    (``sglang==0.5.23``), else ledger.yaml's, else SGLang's newest names."""
    from ledger.commands.catalog import engine_of

    spec = None
    if e is not None and e.kind == "knob":
        spec = engine_of(ws, ws.target(e.target))
    elif ws.config.engine:
        spec = ws.config.engine
    if not spec:
        return BUNDLED, None
    name, _, release = spec.partition("==")
    return name, release or None


def _judging(ws: Workspace) -> dict:
    from ledger.commands.evidence import judging_of

    return judging_of(ws)


def observe_evidence(s, ref: str, prometheus: str, *, window: str = "20m",
                     warmup: str = "5m", match: str | None = None, step: str | None = None,
                     metric: str = PRIMARY_METRIC) -> dict:
    """Read ``ref``'s before and after windows from Prometheus, judge, store, commit."""
    from ledger.commands.evidence import commit_evidence
    from ledger.evidence import observed
    from ledger.evidence.prom import Prometheus
    from ledger.evidence.prom import parse_match
    from ledger.evidence.store import host_info
    from ledger.evidence.store import save_evidence
    from ledger.evidence.view import current_engine_commit
    from ledger.evidence.view import knob_context

    window_s = observed.parse_duration(window, "--window")
    warmup_s = observed.parse_duration(warmup, "--warmup", allow_zero=True)
    step_s = observed.parse_duration(step, "--step") if step else None
    selector, prom = parse_match(match), Prometheus(prometheus)
    with WriterLock(s.ws, s.command):
        ws = s.ws
        e = ws.resolve(ref)
        windows, notes = observed.history_windows(e, ws.entries(), window_s, warmup_s,
                                                  time.time())
        engine, release = engine_release(ws, e)
        obs = observed.observe(prom, engine, release, selector, windows, step_s)
        meta = {"prometheus": prom.url, "match": match or "", "engine": engine,
                "release": release, "step_s": obs.step_s, "queries": obs.queries,
                "windows": [w.to_dict() for w in windows], "idle_steps": obs.idle_steps,
                "sparse_steps": obs.sparse_steps,
                "buckets_s": obs.buckets, "observer": host_info()}
        summary = save_evidence(
            ws.root, e.id, obs.rows, meta, source="observed", metric=metric,
            engine_commit=current_engine_commit(ws), context=knob_context(ws, e),
            started=windows[0].to_dict()["start"], finished=windows[1].to_dict()["end"],
            notes=[*observed.NOTES, *notes], judging=_judging(ws),
            describe=lambda summ, analysis: _described(summ, analysis, obs, meta, window_s),
        )
        commit_evidence(ws, e, f"evidence prom {e.id}: {summary['headline']}")
    return summary


def _described(summary: dict, analysis: dict, obs, meta: dict, window_s: float) -> dict:
    from ledger.evidence.observed import observed_headline
    from ledger.evidence.observed import resolution_notes
    from ledger.evidence.observed import span_text

    return {"headline": observed_headline(summary["headline"], window_s),
            "observed": {"what": f"observed in production, {span_text(window_s)} each side",
                         "design": "observational (not a controlled A/B)",
                         "prometheus": meta["prometheus"], "match": meta["match"],
                         "engine": meta["engine"], "release": meta["release"],
                         "windows": meta["windows"], "step_s": meta["step_s"],
                         "idle_steps": meta["idle_steps"],
                         "sparse_steps": meta["sparse_steps"],
                         "load": "requests in the engine (running + queued) per step, "
                                 "nearest power of two",
                         "counter_resets": "handled by rate()",
                         "bucket_resolution": resolution_notes(obs, analysis)}}


@dataclass
class BakeResult:
    """What a bake found: ``ok`` (keep the change), the verdict line, or why it failed."""

    ok: bool
    seconds: float
    verdict: str = ""
    line: str = ""
    error: str = ""

    def describe(self) -> str:
        span = _span(self.seconds)
        if self.error:
            return f"bake {span} FAILED: {self.error}"
        return f"bake {span}: {self.line}" + ("" if self.ok else " (critical regression)")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": self.seconds, "verdict": self.verdict,
                "line": self.line, "error": self.error}


def _span(seconds: float) -> str:
    from ledger.evidence.observed import span_text

    return span_text(seconds)


@dataclass
class BakeSpec:
    """``--bake DURATION --prometheus URL [--match SEL] [--step DUR]`` as given."""

    bake: str
    prometheus: str | None
    match: str | None = None
    step: str | None = None

    def checked(self) -> tuple[float, str]:
        """(seconds, selector), refused before anything changes when unusable."""
        from ledger.evidence.observed import parse_duration
        from ledger.evidence.prom import parse_match

        seconds = parse_duration(self.bake, "--bake")
        if not self.prometheus:
            raise EvidenceError("--bake needs --prometheus URL: the server that scrapes the "
                                "restarted engine")
        return seconds, parse_match(self.match)


def bake_verdict(ws: Workspace, spec: BakeSpec, changed_at: float, healthy_at: float,
                 entry: Entry | None, sleep=time.sleep) -> BakeResult:
    """Wait the bake, read before ``[changed_at - bake, changed_at]`` and after
    ``[healthy_at, healthy_at + bake]``, judge with ledger.yaml's tolerance and guards.
    Never raises for Prometheus: a failure to read is a failed bake (``error``)."""
    from ledger.evidence import observed
    from ledger.evidence.headline import format_headline
    from ledger.evidence.prom import Prometheus
    from ledger.evidence.stats import analyze

    seconds, selector = spec.checked()
    try:
        step = observed.parse_duration(spec.step, "--step") if spec.step else None
    except EvidenceError as err:
        return BakeResult(False, seconds, error=str(err))
    # Past the bake's end by a step (at least 2 s), so Prometheus has scraped its last step.
    left = healthy_at + seconds + max(2.0, step or 0.0) - time.time()
    if left > 0:
        sleep(left)
    windows = [observed.Window("A", changed_at - seconds, changed_at),
               observed.Window("B", healthy_at, healthy_at + seconds)]
    engine, release = engine_release(ws, entry)
    try:
        obs = observed.observe(Prometheus(spec.prometheus), engine, release, selector,
                               windows, step)
        analysis = analyze(obs.rows, PRIMARY_METRIC, **_judging(ws))
    except EvidenceError as err:
        return BakeResult(False, seconds, error=f"{err}; rolled back: a change whose bake "
                          "cannot be read is not kept")
    line = observed.observed_headline(format_headline(analysis), seconds)
    return BakeResult(analysis["verdict"] != "regression", seconds, analysis["verdict"], line)


__all__ = ["BakeResult", "BakeSpec", "bake_verdict", "engine_release", "observe_evidence"]
