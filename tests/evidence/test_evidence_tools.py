"""Importers of other bench clients, on real files those tools wrote (fixtures/real/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.evidence.importers import ImportFormatError
from ledger.evidence.importers import read_result_file
from ledger.evidence.importers import read_result_files
from ledger.evidence.tools import outputs_digest

REAL = Path(__file__).parent / "fixtures" / "real"
AIPERF = REAL / "aiperf-engine-c4"


def test_aiperf_json_carries_metrics_load_workload_and_origin():
    parsed = read_result_file(AIPERF / "profile_export_aiperf.json")
    assert parsed.shape == "aiperf"
    row = parsed.rows[0]
    doc = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    assert row["concurrency"] == 4  # the profiling phase's concurrency
    assert row["output_throughput"] == doc["output_token_throughput"]["avg"]
    assert row["request_throughput"] == doc["request_throughput"]["avg"]
    assert row["median_ttft_ms"] == doc["time_to_first_token"]["p50"]
    assert row["p99_ttft_ms"] == doc["time_to_first_token"]["p99"]
    assert row["p99_e2e_latency_ms"] == doc["request_latency"]["p99"]
    assert row["mean_tpot_ms"] == doc["inter_token_latency"]["avg"]
    assert row["p95_itl_ms"] == doc["inter_chunk_latency"]["p95"]
    assert row["completed"] == 16 and "aiperf_version" not in row
    assert parsed.workload == {
        "tool": "aiperf", "backend": "completions", "dataset": "synthetic", "input_len": 32,
        "output_len": 16, "range_ratio": None, "num_prompts": 16, "model": "/tmp/i28ckpt",
        "request_rate": float("inf")}
    assert parsed.origin["version"] == "0.13.0" and parsed.origin["tool"] == "aiperf"
    assert parsed.origin["date"].startswith("2026-12-04T")
    assert parsed.origin["command"].startswith("aiperf profile ")


def test_aiperf_csv_has_the_same_numbers_and_needs_its_load_point():
    with pytest.raises(ImportFormatError, match="--concurrency C or --rate R"):
        read_result_file(AIPERF / "profile_export_aiperf.csv")
    row = read_result_file(AIPERF / "profile_export_aiperf.csv", concurrency=4).rows[0]
    js = read_result_file(AIPERF / "profile_export_aiperf.json").rows[0]
    assert row["concurrency"] == 4
    for key in ("output_throughput", "request_throughput", "p99_ttft_ms", "median_ttft_ms"):
        assert row[key] == pytest.approx(js[key], abs=0.006)  # the CSV rounds to 2 places


def test_an_aiperf_artifact_directory_gives_the_output_digest():
    parsed = read_result_file(AIPERF)
    digest = parsed.rows[0]["output_digest"]
    assert digest == outputs_digest(AIPERF / "outputs.json") and digest.startswith("sha256:")
    data = json.loads((AIPERF / "outputs.json").read_text())["data"]
    assert len(data) == 16 and all("response_text" in r for r in data)
    # The summary and its directory are repeats of one workload.
    both = read_result_files([AIPERF, AIPERF / "profile_export_aiperf.json"])
    assert both[0].workload == both[1].workload


def test_a_directory_without_a_summary_is_refused(tmp_path):
    with pytest.raises(ImportFormatError, match="profile_export_aiperf.json"):
        read_result_file(tmp_path)


def test_an_unknown_shape_names_the_nearest_known_format(tmp_path):
    doc = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    f = tmp_path / "odd.json"
    f.write_text(json.dumps({"output_throughput": 1.0, "request_throughput": 2.0,
                             "median_tpot_ms": 3.0, "completed": 4}))
    with pytest.raises(ImportFormatError) as ei:
        read_result_file(f)
    assert str(f) in str(ei.value)
    assert "nearest known format: vllm (lacks total_token_throughput)" in str(ei.value)
    g = tmp_path / "per-request.jsonl"
    g.write_text((AIPERF / "profile_export.jsonl").read_text())
    with pytest.raises(ImportFormatError, match="nearest known format: none shares a key"):
        read_result_file(g)
    assert doc["aiperf_version"] == "0.13.0"
