"""SGLang's batch benchmarks: ``bench_one_batch``, ``bench_one_batch_server``,
``bench_offline_throughput`` result lines, made flat (see :mod:`ledger.evidence.tools`).

* ``sglang-one-batch`` - ``bench_one_batch --result-filename`` JSON lines (one static
  batch each, no server): ``run_name``, ``batch_size``, ``input_len``, ``output_len``,
  ``prefill_latency`` (s), ``median_decode_latency`` (s), ``median_decode_throughput``
  (tok/s) …  The batch size is the load point (a static batch of N runs N sequences at
  once: concurrency N); ``output_throughput`` is the median decode throughput,
  ``median_tpot_ms`` the median decode step; ``run_name`` (the label the operator gave a
  configuration) is the workload's backend, so runs of two names are never repeats of each
  other.  A prefill-only line (``--output-len 1``) has no decode metrics and is refused as
  of unknown shape.
* ``sglang-one-batch-server`` - ``bench_one_batch_server`` lines (its default
  ``result.jsonl``): ``run_name``, ``batch_size``, ``input_len``, ``output_len``,
  ``latency`` (s, the whole batch through ``/generate``), ``output_throughput`` (batch x
  output_len / latency) and ``overall_throughput``; later versions add
  ``input_throughput``, ``last_ttft``, ``last_gen_throughput``.  Load point and workload
  as for ``bench_one_batch``; the batch latency is kept as ``batch_latency_ms`` (every
  request of the batch ends with it, it is no per-request percentile).
* ``sglang-offline`` - ``bench_offline_throughput --result-filename`` lines: ``backend``
  (``engine`` / ``runtime``), ``successful_requests``, ``total_latency`` (s), token totals
  and ``request/input/output/total_throughput``.  Every prompt is handed to the engine at
  once, so the load point is request rate ``inf``; the line names no dataset or lengths.

None of these lines says its host, date or SGLang version.
"""

from __future__ import annotations

from typing import Any
from typing import Mapping

from ledger.evidence.tools.perrequest import is_number

ONE_BATCH_KEYS = frozenset({"run_name", "batch_size", "input_len", "output_len",
                            "prefill_latency", "overall_throughput"})
ONE_BATCH_SERVER_KEYS = frozenset({"run_name", "batch_size", "input_len", "output_len",
                                   "latency", "output_throughput", "overall_throughput"})
OFFLINE_KEYS = frozenset({"backend", "successful_requests", "total_latency",
                          "total_output_tokens", "output_throughput", "total_throughput"})


def _ms(seconds: Any) -> float | None:
    return seconds * 1000.0 if is_number(seconds) else None


def is_one_batch(obj: Mapping[str, Any]) -> bool:
    return ONE_BATCH_KEYS <= obj.keys() and "sglang_one_batch" not in obj


def one_batch_result(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from a ``bench_one_batch`` line (its own keys kept beside)."""
    flat: dict[str, Any] = {**obj, "sglang_one_batch": obj.get("run_name"),
                            "max_concurrency": obj.get("batch_size")}
    if obj.get("median_decode_throughput") is not None:
        flat["output_throughput"] = obj["median_decode_throughput"]
    flat["median_tpot_ms"] = _ms(obj.get("median_decode_latency"))
    flat["prefill_latency_ms"] = _ms(obj.get("prefill_latency"))
    flat["origin"] = {"tool": "sglang bench_one_batch"}
    return {k: v for k, v in flat.items() if v is not None}


def is_one_batch_server(obj: Mapping[str, Any]) -> bool:
    return (ONE_BATCH_SERVER_KEYS <= obj.keys() and "prefill_latency" not in obj
            and "sglang_one_batch_server" not in obj)


def one_batch_server_result(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from a ``bench_one_batch_server`` line."""
    flat: dict[str, Any] = {**obj, "sglang_one_batch_server": obj.get("run_name"),
                            "max_concurrency": obj.get("batch_size"),
                            "batch_latency_ms": _ms(obj.get("latency")),
                            "origin": {"tool": "sglang bench_one_batch_server"}}
    flat.pop("latency", None)
    return {k: v for k, v in flat.items() if v is not None}


def is_offline(obj: Mapping[str, Any]) -> bool:
    return OFFLINE_KEYS <= obj.keys() and "sglang_offline" not in obj


def offline_result(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from a ``bench_offline_throughput`` line."""
    return {**obj, "sglang_offline": True, "completed": obj.get("successful_requests"),
            "duration": obj.get("total_latency"), "max_concurrency": None,
            "request_rate": "inf", "origin": {"tool": "sglang bench_offline_throughput"}}


__all__ = ["is_offline", "is_one_batch", "is_one_batch_server", "offline_result",
           "one_batch_result", "one_batch_server_result"]
