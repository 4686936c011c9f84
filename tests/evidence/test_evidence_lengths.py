"""Lengths a result file does not say: estimated from its token counts, compared with a
tolerance (see ledger.evidence.workload).

The real files are those of fixtures/real/README.md.  Every vLLM fixture measured one
length (32 in, 16 out), so the "other length" vLLM file is built here from a real one
by hand-editing its totals (:func:`_edited`); the llmperf per-request list is a real file
of another length (550 in, 150 out).
"""

from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.import_run import import_evidence
from ledger.evidence.importers import read_result_file
from ledger.evidence.result_json import ImportFormatError
from ledger.evidence.store import load_run
from ledger.evidence.store import write_run
from ledger.evidence.workload import apart
from ledger.evidence.workload import compare_sides

REAL = Path(__file__).parent / "fixtures" / "real"
C4 = REAL / "vllm-0.9.2-c4.json"
APPEND = REAL / "vllm-0.9.2-append.jsonl"
RATE8, RATE16 = REAL / "vllm-0.6.3-rate8.json", REAL / "vllm-0.6.3-rate16.json"
LLMPERF = REAL / "llmperf-groq_70b_individual_responses.json"
T0 = datetime(2026, 12, 4, 12, 0, 0, tzinfo=timezone.utc)


def _edited(src: Path, dest: Path, input_per_request: int) -> Path:
    """A copy of real vLLM results with HAND-EDITED totals: total_input_tokens as if each
    completed request had sent ``input_per_request`` tokens (--random-input-len 1024
    instead of 32); every other key as the real file wrote it."""
    text = src.read_text()
    docs = [json.loads(line) for line in text.splitlines() if line.strip()] \
        if src.suffix == ".jsonl" else [json.loads(text)]
    for doc in docs:
        doc["total_input_tokens"] = doc["completed"] * input_per_request
    dest.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return dest


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_real_vllm_files_carry_their_estimated_lengths():
    assert read_result_file(C4).workload["input_len_mean"] == 31.8  # 509 / 16
    assert read_result_file(C4).workload["output_len_mean"] == 16.0
    assert read_result_file(RATE8).workload["output_len_mean"] == 16.5  # 264 / 16
    # The three appended runs are one workload, estimates and all.
    assert read_result_file(APPEND).workload["input_len_mean"] == 31.8
    # 0.6.3 (32.0) and 0.9.2 (31.8) measured one length: retokenising is no difference.
    assert not compare_sides(read_result_file(RATE8).workload,
                             read_result_file(C4).workload, ["model", "max_concurrency"])


def test_equal_length_real_files_still_join_as_before(tmp_path):
    for side in ("A", "B"):
        summary = import_evidence(tmp_path, "e0001", [RATE8, RATE16], side, now=T0)
    assert summary["load"] == "rate"
    assert [(b["rate"], b["n_a"], b["n_b"]) for b in summary["by_concurrency"]] == [
        (8.0, 1, 1), (16.0, 1, 1)]
    assert summary["workload"]["input_len_mean"] == 32.0
    assert summary["workload"]["output_len_mean"] == 16.5
    rows, meta, _ = load_run(tmp_path, "e0001", summary["run_id"])
    assert [r["output_throughput"] for r in rows if r["side"] == "A"] == pytest.approx(
        [121.1392179287018, 232.9957530523578])  # the files' own numbers, unchanged


def test_files_that_name_their_lengths_get_no_estimate():
    key = read_result_file(REAL / "sglang-0.5.2-bench_serving-output_details-engine.jsonl"
                           ).workload
    assert key["input_len"] == 32 and key["output_len"] == 16
    assert "input_len_mean" not in key and "output_len_mean" not in key
    genai = read_result_file(REAL / "genai-perf-profile_export_genai_perf.json").workload
    assert genai["input_len"] == 150 and "input_len_mean" not in genai


def test_other_tools_that_do_not_name_their_lengths_are_estimated():
    offline = read_result_file(REAL / "sglang-bench_offline_throughput-temp_result.json")
    assert offline.workload["input_len_mean"] == 258.9  # 258890 / 1000
    assert offline.workload["output_len_mean"] == 126.9
    guide = read_result_file(REAL / "guidellm-benchmarks-concurrent4.json").workload
    assert guide["input_len_mean"] == 99.0 and guide["output_len_mean"] == 1024.0
    listed = read_result_file(LLMPERF, concurrency=5).workload
    assert listed["input_len_mean"] == 550.0 and listed["output_len_mean"] == 150.0


def test_genai_perf_of_a_file_dataset_is_estimated_from_its_sequence_lengths(tmp_path):
    # HAND-EDITED copy of the real genai-perf export: its synthetic lengths removed, as a
    # run of a prompt file writes them; input/output_sequence_length are the real ones.
    doc = json.loads((REAL / "genai-perf-profile_export_genai_perf.json").read_text())
    doc["input_config"]["input"].pop("synthetic_tokens", None)
    doc["input_config"]["input"].pop("output_tokens", None)
    f = tmp_path / "profile_export_genai_perf.json"
    f.write_text(json.dumps(doc))
    key = read_result_file(f).workload
    assert key["input_len"] is None and key["input_len_mean"] == 152.7
    assert key["output_len_mean"] == 73.5


def test_the_tolerance_is_ten_percent_and_four_tokens():
    assert not apart(1024, 930) and apart(1024, 900)  # 9.2% vs 12.1% of the larger
    assert not apart(32, 28.5) and apart(16, 8)  # 3.5 tokens vs 8
    assert not apart(None, 1024) and not apart(1024, "1024")


def test_another_length_on_one_side_is_refused_then_joined_knowingly(tmp_path):
    other = _edited(C4, tmp_path / "c4-1024.json", 1024)
    import_evidence(tmp_path, "e0001", [C4], "A", now=T0)
    before = _tree(tmp_path / "evidence")
    with pytest.raises(EvidenceError) as ei:
        import_evidence(tmp_path, "e0001", [other], "A", now=T0)
    msg = str(ei.value)
    assert f"{other}: not a repeat of the entry's latest import for side A" in msg
    assert "input_len ~31.8 (before) vs ~1024 (this file) tokens per request" in msg
    assert "output_len" not in msg  # the output counts are the real, equal ones
    assert "--allow-mismatch input_len" in msg
    assert _tree(tmp_path / "evidence") == before  # nothing stored
    summary = import_evidence(tmp_path, "e0001", [other], "A", now=T0,
                              allow_mismatch=["input_len"])
    assert summary["by_concurrency"][0]["n_a"] == 2


def test_another_length_on_side_b_is_refused_naming_both_values(tmp_path):
    other = _edited(C4, tmp_path / "c4-1024.json", 1024)
    import_evidence(tmp_path, "e0001", [C4], "A", now=T0)
    with pytest.raises(EvidenceError) as ei:
        import_evidence(tmp_path, "e0001", [other], "B", now=T0)
    msg = str(ei.value)
    assert msg.startswith("side A and side B measured different workloads: input_len ~31.8 "
                          "(A) vs ~1024 (B) tokens per request, from the results' token counts")
    assert "(give --allow-mismatch input_len to compare them knowingly)" in msg
    summary = import_evidence(tmp_path, "e0001", [other], "B", now=T0,
                              allow_mismatch=["input_len"])
    assert summary["workload"]["input_len_mean"] == {"A": 31.8, "B": 1024.0}
    assert summary["workload"]["output_len_mean"] == 16.0


def test_real_files_of_two_lengths_are_refused_for_the_lengths_too(tmp_path):
    import_evidence(tmp_path, "e0001", [C4], "A", now=T0)
    with pytest.raises(EvidenceError) as ei:
        import_evidence(tmp_path, "e0001", [LLMPERF], "B", concurrency=4, now=T0,
                        allow_mismatch=["tool"])
    msg = str(ei.value)
    assert "input_len ~31.8 (A) vs ~550 (B)" in msg and "output_len ~16 (A) vs ~150 (B)" in msg
    assert "--allow-mismatch input_len --allow-mismatch output_len" in msg
    summary = import_evidence(tmp_path, "e0001", [LLMPERF], "B", concurrency=4, now=T0,
                              allow_mismatch=["tool", "input_len", "output_len"])
    assert summary["workload"]["output_len_mean"] == {"A": 16.0, "B": 150.0}


def test_one_file_of_two_lengths_holds_two_workloads(tmp_path):
    lines = APPEND.read_text().splitlines()
    third = tmp_path / "third.jsonl"
    _edited(APPEND, third, 1024)
    mixed = tmp_path / "append-mixed.jsonl"  # real lines 1-2, line 3 hand-edited to 1024
    mixed.write_text(lines[0] + "\n" + lines[1] + "\n" + third.read_text().splitlines()[2])
    with pytest.raises(ImportFormatError) as ei:
        read_result_file(mixed)
    msg = str(ei.value)
    assert "holds 2 workloads" in msg and "(they differ in input_len)" in msg
    assert f"input_len ~31.8 tokens per request: {mixed}:1-2 (2 result(s))" in msg
    assert f"input_len ~1024 tokens per request: {mixed}:3 (1 result(s))" in msg
    assert "--allow-mismatch input_len joins them" in msg
    parsed = read_result_file(mixed, allow=["input_len"])
    assert [r["rate"] for r in parsed.rows] == [4.0, 8.0, 16.0]


def test_evidence_stored_before_estimates_still_joins(tmp_path):
    rows = [{"side": "A", "concurrency": 4, "repeat": 0, "output_throughput": 750.0}]
    old_key = {"tool": "vllm bench serve", "backend": "vllm", "dataset": None,
               "input_len": None, "output_len": None, "range_ratio": None,
               "num_prompts": 16, "model": "/tmp/i28v/ck", "request_rate": float("inf")}
    write_run(tmp_path, "e0001", "20261201T000000Z-abcd", rows,
              {"files": [], "workload": {"A": old_key}},
              {"entry": "e0001", "run_id": "20261201T000000Z-abcd", "source": "import",
               "metric": "output_throughput", "verdict": "inconclusive",
               "by_concurrency": [], "workload": old_key})
    summary = import_evidence(tmp_path, "e0001", [_edited(C4, tmp_path / "x.json", 1024)],
                              "A", now=T0)  # no estimate before: nothing to compare
    assert summary["by_concurrency"][0]["n_a"] == 2


def test_ab_runs_warn_of_another_output_length_but_never_abort_a_side():
    from ledger.evidence.run_result import same_workload

    c4 = read_result_file(C4).workload
    shorter = {**c4, "output_len_mean": 8.0}  # what an engine stopping early would count
    keys = {"B": dict(c4)}
    same_workload(keys, "B", shorter, "run 2/3 B @c4")  # one command: not refused
    with pytest.raises(EvidenceError, match="model"):
        same_workload(keys, "B", {**c4, "model": "other"}, "run 3/3 B @c4")


def test_an_ab_whose_sides_counted_other_lengths_says_so(tmp_path):
    from ledger.evidence.runner import AbResult
    from ledger.evidence.store import record_ab

    c4 = read_result_file(C4).workload
    rows = [{"side": s, "concurrency": 4, "repeat": r, "output_throughput": 700.0 + r}
            for s in "AB" for r in range(3)]
    meta = {"command": "bench", "workload": {"A": c4, "B": {**c4, "output_len_mean": 8.0}}}
    summary = record_ab(tmp_path, "e0001", AbResult(rows, meta, "s", "f"))
    assert any("output_len ~16 (A) vs ~8 (B) tokens per request" in w
               for w in summary["warnings"])
