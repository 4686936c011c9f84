"""SGLang's bench_serving on side A against vLLM's benchmark_serving on side B, both real
files (tests/evidence/fixtures/real/README.md): refused naming every differing field, then
accepted knowingly with --allow-mismatch, the difference kept in the summary."""

from __future__ import annotations

from tests.cli.evidence_kit import REAL
from tests.cli.evidence_kit import one_entry

SGLANG = REAL / "sglang-0.5.2-bench_serving-output_details-engine.jsonl"  # c4 and c8
VLLM = REAL / "vllm-0.9.2-c4.json"


def _workspace(tmp_path, ledger):
    root, _, entry = one_entry(tmp_path, ledger)
    return root, entry


def test_sglang_against_vllm_is_refused_then_allowed_knowingly(tmp_path, ledger):
    root, entry = _workspace(tmp_path, ledger)
    assert ledger("-C", root, "evidence", "add", entry, SGLANG, "--side", "A").exit_code == 0
    before = sorted(p.name for p in (root / "evidence" / entry).rglob("*"))
    r = ledger("-C", root, "evidence", "add", entry, VLLM, "--side", "B")
    assert r.exit_code == 1 and r.stderr.startswith("error: ")
    assert "tool sglang bench_serving (A) vs vllm bench serve (B)" in r.stderr
    # Both drove the same OpenAI completions client ("backend vllm"); only the tool differs
    # (the SGLang line names no model: unknown is no difference).
    assert "backend" not in r.stderr and "--allow-mismatch tool to compare" in r.stderr
    assert sorted(p.name for p in (root / "evidence" / entry).rglob("*")) == before
    r = ledger("-C", root, "evidence", "add", entry, VLLM, "--side", "B",
               "--allow-mismatch", "colour")
    assert r.exit_code == 1 and "colour" in r.stderr
    r = ledger("-C", root, "evidence", "add", entry, VLLM, "--side", "B",
               "--allow-mismatch", "tool", "--json")
    assert r.exit_code == 0, r.stderr
    summary = r.json()
    assert summary["workload"]["tool"] == {"A": "sglang bench_serving", "B": "vllm bench serve"}
    assert [b["concurrency"] for b in summary["by_concurrency"]] == [4, 8]
    shown = ledger("-C", root, "evidence", "show", entry).stdout
    assert "tool A sglang bench_serving / B vllm bench serve" in shown
