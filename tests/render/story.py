"""A render model holding every kind of entry and state the docs must show.

The story is the one the tool exists for (docs/ARCHITECTURE.md): a perf knob that gained +12.8% was
suspected in a hang, reverted, and later cleared; bugfix knobs and patches stay applied.
Hostile strings (a script tag, table pipes, backticks, a leading '#') ride along in
titles, reasons and values so every test sees them.
"""

from __future__ import annotations

from typing import Any

from ledger.core.action import Action
from ledger.core.model import Entry
from ledger.render.model import KnobRow
from ledger.render.model import RenderModel
from ledger.render.model import TargetState

SCRIPT = "<script>alert(1)</script>"
PIPE_TITLE = "Queue | size | 8"


def ab_summary(
    entry: str,
    deltas: dict[int, float],
    *,
    verdict: str = "gain",
    commit: str = "a1b2c3d4e5f6",
    extra_metric: bool = False,
) -> dict[str, Any]:
    """An evidence summary in the schema ledger/evidence.py writes."""
    rows = []
    for conc, delta in deltas.items():
        base = 20.0 * conc
        metrics: dict[str, Any] = {
            "output_throughput": {
                "median_a": base,
                "median_b": round(base * (1 + delta / 100), 1),
                "delta_pct": delta,
                "ci_low_pct": delta - 3.7,
                "ci_high_pct": delta + 3.2,
                "p_value": 0.008 if abs(delta) > 2 else 0.41,
                "p_adjusted": 0.024 if abs(delta) > 2 else 0.41,
                "verdict": verdict if abs(delta) > 2 else "neutral",
                "higher_is_better": True,
            }
        }
        if extra_metric:
            metrics["mean_ttft_ms"] = {
                "median_a": 41.5,
                "median_b": 40.9,
                "delta_pct": -1.4,
                "ci_low_pct": -4.0,
                "ci_high_pct": 1.1,
                "p_value": 0.55,
                "verdict": "neutral",
                "higher_is_better": False,
                "n_a": 4,
                "n_b": 5,
            }
        rows.append({"concurrency": conc, "n_a": 5, "n_b": 5, "metrics": metrics})
    top = max(deltas, key=lambda c: deltas[c])
    return {
        "entry": entry,
        "run_id": f"run-{entry}",
        "source": "ab",
        "metric": "output_throughput",
        "higher_is_better": True,
        "verdict": verdict,
        "outputs": "identical",
        "engine_commit": commit,
        "context": {"preset": "tiny"},
        "started": "2026-05-02T14:14:00+00:00",
        "finished": "2026-05-02T14:48:00+00:00",
        "headline": (
            f"{verdict} {deltas[top]:+.1f}% output_throughput @c{top} "
            f"(CI {deltas[top] - 3.7:+.1f}..{deltas[top] + 3.2:+.1f}%, n=5/5, "
            "outputs identical)"
        ),
        "by_concurrency": rows,
    }


def _act(at: str, action: str, why: str = "", command: str = "") -> Action:
    return Action(at=at, action=action, why=why, command=command)


def story_entries() -> list[Entry]:
    day = "2026-05-02T"
    return [
        Entry(
            id="e1-ctas",
            seq=1,
            kind="knob",
            cls="perf",
            slug="ctas",
            title="Raise decode MMA target CTAs to 512",
            recorded=day + "14:50:00+00:00",
            target="decode",
            knob="SGLANG_SM120_MMA_TARGET_CTAS",
            before="256",
            after="512",
            state="reverted",
            suspicion="cleared",
            why="removes the wave-quantization dip",
            suspect_why="hang appeared right after it shipped",
            clear_why="the hang was a client proxy",
            history=(
                _act(
                    day + "14:50:00+00:00",
                    "record",
                    "removes the wave-quantization dip",
                    "record knob",
                ),
                _act(
                    day + "19:02:00+00:00",
                    "suspect",
                    "hang appeared right after it shipped",
                    "suspect e1-ctas",
                ),
                _act(
                    "2026-05-05T09:30:00+00:00",
                    "clear",
                    "the hang was a client proxy",
                    "clear e1-ctas",
                ),
            ),
        ),
        Entry(
            id="e2-queue",
            seq=2,
            kind="knob",
            cls="perf",
            slug="queue",
            title=PIPE_TITLE,
            recorded=day + "15:10:00+00:00",
            target="decode",
            knob="SGLANG_DISAGGREGATION_QUEUE_SIZE",
            before="4",
            after="8|`x`",
            why="deeper transfer queue",
            history=(_act(day + "15:10:00+00:00", "record", "deeper transfer queue"),),
        ),
        Entry(
            id="e3-pool",
            seq=3,
            kind="knob",
            cls="perf",
            slug="pool",
            title="Grow the transfer thread pool",
            recorded=day + "15:20:00+00:00",
            target="prefill",
            knob="SGLANG_DISAGGREGATION_THREAD_POOL_SIZE",
            before=None,
            after="12",
            state="reverted",
            suspicion="suspected",
            suspect_why="# more threads, more contention?\nsecond line",
            history=(
                _act(day + "15:20:00+00:00", "record"),
                _act(
                    day + "19:05:00+00:00",
                    "suspect",
                    "# more threads, more contention?\nsecond line",
                ),
            ),
        ),
        Entry(
            id="e4-timeout",
            seq=4,
            kind="knob",
            cls="bugfix",
            slug="timeout",
            title="Inflight watchdog timeout",
            recorded=day + "18:40:00+00:00",
            target="decode",
            knob="ENGINE_INFLIGHT_TIMEOUT_S",
            before="0",
            after="30",
            why="turn a silent wedge into an error",
            history=(_act(day + "18:40:00+00:00", "record", "turn a silent wedge into an error"),),
        ),
        Entry(
            id="e5-pin",
            seq=5,
            kind="patch",
            cls="bugfix",
            slug="pin",
            title="Pin inflight requests until the KV ack",
            recorded=day + "18:45:00+00:00",
            patch="patches/e5-pin.patch",
            sha256="f" * 64,
            files=("engine/pd/prefill.py", "engine/pd/transfer.py"),
            why="KV freed before the decode side acked",
            history=(
                _act(day + "18:45:00+00:00", "record", "KV freed before the decode side acked"),
            ),
        ),
        Entry(
            id="e6-splitk",
            seq=6,
            kind="patch",
            cls="perf",
            slug="splitk",
            title="Split-K decode: " + SCRIPT,
            recorded=day + "16:00:00+00:00",
            patch="patches/e6-splitk.patch",
            sha256="e" * 64,
            files=("engine/attn|split.py",),
            state="reverted",
            why="more splits at low batch",
            history=(
                _act(day + "16:00:00+00:00", "record", "more splits at low batch"),
                _act(
                    day + "19:10:00+00:00",
                    "revert",
                    "rule out the decode path " + SCRIPT,
                    "revert --perf-only",
                ),
            ),
        ),
        Entry(
            id="e7-pages",
            seq=7,
            kind="knob",
            cls="perf",
            slug="pages",
            title="One KV page",
            recorded=day + "19:20:00+00:00",
            target="decode",
            knob="ENGINE_NUM_PAGES",
            before="2048",
            after="1",
            state="reverted",
            suspicion="suspected",
            suspect_why="rollback of `record knob`: health check failed on decode",
            history=(
                _act(day + "19:20:00+00:00", "record", "", "record knob --restart"),
                _act(day + "19:20:01+00:00", "restart",
                     "after `record knob`: decode: restarted (pid 1 -> 2); health check "
                     "FAILED: the process exited", "record knob --restart"),
                _act(day + "19:20:01+00:00", "rollback",
                     "rollback of `record knob`: health check failed on decode",
                     "record knob --restart"),
            ),
        ),
    ]


def story_model(title: str = "prod-decode " + SCRIPT) -> RenderModel:
    entries = story_entries()
    return RenderModel(
        title=title,
        entries=entries,
        targets=[
            TargetState(
                name="decode",
                path="serve/decode.sh",
                format="bash",
                knobs=[
                    KnobRow(
                        "SGLANG_SM120_MMA_TARGET_CTAS",
                        live="256",
                        ledger_full="512",
                        entries=["e1-ctas"],
                    ),
                    KnobRow(
                        "SGLANG_DISAGGREGATION_QUEUE_SIZE",
                        live="8|`x`",
                        ledger_full="8|`x`",
                        entries=["e2-queue"],
                    ),
                    KnobRow(
                        "ENGINE_INFLIGHT_TIMEOUT_S",
                        live="30",
                        ledger_full="30",
                        entries=["e4-timeout"],
                    ),
                ],
            ),
            TargetState(
                name="prefill",
                path="serve/prefill.env",
                format="dotenv",
                knobs=[
                    KnobRow(
                        "SGLANG_DISAGGREGATION_THREAD_POOL_SIZE",
                        live=None,
                        ledger_full="12",
                        entries=["e3-pool"],
                    ),
                ],
            ),
        ],
        evidence={
            "e1-ctas": ab_summary("e1-ctas", {1: 0.4, 16: 3.1, 64: 12.8, 96: 5.7}),
            "e2-queue": ab_summary(
                "e2-queue", {16: 0.8, 64: 1.1}, verdict="neutral", commit="0ldc0mm1t"
            ),
            "e6-splitk": ab_summary("e6-splitk", {1: 9.5, 64: 2.4}, extra_metric=True),
        },
        stale={"e2-queue"},
        patch_stats={
            "e5-pin": [("engine/pd/prefill.py", 14, 3), ("engine/pd/transfer.py", 6, 1)],
            "e6-splitk": [("engine/attn|split.py", 22, 9)],
        },
    )
