"""Request-rate sweeps through the CLI: a 7-line sglang JSONL imported, judged, rendered by rate."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests.evidence.test_evidence_importers import RATES
from tests.evidence.test_evidence_importers import sglang_old_result
from tests.evidence.test_evidence_importers import vllm_result

FAKE_BENCH = Path(__file__).resolve().parents[1] / "evidence" / "fake_bench.py"


def sweep(path: Path, level: float) -> Path:
    """A 7-line `bench_serving --request-rate` sweep (older 18-key lines, bare Infinity)."""
    lines = [sglang_old_result(r, level * (1 + 0.002 * i)) for i, r in enumerate(RATES)]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def record(ledger, story) -> str:
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                           "--class", "perf", "--title", "ctas 512", "--json"))
    assert r.exit_code == 0, r.stderr
    return r.json()["id"]


def test_a_seven_line_rate_sweep_imports_and_renders_on_a_rate_axis(story, ledger, tmp_path):
    entry = record(ledger, story)
    # Six runs per side: with seven rates, Holm needs p < 0.05/7, below what five allow.
    a = [sweep(tmp_path / f"a{i}.jsonl", 1000.0 * (1 + 0.003 * i)) for i in range(6)]
    b = [sweep(tmp_path / f"b{i}.jsonl", 1081.0 * (1 + 0.003 * i)) for i in range(6)]
    assert "Infinity" in a[0].read_text() and len(a[0].read_text().splitlines()) == 7
    r = ledger(*story.args("evidence", "add", entry, str(a[0]), "--side", "A", "--dry-run"))
    assert r.exit_code == 0, r.stderr
    assert "sglang-old results, 7 row(s) at request rate 1,2,4,8,16,32,inf" in r.stdout
    assert ledger(*story.args("evidence", "add", entry, *map(str, a), "--side", "A")).exit_code == 0
    r = ledger(*story.args("evidence", "add", entry, *map(str, b), "--side", "B", "--json"))
    assert r.exit_code == 0, r.stderr
    summary = r.json()
    assert summary["load"] == "rate" and summary["verdict"] == "gain"
    assert "+8.1% output_throughput @rate " in summary["headline"]
    r = ledger(*story.args("evidence", "show", entry))
    assert "RATE" in r.stdout and "rate inf" in r.stdout and "rate 32" in r.stdout
    assert "@rate" in ledger(*story.args("show", entry)).stdout
    out = tmp_path / "docs"
    r = ledger(*story.args("render", "--out", str(out)))
    assert r.exit_code == 0, r.stderr
    svg = (out / "entries" / f"{entry}.svg").read_text()
    assert "request rate (req/s)" in svg and "concurrency" not in svg
    assert ">inf<" in svg or "inf</text>" in svg
    md = (out / "entries" / f"{entry}.md").read_text()
    assert "| Request rate (req/s) | n A/B |" in md and "| inf | 6/6 |" in md
    assert "against request rate, A and B" in md


def test_vllm_rate_result_and_explicit_load_points(story, ledger, tmp_path):
    entry = record(ledger, story)
    doc = vllm_result(None)
    doc["request_rate"] = 4.0
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(doc, indent=2))
    r = ledger(*story.args("evidence", "add", entry, str(f), "--side", "A", "--dry-run"))
    assert r.exit_code == 0 and "at request rate 4" in r.stdout
    bare = {k: v for k, v in doc.items() if k not in ("request_rate", "max_concurrency")}
    g = tmp_path / "bare.json"
    g.write_text(json.dumps(bare))
    r = ledger(*story.args("evidence", "add", entry, str(g), "--side", "A"))
    assert r.exit_code == 1 and "--concurrency C or --rate R" in r.stderr
    r = ledger(*story.args("evidence", "add", entry, str(g), "--side", "A", "--rate", "inf",
                           "--dry-run"))
    assert r.exit_code == 0 and "at request rate inf" in r.stdout
    r = ledger(*story.args("evidence", "add", entry, str(g), "--side", "A", "--rate", "0"))
    assert r.exit_code == 2


def test_ab_sweeps_request_rates(story, ledger):
    entry = record(ledger, story)
    bench = (f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_BENCH))} "
             "--out {out} --rate {rate}")
    r = ledger(*story.args("ab", entry, "--rate", "2,inf", "--runs", "3", "--bench", bench,
                           "--dry-run"))
    assert r.exit_code == 0, r.stderr
    assert "3 per side at request rate 2,inf" in r.stdout
    r = ledger(*story.args("ab", entry, "--rate", "2,inf", "--runs", "3", "--bench", bench,
                           "--json"))
    assert r.exit_code == 0, r.stderr
    assert [b["rate"] for b in r.json()["by_concurrency"]] == [2.0, float("inf")]
    r = ledger(*story.args("ab", entry, "--rate", "2", "--concurrency", "4", "--bench", bench))
    assert r.exit_code == 1 and "not both" in r.stderr
    r = ledger(*story.args("ab", entry, "--rate", "2", "--dry-run"))
    assert r.exit_code == 1 and "{rate}" in r.stderr


REAL = Path(__file__).resolve().parents[1] / "evidence" / "fixtures" / "real"


def test_a_real_mixed_dataset_jsonl_is_refused_then_imported_one_workload_at_a_time(
        story, ledger, tmp_path):
    entry = record(ledger, story)
    mixed = REAL / "sglang-bench_serving-llama_3_3_70b_online_output.jsonl"
    r = ledger(*story.args("evidence", "add", entry, str(mixed), "--side", "A"))
    assert r.exit_code == 1 and r.stderr.startswith("error: ")
    assert "differ in dataset_name" in r.stderr and "--workload dataset_name=random" in r.stderr
    assert not (Path(story.root) / "evidence" / entry).exists()
    r = ledger(*story.args("evidence", "add", entry, str(mixed), "--side", "A", "--workload",
                           "dataset_name=random", "--dry-run"))
    assert r.exit_code == 0, r.stderr
    assert "5 row(s) at request rate 1,2,4,8,16" in r.stdout
    r = ledger(*story.args("evidence", "add", entry, str(mixed), "--side", "A", "--workload",
                           "dataset_name=random", "--json"))
    assert r.exit_code == 0, r.stderr
    blocks = {b["rate"]: b for b in r.json()["by_concurrency"]}
    assert blocks[4.0]["metrics"]["output_throughput"]["median_a"] == 2047.91  # not 1396.99
    assert r.json()["workload"]["dataset"] == "random"
    # The sharegpt runs are not repeats of side A's random ones.
    r = ledger(*story.args("evidence", "add", entry, str(mixed), "--side", "A", "--workload",
                           "dataset_name=sharegpt"))
    assert r.exit_code == 1 and "dataset random (before) vs sharegpt (this file)" in r.stderr
    r = ledger(*story.args("evidence", "add", entry, str(mixed), "--side", "B", "--workload",
                           "dataset_name=sharegpt"))
    assert r.exit_code == 1 and "dataset random (A) vs sharegpt (B)" in r.stderr
    assert "--allow-mismatch dataset" in r.stderr
