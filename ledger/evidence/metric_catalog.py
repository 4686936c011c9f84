"""Which Prometheus metric an engine release exports for each thing the ledger judges by.

Metric names move between releases, so a query written against one release reads nothing
from another.  This catalog names, per engine and per release, the metric for each
*measure* (``ttft``, ``itl``, ``e2e``, ``generation_tokens``, ``prompt_tokens``,
``running``, ``queued``, ``kv_cache_usage``), and maps a renamed or deprecated name to its
successor.  Pure: no network, no files.

Sources (see /work/shared/context/field-facts.md and the engines' own files):

* SGLang: ``python/sglang/srt/metrics/collector.py`` (``TokenizerMetricsCollector``,
  ``SchedulerMetricsCollector``; moved to ``srt/observability/metrics_collector.py`` in
  later releases); ``sglang:inter_token_latency_seconds`` was
  ``sglang:time_per_output_token_seconds`` before 0.4.6.
* vLLM: ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``);
  ``vllm:gpu_cache_usage_perc`` → ``vllm:kv_cache_usage_perc`` (deprecated 0.9.2, hidden
  0.11), ``vllm:time_per_output_token_seconds`` → ``vllm:inter_token_latency_seconds``
  (deprecated 0.11).  vLLM keeps a deprecated metric one minor release, then hides it
  behind ``--show-hidden-metrics-for-version``.

Decisions: a release is compared as dotted integers (``0.10.2`` > ``0.9.2``); no release
(``None``) means the newest names; a measure has one name per release — where a release
exports both the old and the new name (vLLM 0.11 exports both ITL names with identical
values) the catalog names the new one, so a query never double counts.
:func:`check_source` checks the catalog against an engine's metrics source: every name
the catalog says a release exports must be declared there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.errors import InvalidValue

MEASURES = ("ttft", "itl", "e2e", "generation_tokens", "prompt_tokens", "running", "queued",
            "kv_cache_usage")


@dataclass(frozen=True)
class Metric:
    """One exported name of a measure, from ``since`` (inclusive) to ``until``
    (exclusive; None: still exported); ``kind`` as Prometheus types it."""

    engine: str
    measure: str
    name: str
    kind: str  # histogram | counter | gauge
    since: str | None = None
    until: str | None = None
    replaced_by: str | None = None


CATALOG: tuple[Metric, ...] = (
    Metric("sglang", "ttft", "sglang:time_to_first_token_seconds", "histogram"),
    Metric("sglang", "itl", "sglang:time_per_output_token_seconds", "histogram", until="0.4.6",
           replaced_by="sglang:inter_token_latency_seconds"),
    Metric("sglang", "itl", "sglang:inter_token_latency_seconds", "histogram", since="0.4.6"),
    Metric("sglang", "e2e", "sglang:e2e_request_latency_seconds", "histogram"),
    Metric("sglang", "generation_tokens", "sglang:generation_tokens_total", "counter"),
    Metric("sglang", "prompt_tokens", "sglang:prompt_tokens_total", "counter"),
    Metric("sglang", "running", "sglang:num_running_reqs", "gauge"),
    Metric("sglang", "queued", "sglang:num_queue_reqs", "gauge"),
    Metric("sglang", "kv_cache_usage", "sglang:token_usage", "gauge"),
    Metric("vllm", "ttft", "vllm:time_to_first_token_seconds", "histogram"),
    Metric("vllm", "itl", "vllm:time_per_output_token_seconds", "histogram", until="0.11",
           replaced_by="vllm:inter_token_latency_seconds"),
    Metric("vllm", "itl", "vllm:inter_token_latency_seconds", "histogram", since="0.11"),
    Metric("vllm", "e2e", "vllm:e2e_request_latency_seconds", "histogram"),
    Metric("vllm", "generation_tokens", "vllm:generation_tokens_total", "counter"),
    Metric("vllm", "prompt_tokens", "vllm:prompt_tokens_total", "counter"),
    Metric("vllm", "running", "vllm:num_requests_running", "gauge"),
    Metric("vllm", "queued", "vllm:num_requests_waiting", "gauge"),
    Metric("vllm", "kv_cache_usage", "vllm:gpu_cache_usage_perc", "gauge", until="0.9.2",
           replaced_by="vllm:kv_cache_usage_perc"),
    Metric("vllm", "kv_cache_usage", "vllm:kv_cache_usage_perc", "gauge", since="0.9.2"),
)
ENGINES = ("sglang", "vllm")


def release_key(release: str) -> tuple[int, ...]:
    """``0.10.2`` as (0, 10, 2); a suffix (``rc1``, ``.post1``) is ignored."""
    parts = re.match(r"v?(\d+(?:\.\d+)*)", release.strip())
    if parts is None:
        raise InvalidValue(f"release {release!r}: expected a version such as 0.10.2")
    return tuple(int(p) for p in parts.group(1).split("."))


def _exported(m: Metric, release: str | None) -> bool:
    if release is None:
        return m.until is None
    key = release_key(release)
    return (m.since is None or key >= release_key(m.since)) and \
        (m.until is None or key < release_key(m.until))


def metric(engine: str, measure: str, release: str | None = None) -> Metric:
    """The metric ``engine`` at ``release`` exports for ``measure`` (newest: None)."""
    if engine not in ENGINES:
        raise InvalidValue(f"engine {engine!r}: the metric catalog knows {', '.join(ENGINES)}")
    if measure not in MEASURES:
        raise InvalidValue(f"measure {measure!r}: one of {', '.join(MEASURES)}")
    (found,) = [m for m in CATALOG if m.engine == engine and m.measure == measure
                and _exported(m, release)]
    return found


def current_name(name: str) -> str:
    """The newest name of a metric (a renamed one followed to its successor)."""
    by_name = {m.name: m for m in CATALOG}
    while name in by_name and by_name[name].replaced_by:
        name = by_name[name].replaced_by
    return name


def exported(engine: str, release: str | None = None) -> dict[str, Metric]:
    """Measure -> metric for every measure ``engine`` at ``release`` exports."""
    return {m.measure: m for m in CATALOG if m.engine == engine and _exported(m, release)}


# A metric declared in an engine's source: ``name="sglang:..."`` (prometheus_client's
# keyword, as both collector.py and loggers.py write it) or a bare string literal.
_DECLARED = re.compile(r"""["']((?:sglang|vllm):[a-z0-9_]+)["']""")


def check_source(engine: str, release: str | None, source: str) -> list[str]:
    """The catalog's names for ``engine`` at ``release`` that ``source`` (the text of its
    collector.py / loggers.py at that release) does not declare; empty when it agrees."""
    # prometheus_client adds ``_total`` to a counter's name: vLLM declares
    # ``vllm:prompt_tokens`` and exports ``vllm:prompt_tokens_total``.
    declared = {n.removesuffix("_total") for n in _DECLARED.findall(source)}
    return sorted(m.name for m in exported(engine, release).values()
                  if m.name.removesuffix("_total") not in declared)
