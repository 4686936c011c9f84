"""guidellm benchmark reports (``benchmarks.json``, or the same report as YAML), made flat
(see :mod:`ledger.evidence.tools`).

A report is ``{metadata: {guidellm_version, platform, …}, args: {model, data, backend,
…}, benchmarks: [...]}``; each benchmark is one load point, so a report of a sweep is a
sweep (one flat result per benchmark, placed as ``FILE (benchmark N)``).  Per benchmark:

* load point - ``config.strategy``: ``concurrent`` (``streams`` in flight: concurrency),
  ``synchronous`` (concurrency 1), ``constant`` / ``poisson`` (``rate`` requests/s) and
  ``throughput`` (everything at once: rate ``inf``);
* metrics - ``metrics.<name>.successful`` ``{mean, median, std_dev, percentiles: {p90,
  p95, p99 …}}``: ``time_to_first_token_ms``, ``inter_token_latency_ms`` (sglang's
  ``itl``), ``time_per_output_token_ms`` (``tpot``), ``request_latency`` (s: ``e2e``),
  ``output_tokens_per_second`` and ``requests_per_second`` (means over the run: the
  throughputs), request totals (``completed`` / ``failed``), and the successful
  requests' ``prompt_token_count`` / ``output_token_count`` sums (``total_input_tokens``
  / ``total_output_tokens``: a file dataset's lengths are known only from them);
* output digest - from ``requests.successful[*].output`` (guidellm keeps each request's
  text), ordered by prompt then text, since guidellm lists requests as they finished and
  draws prompts from its dataset in a seed's order: two runs of one seed compare.  A
  report that sampled requests (``sample_requests``) digests only those it kept, which
  another run samples differently, so such a report gets no digest;
* workload - ``args.model``, ``args.backend``, ``args.data`` (the dataset: a file or a
  synthetic spec such as ``prompt_tokens=256,output_tokens=128``), ``args.max_requests``;
* origin - ``metadata.guidellm_version`` and ``platform``, the benchmark's start time.

guidellm 0.3's report (JSON or YAML) has no ``metadata`` and no top-level ``args``: each
benchmark (``type_: generative_benchmark``) carries its own - the load point in
``args.strategy``, the backend and model in ``worker`` (``backend_type``,
``backend_model``), the dataset in ``request_loader.data``, ``args.max_number`` requests,
the totals in ``request_totals``, each request's ``prompt`` beside its ``output``, and
``request_samples`` set where it sampled.  It names no version, so its origin has none.
"""

from __future__ import annotations

import json
from typing import Any
from typing import Mapping

from ledger.evidence.tools.perrequest import is_number
from ledger.evidence.tools.perrequest import texts_digest
from ledger.evidence.tools.perrequest import unix_date

METRICS = {"time_to_first_token_ms": ("ttft", 1.0), "inter_token_latency_ms": ("itl", 1.0),
           "time_per_output_token_ms": ("tpot", 1.0), "request_latency": ("e2e_latency", 1000.0)}
STATS = {"mean": "mean", "median": "median", "std": "std_dev"}
PERCENTILES = ("p90", "p95", "p99")


def is_report(doc: Any) -> bool:
    if not (isinstance(doc, Mapping) and isinstance(doc.get("benchmarks"), list)):
        return False
    meta = doc.get("metadata")
    return ((isinstance(meta, Mapping) and "guidellm_version" in meta)
            or _is_v03(doc))


def _is_v03(doc: Mapping[str, Any]) -> bool:
    """A guidellm 0.3 report: benchmarks only, each a generative_benchmark with its args."""
    benches = doc["benchmarks"]
    return "metadata" not in doc and bool(benches) and all(
        isinstance(b, Mapping) and b.get("type_") == "generative_benchmark"
        and isinstance(b.get("args"), Mapping) for b in benches)


def _load(strategy: Mapping[str, Any]) -> dict[str, Any]:
    kind = strategy.get("type_")
    if kind == "concurrent":
        return {"max_concurrency": strategy.get("streams") or strategy.get("max_concurrency"),
                "request_rate": "inf"}
    if kind == "synchronous":
        return {"max_concurrency": 1, "request_rate": "inf"}
    if kind == "throughput":
        return {"max_concurrency": None, "request_rate": "inf"}
    return {"max_concurrency": None, "request_rate": strategy.get("rate")}


def _metrics(metrics: Mapping[str, Any], totals: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for theirs, (ours, scale) in METRICS.items():
        stats = (metrics.get(theirs) or {}).get("successful") or {}
        for stat, key in STATS.items():
            if is_number(stats.get(key)):
                out[f"{stat}_{ours}_ms"] = stats[key] * scale
        for p in PERCENTILES:
            value = (stats.get("percentiles") or {}).get(p)
            if is_number(value):
                out[f"{p}_{ours}_ms"] = value * scale
    out["output_throughput"] = ((metrics.get("output_tokens_per_second") or {})
                                .get("successful") or {}).get("mean")
    out["request_throughput"] = ((metrics.get("requests_per_second") or {})
                                 .get("successful") or {}).get("mean")
    out["completed"], out["failed"] = totals.get("successful"), totals.get("errored")
    for theirs, ours in (("prompt_token_count", "total_input_tokens"),
                         ("output_token_count", "total_output_tokens")):
        total = ((metrics.get(theirs) or {}).get("successful") or {}).get("total_sum")
        if is_number(total):
            out[ours] = total  # over the successful requests, as ``completed``
    return out


def _prompt(request: Mapping[str, Any]) -> str:
    if "prompt" in request:  # guidellm 0.3 keeps the prompt beside the output
        return json.dumps(request["prompt"], sort_keys=True)
    try:
        body = json.loads(request.get("request_args") or "{}").get("body") or {}
    except (TypeError, ValueError, AttributeError):
        return ""
    return json.dumps(body.get("prompt") or body.get("messages") or "", sort_keys=True)


def _digest(bench: Mapping[str, Any], sampled: bool) -> str | None:
    done = ((bench.get("requests") or {}).get("successful") or [])
    if sampled or not done or any(not isinstance(r, Mapping) or r.get("output") is None
                                  for r in done):
        return None
    pairs = sorted((_prompt(r), str(r["output"])) for r in done)
    return texts_digest([text for _, text in pairs])



def benchmark_result(doc: Mapping[str, Any], bench: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from one benchmark of a guidellm report (0.4 on, or 0.3)."""
    if _is_v03(doc):
        args, meta = bench["args"], {}
        worker, loader = bench.get("worker") or {}, bench.get("request_loader") or {}
        strategy, totals = args.get("strategy"), bench.get("request_totals")
        sampled = bench.get("request_samples") is not None
        backend, model = worker.get("backend_type"), worker.get("backend_model")
        data, num_prompts = loader.get("data"), args.get("max_number")
    else:
        args, meta = doc.get("args") or {}, doc.get("metadata") or {}
        strategy = (bench.get("config") or {}).get("strategy")
        totals = (bench.get("metrics") or {}).get("request_totals")
        sampled = bool(args.get("sample_requests"))
        backend, model = args.get("backend"), args.get("model")
        data, num_prompts = args.get("data"), args.get("max_requests")
    return {
        "guidellm": meta.get("guidellm_version") or True,
        **_metrics(bench.get("metrics") or {}, totals or {}),
        **_load(strategy or {}),
        "generated_digest": _digest(bench, sampled),
        "workload": {"backend": backend, "model": model,
                     "dataset": ",".join(map(str, data)) if isinstance(data, list) else data,
                     "num_prompts": num_prompts},
        "origin": {"tool": "guidellm", "version": meta.get("guidellm_version"),
                   "platform": meta.get("platform"),
                   "date": unix_date(bench.get("start_time"))},
    }


def report_results(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [benchmark_result(doc, b) for b in doc["benchmarks"] if isinstance(b, Mapping)]


__all__ = ["benchmark_result", "is_report", "report_results"]
