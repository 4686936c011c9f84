"""Observed evidence: an entry's effect read from what Prometheus scraped in production.

Not a controlled A/B.  Side A and side B are two stretches of time of the same service,
before and after the change (the entry's own history says when), under whatever traffic
came; everything else that changed between them (traffic mix, other deploys) is in the
difference too.  So it is stored and shown apart from bench runs: source ``observed``,
its headline starting ``observed in production, 20 min each side (not a controlled A/B)``,
its rows never joined with bench rows.

Decisions where the issue is silent:

* **Windows.**  The change is the entry's latest state change (record, adopt, restore,
  revert, suspect, rollback) at time T.  Before: ``[T - window, T]``; after:
  ``[T + warmup, T + warmup + window]`` -- the warmup covers the restart and the caches
  filling.  The side of each window is the entry's state in it (A reverted, B applied),
  so a revert's "after" is side A.  An after window that has not ended yet is refused
  with the time it ends; another entry changed inside the after window is a warning.
  The before window gets the same warmup: when an earlier change (another entry's, or
  this entry's own earlier revert) happened less than ``warmup`` before it starts, it
  starts at that change + warmup instead, and the summary says how long it is (with no
  settled time left before T the command refuses, naming the change).  A restart's ramp
  on one side only read as the change's effect: on the 2-core test machine the first
  20 s after a restart ran at half speed, and a harmless change read +75%.
* **Samples.**  One row per query step (``--step``, default window / 30, at least 1 s);
  each step's ``rate()`` reads the step's own interval, so rows do not overlap.  Steps
  are still consecutive stretches of one service, not independent runs: the interval is
  computed as for unpaired runs, and the summary says it assumes independence.
* **Load.**  Each step is put in a bin of the requests in the engine: the averages of
  ``num_running_reqs`` and ``num_queue_reqs`` over the step, summed and rounded to the
  nearest power of two (shown as ``@load 4``), stored in the ``concurrency`` column;
  A and B are compared bin by bin as ``ledger ab`` compares concurrencies: a throughput
  at 4 requests in the engine is its speed at that load, whatever the traffic.  Running
  alone would not do: a change that moves requests between the queue and the batch
  (chunked prefill, a lower max-running) would put every "after" step in another bin
  than the "before" ones and the slowdown would never be compared.  Both gauges stay in
  ``runs.csv`` (not judged).  Idle steps (fewer than 0.5 requests) are dropped and
  counted.  A bin is compared only where both sides have :data:`MIN_STEPS` steps in it
  (5, not the 3 runs a bench side needs: consecutive scrape steps are not independent runs,
  and 3 of them gave a t interval of ±50% and more at a steady load on a 2-core machine):
  the odd step of a restart's ramp or a lull has no counterpart and would leave every
  verdict ``inconclusive``; such steps are left out and counted (``sparse_steps``), and
  with no bin left the command says which bins each side saw.
* **Primary metric** ``output_throughput`` as for bench evidence (per load bin it is the
  engine's speed); ``--metric`` picks another (``median_itl_ms``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from datetime import timezone
from typing import Any
from typing import Sequence

from ledger.core.model import Entry
from ledger.core.when import parse_time
from ledger.core.when import stamp
from ledger.errors import EvidenceError
from ledger.evidence.prom import LATENCIES
from ledger.evidence.prom import QUEUED
from ledger.evidence.prom import RUNNING
from ledger.evidence.prom import Prometheus
from ledger.evidence.prom import bucket_resolution
from ledger.evidence.prom import metric_names
from ledger.evidence.prom import queries
from ledger.evidence.verdict import MIN_RUNS

MIN_STEPS = max(MIN_RUNS, 5)  # steps a side for a load bin to be compared (module docs)

CHANGES = ("record", "adopt", "restore", "revert", "suspect", "rollback")
STEPS_PER_WINDOW = 30
IDLE_BELOW = 0.5
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?\Z")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str, what: str, allow_zero: bool = False) -> float:
    """``20m``, ``5m``, ``30s``, ``1h``, ``90`` (seconds) as seconds > 0 (>= 0 with
    ``allow_zero``)."""
    m = _DURATION.match(str(text).strip())
    seconds = float(m.group(1)) * _UNITS[m.group(2)] if m else -1.0
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise EvidenceError(f"{what} {text!r}: write a duration such as 20m, 30s or 1h")
    return seconds


def span_text(seconds: float) -> str:
    """``20 min``, ``30 s``, ``1.5 h``."""
    if seconds >= 3600 and seconds % 1800 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 30 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


@dataclass(frozen=True)
class Window:
    side: str  # A (entry reverted) or B (applied)
    start: float  # seconds since the epoch
    end: float

    def to_dict(self) -> dict[str, str]:
        return {"side": self.side, "start": _iso(self.start), "end": _iso(self.end)}


def _iso(t: float) -> str:
    return stamp(datetime.fromtimestamp(t, timezone.utc))


def _epoch(text: str) -> float:
    moment = parse_time(text)
    if moment is None:
        raise EvidenceError(f"history time {text!r} is not a time")
    return moment.timestamp()


def history_windows(entry: Entry, others: Sequence[Entry], window_s: float, warmup_s: float,
                    now: float) -> tuple[list[Window], list[str]]:
    """The before and after windows of ``entry``'s latest change, and warnings (rules in
    the module docs); EvidenceError when it has none or the after window is not over."""
    changes = [a for a in entry.history if a.action in CHANGES]
    if not changes:
        raise EvidenceError(f"entry {entry.id} has no change in its history to observe")
    last = max(changes, key=lambda a: a.happened)
    t = _epoch(last.happened)
    after = "B" if entry.applied else "A"
    before = "A" if after == "B" else "B"
    start, warnings = _settled_start(entry, last, others, t, window_s, warmup_s)
    windows = [Window(before, start, t),
               Window(after, t + warmup_s, t + warmup_s + window_s)]
    if windows[1].end > now:
        raise EvidenceError(
            f"the after window of {entry.id}'s {last.action} at {last.happened} ends at "
            f"{_iso(windows[1].end)} (in {math.ceil(windows[1].end - now)} s): wait until "
            "then, or give a shorter --window/--warmup")
    for other in others:
        if other.id == entry.id:
            continue
        for a in other.history:
            if a.action in CHANGES and t <= _epoch(a.happened) <= windows[1].end:
                warnings.append(f"entry {other.id} also changed ({a.action} at "
                                f"{a.happened}) inside the observed windows: its effect is "
                                "in the difference too")
    return windows, warnings


def _settled_start(entry: Entry, last, others: Sequence[Entry], t: float, window_s: float,
                   warmup_s: float) -> tuple[float, list[str]]:
    """Where the before window starts: ``t - window``, or later when an earlier change (of
    any entry, this one's own earlier revert included) was still inside its warmup then --
    a restart's ramp and cold caches on one side only would read as the change's effect.
    EvidenceError when no settled time is left before ``t``."""
    pool = [entry, *(o for o in others if o.id != entry.id)]
    earlier = [(_epoch(a.happened), e.id, a) for e in pool for a in e.history
               if a.action in CHANGES and a is not last
               and t - window_s - warmup_s < _epoch(a.happened) < t]
    if not earlier:
        return t - window_s, []
    at, who, action = max(earlier, key=lambda x: x[0])
    settled = at + warmup_s
    if settled <= t - window_s:
        return t - window_s, []
    if settled >= t:
        raise EvidenceError(
            f"the before window of {entry.id}'s {last.action} at {last.happened} is inside "
            f"the warmup of entry {who}'s {action.action} at {action.happened} "
            f"({span_text(warmup_s)}): no settled time is left before the change; give a "
            "shorter --warmup")
    return settled, [f"the before window is {span_text(round(t - settled))}, not "
                     f"{span_text(window_s)}: it starts after the warmup of entry {who}'s "
                     f"{action.action} at {action.happened}"]


@dataclass
class Observation:
    """What was read: rows (runs-table shaped), the PromQL, bucket bounds, idle steps."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    queries: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, list[float]] = field(default_factory=dict)
    idle_steps: int = 0
    sparse_steps: int = 0  # busy steps in a load bin the other side (nearly) never saw
    windows: list[Window] = field(default_factory=list)
    step_s: float = 0.0


def load_bin(running: float) -> int:
    """The nearest power of two of a step's average requests in the engine (at least 1)."""
    return max(1, 2 ** round(math.log2(max(running, 1.0))))


def observe(prom: Prometheus, engine: str, release: str | None, match: str,
            windows: Sequence[Window], step_s: float | None = None) -> Observation:
    """Query each window step by step; EvidenceError naming the URL when it cannot."""
    step = step_s or max(1.0, (windows[0].end - windows[0].start) / STEPS_PER_WINDOW)
    out = Observation(queries=queries(engine, release, match, step), windows=list(windows),
                      step_s=step)
    for w in windows:
        series = {k: prom.range(q, w.start + step, w.end, step) for k, q in out.queries.items()}
        repeat: dict[int, int] = {}
        for t in sorted(series[RUNNING]):
            running = series[RUNNING][t] + series[QUEUED].get(t, 0.0)
            if running < IDLE_BELOW or t not in series["output_throughput"]:
                out.idle_steps += 1
                continue
            load = load_bin(running)
            row = {"side": w.side, "concurrency": load, "repeat": repeat.get(load, 0),
                   "run_time": t}
            row.update({k: v[t] for k, v in series.items() if t in v})
            out.rows.append(row)
            repeat[load] = repeat.get(load, 0) + 1
    names = metric_names(engine, release)
    _require_rows(out, prom, names, match)
    _keep_shared_bins(out)
    first, last = min(w.start for w in windows), max(w.end for w in windows)
    for measure, stem in LATENCIES:
        out.buckets[stem] = prom.bucket_bounds(names[measure], match, first, last)
    return out


def _keep_shared_bins(out: Observation) -> None:
    """Only the load bins with :data:`MIN_STEPS` steps on both sides (module docs)."""
    counts: dict[tuple[str, int], int] = {}
    for row in out.rows:
        key = (row["side"], row["concurrency"])
        counts[key] = counts.get(key, 0) + 1
    shared = {load for (_, load) in counts
              if min(counts.get((side, load), 0) for side in ("A", "B")) >= MIN_STEPS}
    kept = [r for r in out.rows if r["concurrency"] in shared]
    out.sparse_steps = len(out.rows) - len(kept)
    if not kept:
        seen = "; ".join(f"{side}: " + (", ".join(f"{n} at load {load}" for (s, load), n
                                                  in sorted(counts.items()) if s == side)
                                        or "none") for side in ("A", "B"))
        raise EvidenceError(f"no load bin has {MIN_STEPS} steps on both sides (steps per "
                            f"bin, {seen}): the load before and after differ too much to "
                            "compare; a longer --window may find a shared one")
    out.rows = kept


def _require_rows(out: Observation, prom: Prometheus, names: dict[str, str],
                  match: str) -> None:
    if not out.rows:
        raise EvidenceError(f"Prometheus at {prom.url} has no busy step of "
                            f"{names['generation_tokens']}{'{' + match + '}' if match else ''} "
                            "in the windows: is the selector right, and was the engine "
                            "serving then?")


def resolution_notes(obs: Observation, analysis: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Per latency key and side, the bucket its median quantile was interpolated in."""
    out: dict[str, dict[str, str]] = {}
    for block in analysis["by_concurrency"]:
        for key, cell in block["metrics"].items():
            stem = next((s for _, s in LATENCIES if f"_{s}_ms" in key), None)
            if stem is None:
                continue
            for side, value in (("A", cell.get("median_a")), ("B", cell.get("median_b"))):
                said = bucket_resolution(obs.buckets.get(stem, []), value)
                if said:
                    out.setdefault(f"{key} @load {block['concurrency']}", {})[side] = said
    return out


def observed_headline(headline: str, window_s: float) -> str:
    """The stored headline as an observed one: says where it came from, and that the load
    points are bins of requests in the engine."""
    body = re.sub(r"@c(\d+)", r"@load \1", headline)
    return f"observed in production, {span_text(window_s)} each side (not a controlled " \
        f"A/B): {body}"


NOTES = ("observational: A and B are stretches of time before and after the change under "
         "live traffic, not a controlled A/B; steps of one window are treated as independent "
         "samples, which they are only roughly",)

__all__ = ["CHANGES", "NOTES", "Observation", "Window", "history_windows", "load_bin",
           "observe", "observed_headline", "parse_duration", "resolution_notes", "span_text"]
