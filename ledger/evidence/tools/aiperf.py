"""Result files of bench clients that do not write sglang's flat keys, made flat.

Each converter takes a parsed document and returns one *flat result*: sglang key names for
the metrics (``output_throughput``, ``mean_ttft_ms``, ``p99_itl_ms`` …), the load
parameters ``max_concurrency`` / ``request_rate``, a nested ``workload`` (what was
measured: see :mod:`ledger.evidence.workload`) and a nested ``origin`` (what the file
says of itself: tool version, date, command), plus a marker key naming the tool, so
:func:`ledger.evidence.result_json.detect_shape` knows it.

* ``aiperf`` - NVIDIA AIPerf's ``profile_export_aiperf.json``: one object, ``aiperf_version``
  and per metric ``{unit, avg, p50, p90, p95, p99, std, …}``; its ``input_config`` gives the
  load (the profiling phase's ``concurrency`` / ``rate``), the model, the endpoint type,
  the dataset and the requested lengths.  ``profile_export_aiperf.csv`` (``Metric,avg,…``
  rows, ``Time to First Token (ms)``) carries the same metrics and no configuration, so
  its load point must be given.  An AIPerf artifact directory holds both, and
  ``outputs.json`` (with ``--export-outputs-json``): each request's ``response_text``,
  whose sha256 in request order is the ``output_digest``.

* ``genai-perf`` - NVIDIA genai-perf's ``profile_export_genai_perf.json`` (AIPerf's
  predecessor: the same ``{unit, avg, p50, …}`` metrics, no version key).  Its
  ``input_config`` is read in both layouts genai-perf wrote: nested (0.0.14 on:
  ``perf_analyzer.stimulus`` ``{concurrency: N}`` or ``{request_rate: R}``,
  ``endpoint.type``, ``input.synthetic_tokens.mean``, ``input.output_tokens.mean``,
  ``model_names``) and flat (older: ``concurrency``, ``request_rate``, ``endpoint_type``,
  ``synthetic_input_tokens_mean``, ``output_tokens_mean``, ``model``).  The file names no
  tool version, date or host, so its origin says only the tool.

Metric names (AIPerf and genai-perf):
AIPerf's ``request_latency`` is sglang's ``e2e_latency``, its
``inter_token_latency`` (per request, (latency - TTFT) / (tokens - 1)) is sglang's
``tpot`` and its ``inter_chunk_latency`` (the gaps between streamed chunks) sglang's ``itl``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any
from typing import Mapping

AIPERF_METRICS = {"time_to_first_token": "ttft", "inter_token_latency": "tpot",
                  "inter_chunk_latency": "itl", "request_latency": "e2e_latency"}
AIPERF_RATES = {"output_token_throughput": "output_throughput",
                "request_throughput": "request_throughput",
                "input_token_throughput": "input_throughput",
                "total_token_throughput": "total_throughput"}
AIPERF_TOTALS = {"request_count": "completed", "benchmark_duration": "duration",
                 "total_isl": "total_input_tokens", "total_osl": "total_output_tokens"}
STATS = {"mean": "avg", "median": "p50", "std": "std", "p90": "p90", "p95": "p95",
         "p99": "p99"}
AIPERF_SUMMARY = "profile_export_aiperf.json"
AIPERF_OUTPUTS = "outputs.json"


def _avg(doc: Mapping[str, Any], key: str) -> Any:
    value = doc.get(key)
    return value.get("avg") if isinstance(value, Mapping) else None


def _aiperf_metrics(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for theirs, ours in {**AIPERF_RATES, **AIPERF_TOTALS}.items():
        out[ours] = _avg(doc, theirs)
    for theirs, ours in AIPERF_METRICS.items():
        stats = doc.get(theirs)
        if isinstance(stats, Mapping):
            for stat, key in STATS.items():
                out[f"{stat}_{ours}_ms"] = stats.get(key)
    return {k: v for k, v in out.items() if v is not None}


def _profiling_phase(config: Mapping[str, Any]) -> Mapping[str, Any]:
    phases = [p for p in config.get("phases") or [] if isinstance(p, Mapping)]
    for phase in phases:
        if phase.get("kind") == "profiling":
            return phase
    return phases[-1] if phases else {}


def _aiperf_workload(config: Mapping[str, Any], phase: Mapping[str, Any]) -> dict[str, Any]:
    models = (config.get("models") or {}).get("items") or [{}]
    datasets = config.get("datasets") or [{}]
    prompts = datasets[0].get("prompts") or {}
    endpoint = config.get("endpoint") or {}
    return {
        "backend": endpoint.get("type"),
        "dataset": datasets[0].get("public_dataset") or datasets[0].get("type"),
        "input_len": (prompts.get("isl") or {}).get("mean"),
        "output_len": (prompts.get("osl") or {}).get("mean"),
        "num_prompts": phase.get("requests"),
        "model": models[0].get("name"),
    }


def aiperf_result(doc: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from a ``profile_export_aiperf.json`` document."""
    config = doc.get("input_config") or {}
    phase = _profiling_phase(config)
    run = doc.get("run_info") or {}
    return {
        "aiperf_version": doc.get("aiperf_version"),
        **_aiperf_metrics(doc),
        "max_concurrency": phase.get("concurrency"),
        "request_rate": phase.get("rate") if phase.get("rate") is not None else
        ("inf" if phase.get("concurrency") else None),
        "workload": _aiperf_workload(config, phase),
        "origin": {"tool": "aiperf", "version": doc.get("aiperf_version"),
                   "date": doc.get("start_time"), "command": run.get("cli_command")},
    }


def is_genai_perf(doc: Mapping[str, Any]) -> bool:
    return ("aiperf_version" not in doc and isinstance(doc.get("request_throughput"), Mapping)
            and isinstance(doc.get("input_config"), Mapping))


def _said(value: Any) -> Any:
    """A configured value, or None where genai-perf wrote ``""`` / 0 for "not given"."""
    return None if value in ("", 0, None) else value


def _genai_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The load and workload of an ``input_config``, nested (0.0.14 on) or flat (older)."""
    pa = config.get("perf_analyzer") or {}
    stimulus = pa.get("stimulus") or {}
    inp = config.get("input") or {}
    endpoint = config.get("endpoint") or {}
    measure = pa.get("measurement") or {}
    models = config.get("model_names") or config.get("model") or [None]
    counted = measure.get("num") if measure.get("mode") == "request_count" else None
    return {
        "max_concurrency": _said(stimulus.get("concurrency", config.get("concurrency"))),
        "request_rate": _said(stimulus.get("request_rate", config.get("request_rate"))),
        "workload": {
            "backend": endpoint.get("type") or config.get("endpoint_type"),
            "dataset": _said(inp.get("file")) or inp.get("prompt_source")
            or config.get("prompt_source"),
            "input_len": _said((inp.get("synthetic_tokens") or {}).get("mean",
                               config.get("synthetic_input_tokens_mean"))),
            "output_len": _said((inp.get("output_tokens") or {}).get("mean",
                                config.get("output_tokens_mean"))),
            "num_prompts": _said(counted or config.get("request_count")),
            "model": models[0] if isinstance(models, list) and models else None,
        },
    }


def genai_perf_result(doc: Mapping[str, Any]) -> dict[str, Any]:
    """One flat result from a ``profile_export_genai_perf.json`` document."""
    loaded = _genai_config(doc.get("input_config") or {})
    if loaded["max_concurrency"] and loaded["request_rate"] is None:
        loaded["request_rate"] = "inf"
    # Its mean tokens per request: the lengths of a file dataset, which the config does
    # not say (see ledger.evidence.workload).
    means = {"mean_input_tokens": _avg(doc, "input_sequence_length"),
             "mean_output_tokens": _avg(doc, "output_sequence_length")}
    return {"genai_perf": True, **_aiperf_metrics(doc), **loaded,
            **{k: v for k, v in means.items() if v is not None},
            "origin": {"tool": "genai-perf"}}


def is_aiperf(doc: Mapping[str, Any]) -> bool:
    return "aiperf_version" in doc and isinstance(doc.get("request_throughput"), Mapping)


def _csv_name(label: str) -> str:
    """``Time to First Token (ms)`` -> ``time_to_first_token``."""
    return re.sub(r"[^a-z0-9]+", "_", re.sub(r"\([^)]*\)", "", label).lower()).strip("_")


def aiperf_csv_document(text: str) -> dict[str, Any] | None:
    """The tables of a ``profile_export_aiperf.csv`` as an AIPerf-like document: the
    per-request block (``Metric,avg,min,…``) and the run block (``Metric,Value``); the GPU
    telemetry block (``Endpoint,GPU_Index,…``) is not metrics."""
    if not text.startswith("Metric,"):
        return None
    doc: dict[str, Any] = {"aiperf_version": None}
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        if not block.startswith("Metric,"):
            continue
        for rec in csv.DictReader(io.StringIO(block)):
            stats = {}
            for k, v in rec.items():
                if k == "Metric" or v in (None, ""):
                    continue
                try:
                    stats["avg" if k == "Value" else k] = float(v)
                except (TypeError, ValueError):
                    continue
            doc[_csv_name(rec.get("Metric") or "")] = stats
    return doc if isinstance(doc.get("request_throughput"), Mapping) else None


def outputs_digest(path: Path) -> str | None:
    """sha256 of each request's ``response_text`` in AIPerf's ``outputs.json``, in
    session order (None when the file has no outputs)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8")).get("data") or []
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    texts = [(r.get("session_num", i), r.get("turn_index", 0), r.get("response_text"))
             for i, r in enumerate(data) if isinstance(r, Mapping)]
    if not texts or any(t is None for *_, t in texts):
        return None
    h = hashlib.sha256()
    for *_, text in sorted(texts, key=lambda t: (t[0], t[1])):
        h.update(str(text).encode("utf-8") + b"\0")
    return "sha256:" + h.hexdigest()


__all__ = ["AIPERF_OUTPUTS", "AIPERF_SUMMARY", "aiperf_csv_document", "aiperf_result",
           "genai_perf_result", "is_aiperf", "is_genai_perf", "outputs_digest"]
