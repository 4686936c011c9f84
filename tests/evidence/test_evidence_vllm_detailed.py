"""vLLM 0.9.2 ``benchmark_serving.py`` files, real ones made here against the bundled engine
(fixtures/real/README.md says how): ``--save-result --save-detailed --append-result`` at
three request rates under one ``--max-concurrency 4`` cap appended to one file, and a plain
``--save-result`` run at concurrency 4.

The appended file is also the real-file case of "a vLLM rate sweep under one
``--max-concurrency`` cap collapses into one cell": it must stay three rate points.
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest

from ledger.evidence.import_run import import_evidence
from ledger.evidence.importers import read_result_file
from ledger.evidence.store import load_run
from ledger.evidence.tools.perrequest import texts_digest

REAL = Path(__file__).parent / "fixtures" / "real"
APPENDED = REAL / "vllm-0.9.2-append.jsonl"
PLAIN = REAL / "vllm-0.9.2-c4.json"
T0 = datetime(2026, 12, 6, 5, 0, 0, tzinfo=timezone.utc)


def _lines(path: Path) -> list[dict]:
    # --append-result writes "\n" before each later object and none after the last.
    text = path.read_text()
    assert not text.endswith("\n")
    return [json.loads(x) for x in text.split("\n")]


def test_an_appended_file_is_one_rate_point_per_line_under_its_cap():
    lines = _lines(APPENDED)
    assert [(x["request_rate"], x["max_concurrency"]) for x in lines] == [
        (4.0, 4), (8.0, 4), (16.0, 4)]
    parsed = read_result_file(APPENDED)
    assert parsed.shape == "vllm"
    # Not one c4 cell with three "repeats": three rate points.
    assert [r["rate"] for r in parsed.rows] == [4.0, 8.0, 16.0]
    assert not any("concurrency" in r for r in parsed.rows)
    assert parsed.workload["max_concurrency"] == 4 and "request_rate" not in parsed.workload
    assert parsed.workload["tool"] == "vllm bench serve"
    assert parsed.workload["num_prompts"] == 16 and parsed.workload["model"] == "/tmp/i28v/ck"
    assert parsed.origin == {"tool": "vllm", "date": lines[0]["date"]}


def test_each_appended_line_keeps_its_numbers_and_its_arrays_give_the_rest():
    for line, row in zip(_lines(APPENDED), read_result_file(APPENDED).rows):
        for key in ("output_throughput", "request_throughput", "median_ttft_ms",
                    "p99_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "completed", "duration"):
            assert row[key] == line[key], key
        ttfts = [t * 1000 for t in line["ttfts"]]
        cuts = statistics.quantiles(ttfts, n=100, method="inclusive")
        assert "p90_ttft_ms" not in line and row["p90_ttft_ms"] == pytest.approx(cuts[89])
        assert row["p99_ttft_ms"] == pytest.approx(cuts[98])  # the file's, and agrees
        gaps = [g * 1000 for gs in line["itls"] for g in gs]
        assert row["p95_itl_ms"] == pytest.approx(
            statistics.quantiles(gaps, n=100, method="inclusive")[94])
        assert row["output_digest"] == texts_digest(line["generated_texts"])
        assert row["per_request_count"] == 16 and row["failed"] == 0
        assert not {"ttfts", "itls", "generated_texts", "errors", "input_lens"} & row.keys()


def test_a_plain_save_result_file_is_a_concurrency_point_without_outputs():
    doc = json.loads(PLAIN.read_text())
    assert doc["request_rate"] == "inf" and "ttfts" not in doc  # no --save-detailed
    parsed = read_result_file(PLAIN)
    (row,) = parsed.rows
    assert row["concurrency"] == 4 and "rate" not in row
    assert row["output_throughput"] == doc["output_throughput"]
    assert row["p99_itl_ms"] == doc["p99_itl_ms"]
    assert "output_digest" not in row and "p90_ttft_ms" not in row
    assert parsed.workload["request_rate"] == float("inf")


def test_appended_sweeps_on_both_sides_are_judged_per_rate_with_outputs_compared(tmp_path):
    import_evidence(tmp_path, "e0001", [APPENDED], "A", now=T0)
    summary = import_evidence(tmp_path, "e0001", [APPENDED], "B", now=T0)
    assert summary["load"] == "rate"
    assert len(summary["by_concurrency"]) == 3  # one cell per rate, not one merged cell
    assert summary["outputs"] == "identical"  # same seed, greedy engine
    assert summary["verdict"] == "inconclusive"  # one run a side cannot conclude
    _, meta, _ = load_run(tmp_path, "e0001", summary["run_id"])
    assert {f["origin"]["date"] for f in meta["files"]} == {"20261206-044700"}
