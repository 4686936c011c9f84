"""Issue 50 item 4: a run with no completed request is refused (never a 0 throughput), and
a vLLM ``bench sweep serve`` ``summary.json`` (a list of one combination's
``--save-result`` objects, each with ``run_number`` and the sweep's overrides, as
``vllm/benchmarks/sweep/serve.py`` writes it) is read as repeats of one workload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.evidence.importers import read_result_file
from ledger.evidence.result_json import ImportFormatError

REAL = Path(__file__).parent / "fixtures" / "real" / "vllm-0.9.2-c4.json"


def _run(n: int, tput: float) -> dict:
    obj = json.loads(REAL.read_text())
    obj.update(output_throughput=tput, run_number=n, max_num_seqs=64,
               max_num_batched_tokens=2048)
    return obj


def test_a_sweep_summary_is_read_as_repeats(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([_run(0, 700.0), _run(1, 710.0), _run(2, 720.0)], indent=4))
    parsed = read_result_file(path)
    assert parsed.shape == "vllm"
    assert [r["output_throughput"] for r in parsed.rows] == [700.0, 710.0, 720.0]
    assert {r["concurrency"] for r in parsed.rows} == {4.0}
    assert all("run_number" not in r for r in parsed.rows)


def test_a_sweep_of_two_workloads_is_refused_naming_the_runs(tmp_path):
    other = _run(1, 710.0)
    other["num_prompts"] = 512
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([_run(0, 700.0), other]))
    with pytest.raises(ImportFormatError, match=r"(?s)num_prompts 16: .*run=0.*num_prompts 512: .*run=1"):
        read_result_file(path)


def test_a_list_that_is_no_sweep_still_says_what_it_is_not(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"a": 1}]))
    with pytest.raises(ImportFormatError, match="found a JSON list"):
        read_result_file(path)


@pytest.mark.parametrize("failed", [8, None])
def test_a_run_that_completed_nothing_is_refused(tmp_path, failed):
    obj = json.loads(REAL.read_text())
    obj.update(completed=0, output_throughput=0.0, request_throughput=0.0,
               total_token_throughput=0.0)
    if failed is not None:
        obj["failed"] = failed
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(obj))
    said = "completed: 0, failed: 8" if failed else "completed: 0"
    with pytest.raises(ImportFormatError, match=f"completed no request \\({said}\\)"):
        read_result_file(path)
