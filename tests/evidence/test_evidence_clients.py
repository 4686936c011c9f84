"""genai-perf, guidellm, llmperf and SGLang bench_one_batch_server results, on real files
those tools wrote (fixtures/real/, each file's origin in its README)."""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from ledger.evidence.import_run import import_evidence
from ledger.evidence.importers import read_result_file
from ledger.evidence.importers import read_result_files
from ledger.evidence.result_json import ImportFormatError
from ledger.evidence.store import load_run
from ledger.evidence.tools.perrequest import texts_digest

REAL = Path(__file__).parent / "fixtures" / "real"
T0 = datetime(2026, 12, 2, 16, 1, 2, tzinfo=timezone.utc)
GENAI = REAL / "genai-perf-profile_export_genai_perf.json"
GUIDELLM = REAL / "guidellm-benchmarks-concurrent4.json"
GUIDELLM_03_YAML = REAL / "guidellm-0.3.0-benchmarks-engine-concurrent2-4.yaml"
LLMPERF = REAL / "llmperf-groq_70b_summary.json"
LLMPERF_REQUESTS = REAL / "llmperf-groq_70b_individual_responses.json"
ONE_BATCH_SERVER = REAL / "sglang-bench_one_batch_server-result.jsonl"
OFFLINE = REAL / "sglang-bench_offline_throughput-temp_result.json"


def test_genai_perf_carries_metrics_load_point_and_workload_from_input_config():
    doc = json.loads(GENAI.read_text())
    parsed = read_result_file(GENAI)
    assert parsed.shape == "genai-perf"
    (row,) = parsed.rows
    assert row["concurrency"] == 1  # perf_analyzer.stimulus.concurrency
    assert row["output_throughput"] == doc["output_token_throughput"]["avg"]
    assert row["request_throughput"] == doc["request_throughput"]["avg"]
    assert row["median_ttft_ms"] == doc["time_to_first_token"]["p50"]
    assert row["p99_ttft_ms"] == doc["time_to_first_token"]["p99"]
    assert row["p95_e2e_latency_ms"] == doc["request_latency"]["p95"]
    assert row["mean_tpot_ms"] == doc["inter_token_latency"]["avg"]
    assert row["completed"] == 35
    assert "telemetry_stats" not in row and "output_digest" not in row
    assert parsed.workload == {
        "tool": "genai-perf", "backend": "chat", "dataset": "synthetic", "input_len": 150,
        "output_len": 300, "range_ratio": None, "num_prompts": 100,
        "model": "openai/gpt-oss-20b", "request_rate": float("inf")}
    assert parsed.origin == {"tool": "genai-perf"}  # the file names no version, date, host


def test_guidellm_carries_each_benchmark_its_strategy_and_the_report_metadata():
    doc = json.loads(GUIDELLM.read_text())
    (bench,) = doc["benchmarks"]
    parsed = read_result_file(GUIDELLM)
    assert parsed.shape == "guidellm"
    (row,) = parsed.rows
    metrics = bench["metrics"]
    assert row["concurrency"] == 4  # strategy concurrent, streams 4
    assert row["median_ttft_ms"] == metrics["time_to_first_token_ms"]["successful"]["median"]
    assert row["p99_itl_ms"] == \
        metrics["inter_token_latency_ms"]["successful"]["percentiles"]["p99"]
    assert row["mean_e2e_latency_ms"] == pytest.approx(
        metrics["request_latency"]["successful"]["mean"] * 1000)
    assert row["output_throughput"] == metrics["output_tokens_per_second"]["successful"]["mean"]
    assert row["completed"] == 4 and row["failed"] == 0
    assert parsed.workload["model"] == "Qwen/Qwen3-4B-Thinking-2507"
    assert parsed.workload["dataset"] == "/root/aime_2024_v2.jsonl"
    assert parsed.workload["backend"] == "openai_http" and parsed.workload["num_prompts"] == 4
    assert parsed.origin["version"] == "0.5.0.dev0"
    assert parsed.origin["platform"].startswith("Linux-6.14.0")
    assert parsed.origin["date"].startswith("2026-03-02T16:58")


def test_guidellm_output_digest_is_of_the_texts_ordered_by_prompt():
    doc = json.loads(GUIDELLM.read_text())
    done = doc["benchmarks"][0]["requests"]["successful"]
    by_prompt = sorted(done, key=lambda r: json.loads(r["request_args"])["body"]["prompt"])
    row = read_result_file(GUIDELLM).rows[0]
    assert row["output_digest"] == texts_digest([r["output"] for r in by_prompt])
    assert row["output_digest"] != texts_digest([r["output"] for r in done[::-1]])


def test_a_guidellm_report_written_as_yaml_reads_as_its_json(tmp_path):
    # guidellm writes one report model as .json or .yaml; this YAML is the real 0.5 JSON
    # report dumped as YAML here (the real 0.3 YAML report is read by the test below).
    as_yaml = tmp_path / "benchmarks.yaml"
    yaml = YAML(typ="safe", pure=True)
    yaml.width = 1 << 30  # ruamel's line folding of plain scalars mangles "\\ )" in texts
    with as_yaml.open("w") as f:
        yaml.dump(json.loads(GUIDELLM.read_text()), f)
    assert read_result_file(as_yaml).rows == read_result_file(GUIDELLM).rows


def test_a_real_guidellm_0_3_yaml_report_is_a_sweep_of_its_benchmarks():
    """guidellm 0.3.0's own --output-path benchmarks.yaml (made here against the engine):
    no metadata, each benchmark carrying its args, worker and request loader."""
    doc = YAML(typ="safe", pure=True).load(GUIDELLM_03_YAML.read_text())
    parsed = read_result_file(GUIDELLM_03_YAML)
    assert parsed.shape == "guidellm"
    assert [r["concurrency"] for r in parsed.rows] == [2, 4]  # args.strategy.streams
    for row, bench in zip(parsed.rows, doc["benchmarks"]):
        metrics = bench["metrics"]
        ttft = metrics["time_to_first_token_ms"]["successful"]
        assert row["median_ttft_ms"] == ttft["median"]
        assert row["p99_ttft_ms"] == ttft["percentiles"]["p99"]
        assert row["mean_e2e_latency_ms"] == pytest.approx(
            metrics["request_latency"]["successful"]["mean"] * 1000)
        assert row["output_throughput"] == \
            metrics["output_tokens_per_second"]["successful"]["mean"]
        assert row["completed"] == bench["request_totals"]["successful"] == 12
        assert row["failed"] == 0
        done = sorted(bench["requests"]["successful"],
                      key=lambda r: (json.dumps(r["prompt"], sort_keys=True), r["output"]))
        assert row["output_digest"] == texts_digest([r["output"] for r in done])
    assert parsed.workload["backend"] == "openai_http"  # worker.backend_type
    assert parsed.workload["dataset"] == "prompt_tokens=24,output_tokens=8"
    assert parsed.workload["num_prompts"] == 12  # args.max_number
    assert parsed.workload["model"] == doc["benchmarks"][0]["worker"]["backend_model"]
    assert parsed.origin["tool"] == "guidellm" and "version" not in parsed.origin
    assert parsed.origin["date"].startswith("2026-12-05T16:25")


def test_llmperf_summary_carries_seconds_as_ms_the_concurrency_and_the_timestamp():
    doc = json.loads(LLMPERF.read_text())
    parsed = read_result_file(LLMPERF)
    assert parsed.shape == "llmperf"
    (row,) = parsed.rows
    assert row["concurrency"] == 5  # num_concurrent_requests
    assert row["median_ttft_ms"] == pytest.approx(doc["results_ttft_s_quantiles_p50"] * 1000)
    assert row["p99_e2e_latency_ms"] == pytest.approx(
        doc["results_end_to_end_latency_s_quantiles_p99"] * 1000)
    assert row["mean_tpot_ms"] == pytest.approx(doc["results_inter_token_latency_s_mean"] * 1000)
    assert row["output_throughput"] == doc["results_mean_output_throughput_token_per_s"]
    assert row["request_throughput"] == pytest.approx(
        doc["results_num_completed_requests_per_min"] / 60)
    assert row["completed"] == 150
    assert parsed.workload == {
        "tool": "llmperf", "backend": "groq", "dataset": None, "input_len": 550,
        "output_len": 150, "range_ratio": None, "num_prompts": None,
        "model": "llama2-70b-4096", "request_rate": float("inf")}
    assert parsed.origin == {"tool": "llmperf", "version": "2023-08-31",
                             "date": "2024-01-10T01:55:04+00:00"}


def test_llmperf_per_request_list_gives_the_summary_percentiles_and_needs_its_load():
    with pytest.raises(ImportFormatError, match="--concurrency C or --rate R"):
        read_result_file(LLMPERF_REQUESTS)
    (row,) = read_result_file(LLMPERF_REQUESTS, concurrency=5).rows
    summary = read_result_file(LLMPERF).rows[0]
    assert row["concurrency"] == 5 and row["completed"] == 150
    for key in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "std_ttft_ms",
                "median_tpot_ms", "p95_e2e_latency_ms", "std_e2e_latency_ms"):
        assert row[key] == pytest.approx(summary[key], rel=1e-9), key
    assert "output_digest" not in row  # llmperf keeps no generated text


def test_bench_one_batch_server_is_a_batch_size_point_per_line_of_one_run_name():
    lines = [json.loads(x) for x in ONE_BATCH_SERVER.read_text().splitlines()]
    parsed = read_result_file(ONE_BATCH_SERVER)
    assert parsed.shape == "sglang-one-batch-server"
    assert len(parsed.rows) == len(lines) == 15
    assert {r["concurrency"] for r in parsed.rows} == {8192}  # 15 repeats of batch 8192
    first = parsed.rows[0]
    assert first["output_throughput"] == lines[0]["output_throughput"]
    assert first["overall_throughput"] == lines[0]["overall_throughput"]
    assert first["batch_latency_ms"] == pytest.approx(lines[0]["latency"] * 1000)
    assert parsed.workload == {
        "tool": "sglang bench_one_batch_server", "backend": "default", "dataset": None,
        "input_len": 32, "output_len": 100, "range_ratio": None, "num_prompts": None,
        "model": None, "request_rate": None}


def test_a_bench_one_batch_server_line_of_another_length_is_another_workload(tmp_path):
    lines = ONE_BATCH_SERVER.read_text().splitlines()
    other = json.loads(lines[1])
    other["output_len"] = 200
    f = tmp_path / "result.jsonl"
    f.write_text(lines[0] + "\n" + json.dumps(other) + "\n")
    with pytest.raises(ImportFormatError, match="output_len"):
        read_result_file(f)


DETAILS = REAL / "sglang-0.5.2-bench_serving-output_details-engine.jsonl"


def test_sglang_output_details_give_percentiles_the_line_lacks_and_the_digest():
    lines = [json.loads(x) for x in DETAILS.read_text().splitlines()]
    parsed = read_result_file(DETAILS)
    assert parsed.shape == "sglang"
    assert [r["concurrency"] for r in parsed.rows] == [4, 8]
    for line, row in zip(lines, parsed.rows):
        ttfts = [t * 1000 for t in line["ttfts"]]
        gaps = [g * 1000 for gs in line["itls"] for g in gs]
        cuts = statistics.quantiles(ttfts, n=100, method="inclusive")
        assert row["p90_ttft_ms"] == pytest.approx(cuts[89])  # not in the line: computed
        assert row["p95_ttft_ms"] == pytest.approx(cuts[94])
        assert "p90_ttft_ms" not in line and "p90_itl_ms" not in line
        assert row["p90_itl_ms"] == pytest.approx(
            statistics.quantiles(gaps, n=100, method="inclusive")[89])
        # The line's own numbers stay; computed the same way they agree with them.
        assert row["p99_ttft_ms"] == line["p99_ttft_ms"] == pytest.approx(cuts[98])
        assert row["median_ttft_ms"] == line["median_ttft_ms"]
        assert row["per_request_count"] == 16 and row["failed"] == 0
        assert row["output_digest"] == texts_digest(line["generated_texts"])
        assert "generated_texts" not in row and "ttfts" not in row
    # Same prompts (seed 1), greedy engine: both load points generated the same texts.
    assert parsed.rows[0]["output_digest"] == parsed.rows[1]["output_digest"]
    assert parsed.workload["dataset"] == "random-ids" and parsed.workload["input_len"] == 32


def test_a_failed_request_leaves_the_percentiles_and_counts_in_the_digest(tmp_path):
    line = json.loads(DETAILS.read_text().splitlines()[0])
    for key in [k for k in line if k.startswith("p") and k.endswith("_ms")]:
        del line[key]
    line["errors"][0] = "Internal Server Error"
    f = tmp_path / "one-failed.jsonl"
    f.write_text(json.dumps(line) + "\n")
    (row,) = read_result_file(f).rows
    ttfts = [t * 1000 for t in line["ttfts"][1:]]
    assert row["p99_ttft_ms"] == pytest.approx(
        statistics.quantiles(ttfts, n=100, method="inclusive")[98])
    assert row["failed"] == 1
    assert row["output_digest"] == texts_digest(line["generated_texts"])


VLLM = [REAL / "vllm-0.6.3-rate8.json", REAL / "vllm-0.6.3-rate16.json"]


def test_vllm_per_request_arrays_give_percentiles_the_digest_and_the_files_date():
    parsed = read_result_files(VLLM)
    assert [p.shape for p in parsed] == ["vllm", "vllm"]
    assert [p.rows[0]["rate"] for p in parsed] == [8.0, 16.0]  # no cap: a rate sweep
    for path, result in zip(VLLM, parsed):
        doc = json.loads(path.read_text())
        (row,) = result.rows
        ttfts = [t * 1000 for t in doc["ttfts"]]
        cuts = statistics.quantiles(ttfts, n=100, method="inclusive")
        assert "p90_ttft_ms" not in doc and row["p90_ttft_ms"] == pytest.approx(cuts[89])
        assert row["p99_ttft_ms"] == doc["p99_ttft_ms"] == pytest.approx(cuts[98])
        assert row["output_digest"] == texts_digest(doc["generated_texts"])
        assert row["per_request_count"] == 16 and row["failed"] == 0
        assert result.origin == {"tool": "vllm", "date": doc["date"]}  # the file's, not ours
    assert parsed[0].rows[0]["output_digest"] == parsed[1].rows[0]["output_digest"]


def test_vllm_files_with_generated_texts_store_outputs_identical_not_unknown(tmp_path):
    import_evidence(tmp_path, "e0001", VLLM, "A", now=T0)
    summary = import_evidence(tmp_path, "e0001", VLLM, "B", now=T0.replace(minute=9))
    assert summary["outputs"] == "identical"
    _, meta, _ = load_run(tmp_path, "e0001", summary["run_id"])
    assert [f["origin"]["date"] for f in meta["files"] if f["side"] == "B"] == [
        "20261204-211918", "20261204-211925"]


def test_a_bench_offline_throughput_line_is_a_rate_inf_point_of_its_backend():
    # A real --result-filename line of SGLang's bench_offline_throughput (README: llm-42).
    line = json.loads(OFFLINE.read_text())
    parsed = read_result_file(OFFLINE)
    assert parsed.shape == "sglang-offline"
    (row,) = parsed.rows
    assert row["rate"] == float("inf")
    assert row["output_throughput"] == line["output_throughput"] == 4957.089220765828
    assert row["request_throughput"] == line["request_throughput"]
    assert row["completed"] == line["successful_requests"] == 1000
    assert row["duration"] == line["total_latency"] == 25.604340440011583
    assert parsed.workload["tool"] == "sglang bench_offline_throughput"
    assert parsed.workload["backend"] == "engine"


def test_a_tool_file_missing_its_key_numbers_is_refused_naming_that_tool(tmp_path):
    doc = json.loads(LLMPERF.read_text())
    del doc["results_mean_output_throughput_token_per_s"]
    f = tmp_path / "cut_summary.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ImportFormatError) as e:
        read_result_file(f)
    assert str(f) in str(e.value) and "unknown result shape" in str(e.value)
    assert ("nearest known format: llmperf _summary.json (lacks "
            "results_mean_output_throughput_token_per_s)") in str(e.value)
    g = tmp_path / "list.json"
    g.write_text(json.dumps([{"ttft_s": 0.1}]))
    with pytest.raises(ImportFormatError, match=r"list.json: .*llmperf's per-request list"):
        read_result_file(g)
