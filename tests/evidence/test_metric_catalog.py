"""The metric catalog: per release names, renames followed, checked against sources shaped
like SGLang's collector.py and vLLM's v1/metrics/loggers.py (fixtures/metric_sources)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InvalidValue
from ledger.evidence.metric_catalog import MEASURES
from ledger.evidence.metric_catalog import check_source
from ledger.evidence.metric_catalog import current_name
from ledger.evidence.metric_catalog import exported
from ledger.evidence.metric_catalog import metric

SOURCES = Path(__file__).parent / "fixtures" / "metric_sources"


@pytest.mark.parametrize("engine,measure,release,name", [
    ("vllm", "itl", "0.10.2", "vllm:time_per_output_token_seconds"),
    ("vllm", "itl", "0.11.0", "vllm:inter_token_latency_seconds"),
    ("vllm", "itl", None, "vllm:inter_token_latency_seconds"),
    ("vllm", "kv_cache_usage", "0.9.1", "vllm:gpu_cache_usage_perc"),
    ("vllm", "kv_cache_usage", "0.9.2", "vllm:kv_cache_usage_perc"),
    ("vllm", "kv_cache_usage", "v0.10.1rc1", "vllm:kv_cache_usage_perc"),
    ("sglang", "itl", "0.4.5", "sglang:time_per_output_token_seconds"),
    ("sglang", "itl", "0.4.6.post1", "sglang:inter_token_latency_seconds"),
    ("sglang", "running", "0.5.2", "sglang:num_running_reqs"),
])
def test_each_release_gets_the_name_it_exports(engine, measure, release, name):
    assert metric(engine, measure, release).name == name


def test_every_measure_has_exactly_one_name_in_every_release():
    for engine in ("sglang", "vllm"):
        for release in ("0.4.0", "0.4.6", "0.9.2", "0.10.2", "0.11", "0.12.0", None):
            assert sorted(exported(engine, release)) == sorted(MEASURES), (engine, release)


def test_renamed_names_lead_to_their_successor():
    assert current_name("vllm:time_per_output_token_seconds") == \
        "vllm:inter_token_latency_seconds"
    assert current_name("vllm:gpu_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    assert current_name("sglang:num_running_reqs") == "sglang:num_running_reqs"
    with pytest.raises(InvalidValue, match="metric catalog knows"):
        metric("tgi", "ttft")
    with pytest.raises(InvalidValue, match="expected a version"):
        metric("vllm", "itl", "latest")


def test_the_catalog_agrees_with_the_engines_sources():
    sglang = (SOURCES / "sglang_collector_0.5.py.txt").read_text()
    vllm = (SOURCES / "vllm_loggers_0.11.py.txt").read_text()
    assert check_source("sglang", "0.5.2", sglang) == []
    assert check_source("vllm", "0.11.0", vllm) == []
    # A source that lacks a name the catalog claims is caught, naming it.
    without_itl = vllm.replace('name="vllm:inter_token_latency_seconds"', 'name="x"')
    assert check_source("vllm", "0.11.0", without_itl) == ["vllm:inter_token_latency_seconds"]
    # The 0.11 source still declares the deprecated names (hidden or beside the new one):
    # the catalog of 0.10 finds them there too.
    assert check_source("vllm", "0.10.2", vllm) == []


def test_the_bundled_engine_exports_the_sglang_names():
    from prometheus_client.parser import text_string_to_metric_families

    from engine.serving.metrics import ServingMetrics

    text = ServingMetrics("m", lambda: 0, lambda: 0).exposition()[0].decode()
    names = "\n".join(f'"{f.name}"' for f in text_string_to_metric_families(text))
    assert check_source("sglang", None, names) == ["sglang:token_usage"]  # not exported
