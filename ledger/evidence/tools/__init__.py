"""Result files of bench clients that do not write sglang's flat keys, made flat.

Each converter takes a parsed document and returns *flat results*: sglang key names for
the metrics (``output_throughput``, ``mean_ttft_ms``, ``p99_itl_ms`` …), the load
parameters ``max_concurrency`` / ``request_rate``, a nested ``workload`` (what was
measured: see :mod:`ledger.evidence.workload`), a nested ``origin`` (what the file says
of itself: tool version, date, host, command) and ``generated_digest`` where the file
keeps the generated texts, plus a marker key naming the tool, so
:func:`ledger.evidence.result_json.detect_shape` knows it.  The tools, one module each:

* :mod:`~ledger.evidence.tools.aiperf` - AIPerf (JSON, CSV, artifact directory) and
  genai-perf (``profile_export_genai_perf.json``);
* :mod:`~ledger.evidence.tools.guidellm` - guidellm reports (JSON or YAML), one result
  per benchmark of the report;
* :mod:`~ledger.evidence.tools.llmperf` - llmperf ``_summary.json`` and the per-request
  ``_individual_responses.json`` list;
* :mod:`~ledger.evidence.tools.sglang` - SGLang ``bench_one_batch``,
  ``bench_one_batch_server``, ``bench_offline_throughput`` lines;
* :mod:`~ledger.evidence.tools.perrequest` - the per-request arrays of vLLM
  ``--save-detailed`` and SGLang ``--output-details`` files: percentiles and the digest,
  added to the file's own flat keys.

An object no converter knows passes through unchanged (the bundled engine's, sglang's
``bench_serving`` and vLLM's own flat shapes, or an unknown shape the importer refuses
naming the nearest known format).
"""

from __future__ import annotations

import json
from typing import Any
from typing import Callable
from typing import Mapping

from ledger.evidence.tools import guidellm
from ledger.evidence.tools import llmperf
from ledger.evidence.tools import perrequest
from ledger.evidence.tools import sglang
from ledger.evidence.tools.aiperf import AIPERF_OUTPUTS
from ledger.evidence.tools.aiperf import AIPERF_SUMMARY
from ledger.evidence.tools.aiperf import aiperf_csv_document
from ledger.evidence.tools.aiperf import aiperf_result
from ledger.evidence.tools.aiperf import genai_perf_result
from ledger.evidence.tools.aiperf import is_aiperf
from ledger.evidence.tools.aiperf import is_genai_perf
from ledger.evidence.tools.aiperf import outputs_digest

Located = list[tuple[str, dict[str, Any]]]
# (recognizer, converter) of one JSON object, tried in order.
CONVERTERS: tuple[tuple[Callable[[Mapping[str, Any]], bool],
                        Callable[[Mapping[str, Any]], dict[str, Any]]], ...] = (
    (is_aiperf, aiperf_result),
    (is_genai_perf, genai_perf_result),
    (llmperf.is_summary, llmperf.summary_result),
    (sglang.is_one_batch, sglang.one_batch_result),
    (sglang.is_one_batch_server, sglang.one_batch_server_result),
    (sglang.is_offline, sglang.offline_result),
)

# Each tool's own layout, as its files write it: what an unknown shape is measured against
# (ledger.evidence.result_json.nearest_format) when no converter took it.
RAW_SHAPES: dict[str, frozenset[str]] = {
    "aiperf profile_export_aiperf.json": frozenset(
        {"aiperf_version", "request_throughput", "input_config", "time_to_first_token"}),
    "genai-perf profile_export_genai_perf.json": frozenset(
        {"request_throughput", "input_config", "time_to_first_token", "request_latency"}),
    "guidellm report": frozenset({"benchmarks", "args"}),
    "llmperf _summary.json": frozenset(
        {"version", "num_concurrent_requests", "results_ttft_s_quantiles_p50",
         "results_mean_output_throughput_token_per_s"}),
    "sglang bench_one_batch": sglang.ONE_BATCH_KEYS,
    "sglang bench_one_batch_server": sglang.ONE_BATCH_SERVER_KEYS,
    "sglang bench_offline_throughput": sglang.OFFLINE_KEYS,
}


def flat_results(here: str, obj: dict[str, Any]) -> Located:
    """``(place, flat result)`` for one parsed JSON object (see the module docstring)."""
    if guidellm.is_report(obj):
        results = guidellm.report_results(obj)
        if len(results) == 1:
            return [(here, results[0])]
        return [(f"{here} (benchmark {i})", r) for i, r in enumerate(results, 1)]
    for recognizes, convert in CONVERTERS:
        if recognizes(obj):
            return [(here, convert(obj))]
    if perrequest.has_details(obj):
        return [(here, {**obj, **perrequest.details(obj)})]
    return [(here, obj)]


def whole_document(text: str, where: str) -> Located | None:
    """Results of a file that is no JSON object per document or line: an AIPerf CSV, an
    llmperf per-request list, a guidellm YAML report; None for anything else."""
    doc = aiperf_csv_document(text)
    if doc is not None:
        return [(where, aiperf_result(doc))]
    if text.lstrip().startswith("["):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            return None
        return [(where, llmperf.requests_result(whole))] if llmperf.is_requests(whole) else None
    if (("guidellm_version" in text or "generative_benchmark" in text)
            and not text.lstrip().startswith("{")):
        report = _yaml(text)
        if guidellm.is_report(report):
            return flat_results(where, dict(report))
    return None


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return None


__all__ = ["AIPERF_OUTPUTS", "AIPERF_SUMMARY", "CONVERTERS", "RAW_SHAPES", "aiperf_csv_document",
           "aiperf_result", "flat_results", "is_aiperf", "outputs_digest", "whole_document"]
