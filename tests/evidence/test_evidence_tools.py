"""Importers of other bench clients, on real files those tools wrote (fixtures/real/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.evidence.importers import read_result_file
from ledger.evidence.importers import read_result_files
from ledger.evidence.result_json import ImportFormatError
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



def _csv_cells(path: Path) -> dict[tuple[str, str], float]:
    """(metric, column) -> number of AIPerf's CSV export: its per-request table and its
    two-column summary table (as column "Value")."""
    import csv

    cells: dict[tuple[str, str], float] = {}
    header: list[str] = []
    for line in csv.reader(path.read_text().splitlines()):
        if not line:
            header = []
        elif not header:
            header = line
        else:
            for column, cell in zip(header[1:], line[1:]):
                if cell:
                    cells[(line[0], column)] = float(cell)
    return cells


def test_aiperf_csv_values_are_the_csvs_own_cells():
    cells = _csv_cells(AIPERF / "profile_export_aiperf.csv")
    row = read_result_file(AIPERF / "profile_export_aiperf.csv", concurrency=4).rows[0]
    assert row["output_throughput"] == cells[("Output Token Throughput (tokens/sec)", "Value")]
    assert row["request_throughput"] == cells[("Request Throughput (requests/sec)", "Value")]
    assert row["completed"] == cells[("Completed Requests (Success + Error)", "Value")] == 16
    assert row["duration"] == cells[("Benchmark Duration (sec)", "Value")]
    ttft = "Time to First Token (ms)"
    assert [row[f"{s}_ttft_ms"] for s in ("mean", "median", "p90", "p99", "std")] == [
        cells[(ttft, c)] for c in ("avg", "p50", "p90", "p99", "std")]
    assert row["p95_itl_ms"] == cells[("Inter Chunk Latency (ms)", "p95")]
    assert row["mean_tpot_ms"] == cells[("Inter Token Latency (ms)", "avg")]
    assert row["p99_e2e_latency_ms"] == cells[("Request Latency (ms)", "p99")]

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


ONE_BATCH = REAL / "sglang-bench_one_batch-result.jsonl"


def test_bench_one_batch_runs_of_several_names_are_refused_naming_run_name():
    with pytest.raises(ImportFormatError, match=r"run_name") as e:
        read_result_file(ONE_BATCH)
    assert "holds 4 workloads" in str(e.value) and ":1-3 (3 result(s))" in str(e.value)
    assert "--workload run_name=cuda_graph" in str(e.value)


def test_bench_one_batch_is_a_batch_size_sweep_with_decode_metrics():
    parsed = read_result_file(ONE_BATCH, select={"run_name": "cuda_graph"})
    assert parsed.shape == "sglang-one-batch"
    assert [r["concurrency"] for r in parsed.rows] == [1, 8, 16]
    first = json.loads(ONE_BATCH.read_text().splitlines()[0])
    row = parsed.rows[0]
    assert row["output_throughput"] == first["median_decode_throughput"]
    assert row["median_tpot_ms"] == pytest.approx(first["median_decode_latency"] * 1000)
    assert row["prefill_latency_ms"] == pytest.approx(first["prefill_latency"] * 1000)
    assert parsed.workload == {
        "tool": "sglang bench_one_batch", "backend": "cuda_graph", "dataset": None,
        "input_len": 256, "output_len": 32, "range_ratio": None, "num_prompts": None,
        "model": None, "request_rate": None}
    assert parsed.origin == {"tool": "sglang bench_one_batch"}


def test_bench_one_batch_lines_of_one_name_and_batch_are_repeats():
    rows = read_result_file(ONE_BATCH, select={"run_name": "default"}).rows
    assert [(r["concurrency"], round(r["output_throughput"], 2)) for r in rows] == [
        (1, 426.9), (1, 428.67)]


def test_a_prefill_only_bench_one_batch_line_is_refused_as_unknown(tmp_path):
    line = json.loads(ONE_BATCH.read_text().splitlines()[0])
    for k in ("median_decode_latency", "median_decode_throughput"):
        del line[k]
    f = tmp_path / "prefill.jsonl"
    f.write_text(json.dumps({**line, "output_len": 1}) + "\n")
    with pytest.raises(ImportFormatError, match=r"unknown result shape.*sglang-one-batch"):
        read_result_file(f)
