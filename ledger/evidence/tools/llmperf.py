"""Ray's llmperf (``token_benchmark_ray.py``) results, made flat (see
:mod:`ledger.evidence.tools`).

* ``llmperf`` summary - ``{name}_summary.json``: ``version`` ``2023-08-31``, the run's
  ``model``, ``mean_input_tokens`` / ``mean_output_tokens`` (the requested lengths, with
  their ``stddev_*``), ``num_concurrent_requests`` (the load point: llmperf keeps that
  many requests in flight) and per metric ``results_<metric>_quantiles_p50`` …,
  ``results_<metric>_mean`` in **seconds**: ``ttft_s``, ``inter_token_latency_s``
  (llmperf's is (latency - TTFT) / output tokens, per request: sglang's ``tpot``),
  ``end_to_end_latency_s``.  ``results_mean_output_throughput_token_per_s`` is the
  output throughput, ``results_num_completed_requests_per_min`` / 60 the request
  throughput; ``timestamp`` (Unix seconds) is the date; ``framework`` (where the
  leaderboard's files set it) the backend.
* ``llmperf`` per-request - ``{name}_individual_responses.json``: a JSON list, one object
  per request (``ttft_s``, ``inter_token_latency_s``, ``end_to_end_latency_s``,
  ``number_input_tokens``, ``number_output_tokens``, ``error_code``); its percentiles are
  computed here from the successful requests (``error_code`` null).  The list says
  nothing of the load, so ``--concurrency`` must be given, nor of the generated text
  (llmperf does not keep it), so it has no output digest.
"""

from __future__ import annotations

from typing import Any
from typing import Mapping
from typing import Sequence

from ledger.evidence.tools.perrequest import is_number
from ledger.evidence.tools.perrequest import percentile_stats
from ledger.evidence.tools.perrequest import unix_date

METRICS = {"ttft_s": "ttft", "inter_token_latency_s": "tpot",
           "end_to_end_latency_s": "e2e_latency"}
STATS = {"mean": "mean", "median": "quantiles_p50", "p90": "quantiles_p90",
         "p95": "quantiles_p95", "p99": "quantiles_p99", "std": "stddev"}
REQUEST_KEYS = frozenset({"ttft_s", "end_to_end_latency_s", "number_output_tokens"})


def is_summary(obj: Mapping[str, Any]) -> bool:
    return "results_mean_output_throughput_token_per_s" in obj and "llmperf" not in obj



def summary_result(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from an llmperf ``_summary.json``."""
    flat: dict[str, Any] = {"llmperf": obj.get("version") or True}
    for theirs, ours in METRICS.items():
        for stat, key in STATS.items():
            value = obj.get(f"results_{theirs}_{key}")
            if is_number(value):
                flat[f"{stat}_{ours}_ms"] = value * 1000.0
    per_min = obj.get("results_num_completed_requests_per_min")
    flat.update({
        "output_throughput": obj.get("results_mean_output_throughput_token_per_s"),
        "request_throughput": per_min / 60.0 if is_number(per_min) else None,
        "completed": obj.get("results_num_completed_requests"),
        "errors": obj.get("results_number_errors"),
        "max_concurrency": obj.get("num_concurrent_requests"), "request_rate": "inf",
        "workload": {"backend": obj.get("framework"), "model": obj.get("model"),
                     "input_len": obj.get("mean_input_tokens"),
                     "output_len": obj.get("mean_output_tokens")},
        "origin": {"tool": "llmperf", "version": obj.get("version"),
                   "date": unix_date(obj.get("timestamp"))},
    })
    return flat


def is_requests(doc: Any) -> bool:
    return (isinstance(doc, list) and bool(doc)
            and all(isinstance(r, Mapping) and REQUEST_KEYS <= r.keys() for r in doc))


def requests_result(doc: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One flat result from an llmperf ``_individual_responses.json`` list."""
    ok = [r for r in doc if r.get("error_code") is None]
    flat: dict[str, Any] = {"llmperf": "per-request", "completed": len(ok),
                            "errors": len(doc) - len(ok), "max_concurrency": None,
                            "request_rate": None}
    for theirs, ours in METRICS.items():
        values = [r[theirs] * 1000.0 for r in ok if is_number(r.get(theirs))]
        flat.update(percentile_stats(values, ours, ddof=1))  # pandas' std, as llmperf
    outputs = [r.get("number_output_tokens") or 0 for r in ok]
    inputs = [r.get("number_input_tokens") or 0 for r in ok]
    flat["total_output_tokens"] = sum(outputs)
    flat["total_input_tokens"] = sum(inputs)
    flat["workload"] = {"input_len": None, "output_len": None}
    flat["origin"] = {"tool": "llmperf"}
    return flat


__all__ = ["is_requests", "is_summary", "requests_result", "summary_result"]
