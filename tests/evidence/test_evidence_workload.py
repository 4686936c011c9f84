"""Workload keys: results are repeats only when they measured one workload.

The two sglang files are real (see fixtures/real/README.md): a rate sweep mixing the
random and sharegpt datasets at the same rates, and seven runs of seven input/output
lengths at rate inf.
"""

from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.import_run import import_evidence
from ledger.evidence.importers import choose_axis
from ledger.evidence.importers import read_result_file
from ledger.evidence.result_json import ImportFormatError
from ledger.evidence.store import load_run
from ledger.evidence.store import write_run
from ledger.evidence.workload import compare_sides
from ledger.evidence.workload import parse_selection
from tests.evidence.test_evidence_importers import sglang_result
from tests.evidence.test_evidence_importers import vllm_result

REAL = Path(__file__).parent / "fixtures" / "real"
MIXED = REAL / "sglang-bench_serving-llama_3_3_70b_online_output.jsonl"
LENGTHS = REAL / "sglang-bench_serving-llama_3_3_70b_offline_output.jsonl"
T0 = datetime(2026, 12, 4, 12, 0, 0, tzinfo=timezone.utc)


def test_a_real_jsonl_mixing_random_and_sharegpt_is_refused_naming_dataset_name():
    with pytest.raises(ImportFormatError) as ei:
        read_result_file(MIXED)
    msg = str(ei.value)
    assert "holds 2 workloads" in msg and "they differ in dataset_name)" in msg
    assert f"dataset_name random: {MIXED}:1-5 (5 result(s))" in msg
    assert f"dataset_name sharegpt: {MIXED}:6-7 (2 result(s))" in msg
    assert "--workload dataset_name=random" in msg


def test_selecting_one_workload_keeps_its_own_numbers():
    random = read_result_file(MIXED, select=parse_selection(["dataset_name=random"]))
    assert [r["rate"] for r in random.rows] == [1.0, 2.0, 4.0, 8.0, 16.0]
    at4 = next(r for r in random.rows if r["rate"] == 4.0)
    assert at4["output_throughput"] == pytest.approx(2047.9108281108272)  # not 1396.99
    assert random.workload["dataset"] == "random" and random.workload["input_len"] == 1024
    assert "request_rate" not in random.workload  # the sweep's axis is not in its key
    sharegpt = read_result_file(MIXED, select=parse_selection(["dataset_name=sharegpt"]))
    assert [r["output_throughput"] for r in sharegpt.rows] == pytest.approx(
        [746.0750970739618, 1471.0864833760852])
    # sharegpt lines carry random_* argparse defaults they never used: not in the key.
    assert sharegpt.workload["input_len"] is None and sharegpt.workload["output_len"] is None
    with pytest.raises(ImportFormatError, match="dataset_name: random, sharegpt"):
        read_result_file(MIXED, select=parse_selection(["dataset_name=mooncake"]))


def test_seven_input_output_lengths_are_not_seven_repeats_at_rate_inf():
    with pytest.raises(ImportFormatError) as ei:
        read_result_file(LENGTHS)
    msg = str(ei.value)
    assert "holds 6 workloads" in msg
    assert "differ in dataset_name, random_input_len, random_output_len)" in msg
    assert f"random_input_len 4096, random_output_len 1024: {LENGTHS}:4-5 (2 result(s))" in msg
    pick = parse_selection(["random_input_len=4096", "random_output_len=1024"])
    two = read_result_file(LENGTHS, select=pick)
    assert [r["rate"] for r in two.rows] == [float("inf")] * 2  # two real repeats
    assert [round(r["output_throughput"], 1) for r in two.rows] == [1655.0, 1652.9]


def _vllm_line(cap, rate, tput):
    doc = vllm_result(cap)
    doc["request_rate"] = rate
    doc["output_throughput"] = tput
    return doc


def test_a_vllm_rate_sweep_under_one_max_concurrency_cap_is_a_rate_sweep(tmp_path):
    f = tmp_path / "append-result.jsonl"  # --append-result: one JSON line per run
    f.write_text("".join(json.dumps(_vllm_line(64, r, 100.0 * r)) + "\n" for r in (1, 2, 4)))
    parsed = read_result_file(f)
    assert [r["rate"] for r in parsed.rows] == [1.0, 2.0, 4.0]
    assert parsed.workload["max_concurrency"] == 64 and "request_rate" not in parsed.workload
    # Several caps at one rate are a concurrency sweep, its rate in the key.
    g = tmp_path / "caps.jsonl"
    g.write_text("".join(json.dumps(_vllm_line(c, "inf", 1.0)) + "\n" for c in (16, 64)))
    parsed = read_result_file(g)
    assert [r["concurrency"] for r in parsed.rows] == [16, 64]
    assert parsed.workload["request_rate"] == float("inf")
    # Both varying: two caps and two rates are not one sweep.
    h = tmp_path / "both.jsonl"
    h.write_text("".join(json.dumps(_vllm_line(c, r, 1.0)) + "\n" for c, r in ((16, 1), (64, 2))))
    with pytest.raises(ImportFormatError, match="differ in request_rate"):
        read_result_file(h)


def test_one_file_per_rate_under_one_cap(tmp_path):
    files = []
    for rate in (1, 2, 4):
        f = tmp_path / f"r{rate}.json"
        f.write_text(json.dumps(_vllm_line(64, rate, 10.0 * rate), indent=2))
        files.append(f)
    located = [(str(f), json.loads(f.read_text())) for f in files]
    assert choose_axis(located) == "rate"
    # Imported together, the files are a rate sweep; alone, each is a c64 run whose rate
    # is part of its workload, so a second rate does not join the first as a repeat.
    summary = import_evidence(tmp_path, "e0001", files, "A", now=T0)
    assert summary["load"] == "rate" and summary["workload"]["max_concurrency"] == 64
    import_evidence(tmp_path, "e0002", files[:1], "A", now=T0)
    with pytest.raises(EvidenceError, match=r"request_rate 1 \(before\) vs 2 \(this file\)"):
        import_evidence(tmp_path, "e0002", files[1:2], "A", now=T0)
    # A later file of the same rate sweep joins it (its cap is the sweep's).
    more = import_evidence(tmp_path, "e0001", files[:1], "B", now=T0)
    assert more["load"] == "rate"


def test_sglang_against_vllm_is_refused_naming_the_difference(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text(json.dumps(sglang_result(64, 1000.0)) + "\n")
    b = tmp_path / "b.json"
    b.write_text(json.dumps(vllm_result(64)))
    import_evidence(tmp_path, "e0001", [a], "A", now=T0)
    with pytest.raises(EvidenceError) as ei:
        import_evidence(tmp_path, "e0001", [b], "B", now=T0)
    msg = str(ei.value)
    assert "tool sglang bench_serving (A) vs vllm bench serve (B)" in msg
    assert "backend sglang (A) vs vllm (B)" in msg
    # Neither file states its lengths; their token counts say 256 vs 128 out per request.
    assert "output_len ~256 (A) vs ~128 (B) tokens per request" in msg
    assert "--allow-mismatch tool --allow-mismatch backend --allow-mismatch output_len" in msg
    summary = import_evidence(tmp_path, "e0001", [b], "B", now=T0,
                              allow_mismatch=["tool", "backend", "output_len"])
    assert summary["workload"]["backend"] == {"A": "sglang", "B": "vllm"}
    assert summary["workload"]["output_len_mean"] == {"A": 256.0, "B": 128.0}
    assert summary["workload"]["input_len_mean"] == 1024.0  # within the tolerance: one
    assert summary["workload"]["request_rate"] == float("inf")  # both said inf
    _, meta, _ = load_run(tmp_path, "e0001", summary["run_id"])
    assert meta["allowed_mismatch"] == ["backend", "output_len", "tool"]
    assert meta["workload"]["A"]["tool"] == "sglang bench_serving"
    with pytest.raises(EvidenceError, match="unknown workload field"):
        import_evidence(tmp_path, "e0001", [b], "B", allow_mismatch=["colour"])


def test_repeats_of_one_side_must_share_their_workload(tmp_path):
    one, other = sglang_result(64, 1000.0), sglang_result(64, 1001.0)
    other["dataset_name"] = "sharegpt"
    f, g = tmp_path / "f.jsonl", tmp_path / "g.jsonl"
    f.write_text(json.dumps(one) + "\n")
    g.write_text(json.dumps(other) + "\n")
    with pytest.raises(EvidenceError, match=r"dataset random \(before\) vs sharegpt"):
        import_evidence(tmp_path, "e0001", [f, g], "A", now=T0)
    assert not (tmp_path / "evidence" / "e0001").exists()  # nothing stored


def test_evidence_stored_before_workload_keys_still_joins(tmp_path):
    rows = [{"side": "A", "concurrency": 64, "repeat": i, "output_throughput": 1000.0 + i}
            for i in range(3)]
    old_summary = {"entry": "e0001", "run_id": "20261201T000000Z-abcd", "source": "import",
                   "metric": "output_throughput", "verdict": "inconclusive",
                   "by_concurrency": []}
    write_run(tmp_path, "e0001", "20261201T000000Z-abcd", rows,
              {"files": [], "host": "old-box"}, old_summary)
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(sglang_result(64, 1100.0 + i)) + "\n" for i in range(3)))
    summary = import_evidence(tmp_path, "e0001", [b] * 1, "B", now=T0)
    assert summary["by_concurrency"][0]["n_a"] == 3 and summary["by_concurrency"][0]["n_b"] == 3


def test_unknown_is_no_difference_but_tool_always_counts():
    a = {"tool": "x", "dataset": "random", "model": None}
    assert compare_sides(a, {"tool": "x", "dataset": None, "model": "m"}) == {}
    assert compare_sides(a, {"tool": "y", "dataset": "random"}) == {
        "tool": {"A": "x", "B": "y"}}
    assert compare_sides(None, a) == {}
