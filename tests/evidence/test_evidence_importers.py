"""Importers on sample files built to the real sglang / vLLM / engine key sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.importers import load_result_file
from ledger.evidence.importers import parse_engine_json
from ledger.evidence.result_json import ImportFormatError
from ledger.evidence.result_json import detect_shape


def sglang_result(conc: int, tput: float) -> dict:
    """One `bench_serving --output-file` line (sglang's key set, newer version)."""
    r = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": conc,
        "duration": 61.2,
        "completed": 512,
        "total_input_tokens": 524288,
        "total_output_tokens": 131072,
        "request_throughput": 8.37,
        "input_throughput": 8567.1,
        "output_throughput": tput,
        "total_throughput": 10709.4,
        "concurrency": conc - 0.4,
        "server_info": {"version": "0.5.1"},
    }
    for m in ("e2e_latency", "ttft", "tpot", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            r[f"{stat}_{m}_ms"] = 12.5
    r["p95_itl_ms"] = 14.0
    r["p90_e2e_latency_ms"] = 7000.0
    return r


def vllm_result(max_conc) -> dict:
    """A `vllm bench serve --save-result` document (with per-request lists)."""
    r = {
        "date": "20261202-160102",
        "endpoint_type": "openai",
        "backend": "vllm",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 200,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": max_conc,
        "duration": 40.1,
        "completed": 200,
        "failed": 0,
        "total_input_tokens": 204800,
        "total_output_tokens": 25600,
        "request_throughput": 4.98,
        "request_goodput": None,
        "output_throughput": 638.4,
        "total_token_throughput": 5745.9,
        "max_output_tokens_per_s": 900.0,
        "max_concurrent_requests": 64,
        "input_lens": [1024] * 3,
        "output_lens": [128] * 3,
        "ttfts": [0.1] * 3,
        "itls": [[0.01]] * 3,
        "generated_texts": ["a", "b", "c"],
        "errors": ["", "", ""],
    }
    for m in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            r[f"{stat}_{m}_ms"] = 33.0
    return r


def engine_result(conc: int) -> dict:
    return {
        "max_concurrency": conc,
        "completed": 8,
        "duration": 1.2,
        "request_throughput": 6.6,
        "output_throughput": 105.3,
        "median_tpot_ms": 9.1,
        "p99_itl_ms": 11.0,
        "mean_ttft_ms": 30.2,
        "output_digest": "sha256:ab12",
        "device": "cpu",
    }


def write_lines(path: Path, objs) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_sglang_jsonl(tmp_path):
    shape, rows = load_result_file(
        write_lines(tmp_path / "s.jsonl", [sglang_result(16, 900.0), sglang_result(64, 1234.5)])
    )
    assert shape == "sglang"
    assert [r["concurrency"] for r in rows] == [16, 64]
    assert rows[1]["output_throughput"] == 1234.5 and rows[1]["p99_itl_ms"] == 12.5
    assert "request_rate" not in rows[0]  # a load parameter, not a measurement
    assert "server_info" not in rows[0] and "backend" not in rows[0]
    assert rows[0]["concurrency"] == 16  # from max_concurrency, not sglang's measured `concurrency`
    assert rows[0]["measured_concurrency"] == 15.6 and "rate" not in rows[0]


def test_vllm_pretty_json_with_and_without_concurrency(tmp_path):
    p = tmp_path / "v.json"
    p.write_text(json.dumps(vllm_result(32), indent=2))
    shape, rows = load_result_file(p)
    assert shape == "vllm" and rows[0]["concurrency"] == 32
    assert rows[0]["total_token_throughput"] == 5745.9 and "ttfts" not in rows[0]
    p.write_text(json.dumps(vllm_result(None), indent=2))
    # max_concurrency null: the load point is the request rate ("inf": all at once).
    row = load_result_file(p)[1][0]
    assert row["rate"] == float("inf") and "concurrency" not in row
    assert load_result_file(p, concurrency=8)[1][0]["concurrency"] == 8


def test_engine_json_lines(tmp_path):
    shape, rows = load_result_file(
        write_lines(tmp_path / "e.json", [engine_result(1), engine_result(64)])
    )
    assert shape == "engine"
    assert rows[0]["output_digest"] == "sha256:ab12" and "device" not in rows[0]
    assert parse_engine_json(json.dumps(engine_result(4)), "x")[0]["concurrency"] == 4


def test_engine_parser_refuses_other_shapes():
    with pytest.raises(ImportFormatError, match="unknown result shape"):
        parse_engine_json(json.dumps(sglang_result(4, 1.0)), "bench output")


def test_unknown_shape_names_file_and_expected_keys(tmp_path):
    p = write_lines(tmp_path / "weird.json", [{"tokens_per_sec": 5.0, "conc": 4}])
    with pytest.raises(ImportFormatError) as ei:
        load_result_file(p)
    msg = str(ei.value)
    assert str(p) in msg and "output_throughput" in msg and "input_throughput" in msg
    assert "found: conc, tokens_per_sec" in msg


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty file"),
        ('{"max_concurrency": 1,\n', "not JSON"),
        ("[1, 2]", "found a JSON list"),
        ('{"a": 1}\n[1]\n', "expected a JSON object"),
    ],
)
def test_malformed_files_are_refused(tmp_path, text, problem):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ImportFormatError, match=problem):
        load_result_file(p)


def test_mixed_shapes_in_one_file_are_refused(tmp_path):
    p = write_lines(tmp_path / "mix.jsonl", [sglang_result(4, 1.0), engine_result(4)])
    with pytest.raises(ImportFormatError, match="mixes sglang and engine"):
        load_result_file(p)


def test_bad_concurrency_values(tmp_path):
    r = sglang_result(4, 1.0)
    r["max_concurrency"] = 2.5
    with pytest.raises(ImportFormatError, match="positive integer"):
        load_result_file(write_lines(tmp_path / "c.jsonl", [r]))
    with pytest.raises(ImportFormatError, match="override must be >= 1"):
        load_result_file(write_lines(tmp_path / "d.jsonl", [sglang_result(4, 1.0)]), concurrency=0)


def test_missing_file_is_an_evidence_error(tmp_path):
    with pytest.raises(EvidenceError, match="cannot read"):
        load_result_file(tmp_path / "nope.json")


def test_detect_shape_prefers_the_marker_keys():
    assert detect_shape(engine_result(1)) == "engine"
    assert detect_shape(vllm_result(1)) == "vllm"
    assert detect_shape(sglang_result(1, 1.0)) == "sglang"
    assert detect_shape(sglang_old_result(1.0, 1.0)) == "sglang-old"
    assert detect_shape({"output_throughput": 1}) is None


def sglang_old_result(rate, tput: float) -> dict:
    """One line of the older 18-key `bench_serving --output-file` schema."""
    return {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": rate,
        "max_concurrency": None,
        "total_input_tokens": 307200,
        "total_output_tokens": 307200,
        "total_output_tokens_retokenized": 306880,
        "mean_e2e_latency_ms": 21040.5,
        "median_e2e_latency_ms": 20977.1,
        "median_ttft_ms": 95.2,
        "median_itl_ms": 20.4,
        "output_throughput": tput,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 1024,
        "random_range_ratio": 1.0,
        "duration": 320.0,
        "completed": 300,
    }


RATES = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, float("inf")]


def test_sglang_old_rate_sweep_with_bare_infinity(tmp_path):
    lines = [sglang_old_result(r, 900.0 + i) for i, r in enumerate(RATES)]
    assert len(lines[0]) == 18
    p = tmp_path / "online.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in lines))
    assert "Infinity" in p.read_text()  # what Python's json writes for inf
    shape, rows = load_result_file(p)
    assert shape == "sglang-old"
    assert [r["rate"] for r in rows] == RATES
    assert all("concurrency" not in r for r in rows)
    assert rows[0]["request_throughput"] == pytest.approx(300 / 320.0)  # derived
    assert rows[6]["output_throughput"] == 906.0 and rows[0]["median_itl_ms"] == 20.4


def test_vllm_rate_result_and_its_goodput_key(tmp_path):
    r = vllm_result(None)
    r["request_rate"] = 4.0
    del r["request_goodput"]
    r["request_goodput:"] = 3.5  # older vLLM spells it with the colon
    p = tmp_path / "v.json"
    p.write_text(json.dumps(r))
    row = load_result_file(p)[1][0]
    assert row["rate"] == 4.0 and row["request_goodput"] == 3.5
    assert "request_goodput:" not in row


def test_a_result_without_a_load_point_asks_for_one(tmp_path):
    r = sglang_old_result(None, 1.0)
    p = write_lines(tmp_path / "n.jsonl", [r])
    with pytest.raises(ImportFormatError, match="no load point.*--concurrency C or --rate R"):
        load_result_file(p)
    assert load_result_file(p, rate=2.0)[1][0]["rate"] == 2.0
    assert load_result_file(p, concurrency=3)[1][0]["concurrency"] == 3
    r["request_rate"] = "trace"
    with pytest.raises(ImportFormatError, match="'trace' is not a rate.*--rate R"):
        load_result_file(write_lines(tmp_path / "t.jsonl", [r]))


def test_overrides_are_checked(tmp_path):
    p = write_lines(tmp_path / "o.jsonl", [sglang_old_result(1.0, 1.0)])
    with pytest.raises(ImportFormatError, match="not both"):
        load_result_file(p, concurrency=2, rate=2.0)
    with pytest.raises(ImportFormatError, match="rate override must be > 0"):
        load_result_file(p, rate=0.0)


def test_concurrency_and_rate_points_are_not_mixed(tmp_path):
    p = write_lines(tmp_path / "m.jsonl", [sglang_result(4, 1.0), {**sglang_result(4, 1.0),
                                            "max_concurrency": None, "request_rate": 2.0}])
    with pytest.raises(ImportFormatError, match="mixes concurrency and rate load points"):
        load_result_file(p)
