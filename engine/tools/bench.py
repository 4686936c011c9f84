"""Offline and online benchmarks; results use sglang ``bench_serving`` key names.

One JSON object per concurrency level is appended (JSONL) to the output file, plus
``output_digest`` (sha256 of every generated token id, in prompt order) so two runs can
be checked for identical outputs, and the knob values in effect.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from collections.abc import Callable

from engine.knobs import EngineKnobs


def make_prompts(num: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """Deterministic random prompts (same for every run and concurrency level)."""
    import random

    rng = random.Random(seed)
    top = min(vocab, 256)
    return [[rng.randrange(top) for _ in range(length)] for _ in range(num)]


def output_digest(outputs: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(outputs, separators=(",", ":")).encode()).hexdigest()[:16]


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(concurrency: int, duration: float, input_lens: list[int],
              outputs: list[list[int]], ttfts: list[float], e2es: list[float],
              itls: list[float]) -> dict[str, Any]:
    """Per-request latencies (seconds) -> the bench_serving result fields (ms)."""
    tpots = [(e - t) / (len(o) - 1) for o, t, e in zip(outputs, ttfts, e2es) if len(o) > 1]
    out_tokens = sum(len(o) for o in outputs)

    def ms(xs: list[float], what: str) -> float:
        if not xs:
            return 0.0
        return {"mean": statistics.fmean(xs), "median": statistics.median(xs),
                "p99": _pct(xs, 0.99), "std": statistics.pstdev(xs)}[what] * 1e3

    res: dict[str, Any] = {
        "backend": "engine", "max_concurrency": concurrency, "concurrency": concurrency,
        "completed": len(outputs), "duration": duration,
        "total_input_tokens": sum(input_lens), "total_output_tokens": out_tokens,
        "request_throughput": len(outputs) / duration,
        "input_throughput": sum(input_lens) / duration,
        "output_throughput": out_tokens / duration,
        "total_throughput": (sum(input_lens) + out_tokens) / duration,
    }
    for name, xs in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e_latency", e2es)):
        for stat in ("mean", "median", "std", "p99"):
            res[f"{stat}_{name}_ms"] = ms(xs, stat)
    # One sequence's decode speed, tokens/s after its first token (1000 / median TPOT): what
    # a decode-side change moves, without the prefill's share of ``output_throughput``.
    res["decode_throughput"] = 1e3 / res["median_tpot_ms"] if tpots else 0.0
    res["output_digest"] = output_digest(outputs)
    return res


class DecodeStepClock:
    """The wall time of each decode step of an offline run (``engine.on_step``), for
    ``peak_decode_throughput``: 1000 / the fastest decode step's ms, one sequence's decode
    speed when nothing else held its core.

    Why the fastest step and not the median (``decode_throughput``): on a shared machine
    a step's wall time is its own work plus whatever slices the OS gave a neighbour
    meanwhile.  Under a load of 3 and more on 2 cores most steps are stretched, by a share
    that changes from one run to the next, so a run's median measures the neighbours as
    much as the engine (measured, load ~14, A/A: per-pair spread 12-27% on the median,
    5-7% on the fastest step).  Interference only ever adds time, so the fastest of a
    run's ~200 steps is the least disturbed estimate of what a step costs (``timeit``'s
    rule: the slower repeats are the machine, not the code).  Process CPU time was tried
    too: a neighbour still costs a step caches and a shared core, and a run's median CPU
    time of a step spread 7-15% a pair.  The median stays in the file; a knob that
    changes how steps vary (stalls, preemption) shows there, not here.
    """

    def __init__(self) -> None:
        self.decode_s: list[float] = []

    def start(self) -> None:
        self.decode_s = []

    def on_step(self, batch: Any, wall_s: float) -> None:
        if not batch.is_prefill:
            self.decode_s.append(wall_s)

    def fields(self) -> dict[str, float]:
        """``min_decode_step_ms`` and ``peak_decode_throughput`` (1000 / it); empty when
        nothing was decoded."""
        fastest = min(self.decode_s, default=0.0) * 1e3
        if fastest <= 0:
            return {}
        return {"min_decode_step_ms": fastest, "peak_decode_throughput": 1e3 / fastest}


def bench_offline(engine: Any, concurrencies: list[int], prompts: list[list[int]],
                  output_len: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run every prompt through ``engine`` with at most ``c`` sequences running at once."""
    from engine.core.sequence import SamplingParams

    params = SamplingParams(max_new_tokens=output_len, ignore_eos=True)
    engine.generate(prompts[:1], SamplingParams(max_new_tokens=2, ignore_eos=True))  # warm-up
    results = []
    cap = engine.scheduler.max_running
    steps, before = DecodeStepClock(), engine.on_step
    engine.on_step = steps.on_step
    for c in concurrencies:
        engine.scheduler.max_running = min(c, cap)  # the knob still caps the batch
        steps.start()
        t0 = time.perf_counter()
        seqs = engine.generate(prompts, params)
        duration = time.perf_counter() - t0
        ttfts = [s.token_times[0] - s.start_time for s in seqs]
        e2es = [s.token_times[-1] - s.start_time for s in seqs]
        itls = [b - a for s in seqs for a, b in zip(s.token_times, s.token_times[1:])]
        res = summarize(c, duration, [len(p) for p in prompts], [s.output_ids for s in seqs],
                        ttfts, e2es, itls)
        res.update(steps.fields())
        res["decode_kv_splits_last"] = engine.runner.last_num_splits
        res["num_threads"] = engine.num_threads  # ENGINE_NUM_THREADS=0 resolves at start-up
        results.append(res)
        progress(f"bench offline c={c}: {res['output_throughput']:.1f} out tok/s, "
                 f"{duration:.2f}s")
    engine.scheduler.max_running = cap
    engine.on_step = before
    return results


def bench_online(url: str, concurrencies: list[int], prompts: list[list[int]],
                 output_len: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Closed-loop load through the client API: ``c`` clients, each streaming one
    ``/v1/completions`` at a time, as sglang's ``bench_serving`` does with
    ``--backend sglang-oai``: TTFT and inter-token latencies are measured on the client."""
    results = []
    for c in concurrencies:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=c) as pool:
            rows = list(pool.map(lambda ids: stream_completion(url, ids, output_len), prompts))
        duration = time.perf_counter() - t0
        itls = [b - a for _, times, _ in rows for a, b in zip(times, times[1:])]
        res = summarize(c, duration, [len(p) for p in prompts], [r[0] for r in rows],
                        [r[1][0] if r[1] else r[2] for r in rows], [r[2] for r in rows], itls)
        results.append(res)
        progress(f"bench online c={c}: {res['output_throughput']:.1f} out tok/s")
    return results


def stream_completion(url: str, ids: list[int], output_len: int
                      ) -> tuple[list[int], list[float], float]:
    """One streamed greedy completion: (token ids, arrival time of each since the request
    was sent, end-to-end seconds)."""
    from engine.serving.http import HTTPFailure
    from engine.serving.http import stream_post

    body = {"model": "engine", "prompt": ids, "max_tokens": output_len, "temperature": 0.0,
            "ignore_eos": True, "stream": True, "return_token_ids": True}
    t = time.perf_counter()
    out: list[int] = []
    times: list[float] = []
    for data in stream_post(f"{url}/v1/completions", body, timeout=3600):
        if data == b"[DONE]":
            break
        event = json.loads(data)
        if "error" in event:
            raise HTTPFailure(500, str(event["error"].get("message")))
        for choice in event.get("choices", ()):
            new = choice.get("token_ids") or []
            out += new
            times += [time.perf_counter() - t] * len(new)
    return out, times, time.perf_counter() - t


def write_results(path: str | None, results: list[dict[str, Any]], extra: dict[str, Any]
                  ) -> None:
    """Write one JSON line per result, replacing ``path`` (``-`` or None: stdout).

    Unlike sglang (which appends), each call owns its file: a reused path never mixes
    two runs (the ledger A/B runner gives each run its own file anyway).
    """
    lines = "".join(json.dumps({**r, **extra}, sort_keys=True) + "\n" for r in results)
    if path in (None, "-"):
        sys.stdout.write(lines)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(lines)


def knob_fields(knobs: EngineKnobs) -> dict[str, Any]:
    return {"knobs": knobs.as_env(), "engine_release": knobs.release}


def server_device(info: dict[str, Any] | None) -> str:
    """The ``device`` a served run measured: a worker's own, or behind a router the
    decode worker's (where the output tokens are made); ``unknown`` without /health."""
    if not info:
        return "unknown"
    for node in (info, info.get("decode"), info.get("prefill")):
        if isinstance(node, dict) and isinstance(node.get("device"), str):
            return node["device"]
    return "unknown"


def server_info(url: str) -> dict[str, Any] | None:
    """The server's ``/health`` (with the knobs in effect on each worker), as sglang's
    ``server_info``; ``knobs`` of an online result are the bench process's own."""
    from engine.serving.http import HTTPFailure
    from engine.serving.http import get

    try:
        return get(f"{url}/health", timeout=10)
    except HTTPFailure:
        return None
