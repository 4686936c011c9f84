"""Evidence through the CLI: `ledger ab` measures, `restore` shows and gates on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FAKE_BENCH = Path(__file__).resolve().parents[1] / "evidence" / "fake_bench.py"
BENCH = f"{{python}} {FAKE_BENCH} --out {{out}} --concurrency {{concurrency}}"

SCRIPT = """\
#!/usr/bin/env bash
export FAKE_NOISE=0.03
export FAKE_SHIFT=0
exec python -m engine serve
"""


@pytest.fixture
def bench_ws(tmp_path, ledger):
    script = tmp_path / "serve.sh"
    script.write_text(SCRIPT)
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    assert ledger("-C", root, "target", "add", "s", script, "--format", "bash").exit_code == 0
    return root, script


def record(ledger, root, value, title):
    r = ledger("-C", root, "record", "knob", "s", f"FAKE_SHIFT={value}", "--class", "perf",
               "--title", title, "--no-validate", "--json")
    assert r.exit_code == 0, r.stderr
    return r.json()["id"]


def test_ab_gain_is_stored_shown_and_restored_with_its_headline(bench_ws, ledger, git_log):
    root, script = bench_ws
    entry = record(ledger, root, "0.10", "faster kernel")
    r = ledger("-C", root, "ab", entry, "--runs", "5", "--concurrency", "1,4", "--bench", BENCH,
               "--dry-run")
    assert r.exit_code == 0 and "would run 22 benches" in r.stdout
    assert "FAKE_SHIFT: A 0  B 0.10" in r.stdout and not (root / "evidence").exists()
    r = ledger("-C", root, "ab", entry, "--runs", "5", "--concurrency", "1,4", "--bench", BENCH)
    assert r.exit_code == 0, r.stderr
    assert "gain +" in r.stdout and "@c" in r.stdout
    assert "[ab] " in r.stderr  # progress on stderr
    runs = list((root / "evidence" / entry).iterdir())
    assert len(runs) == 1
    assert {p.name for p in runs[0].iterdir()} >= {"runs.csv", "meta.yaml", "summary.yaml"}
    assert git_log(root)[0].startswith(f"ab {entry}: gain")
    assert "gain +" in ledger("-C", root, "list").stdout
    shown = ledger("-C", root, "evidence", "show", entry, "--json").json()
    assert shown["runs"][-1]["verdict"] == "gain" and not shown["stale"]

    assert ledger("-C", root, "revert", "--perf-only", "--why", "incident").exit_code == 0
    r = ledger("-C", root, "diff")
    assert "gain +" in r.stdout
    r = ledger("-C", root, "restore", "--perf-only")
    assert r.exit_code == 0
    assert "restored" in r.stdout and "evidence: gain +" in r.stdout
    assert "FAKE_SHIFT=0.10" in script.read_text()


def test_regression_is_held_back_without_force(bench_ws, ledger):
    root, script = bench_ws
    entry = record(ledger, root, "-0.10", "slower kernel")
    r = ledger("-C", root, "ab", entry, "--runs", "5", "--concurrency", "1", "--bench", BENCH)
    assert r.exit_code == 0, r.stderr
    assert "regression" in r.stdout
    assert ledger("-C", root, "revert", entry).exit_code == 0
    r = ledger("-C", root, "restore", "--perf-only")
    assert "held back" in r.stdout and "regression" in r.stdout
    assert "FAKE_SHIFT=0\n" in script.read_text()
    r = ledger("-C", root, "restore", entry)
    assert r.exit_code == 1 and "regression" in r.stderr
    r = ledger("-C", root, "restore", entry, "--force")
    assert r.exit_code == 0 and "FAKE_SHIFT=-0.10" in script.read_text()


def test_evidence_becomes_stale_when_other_knobs_change(bench_ws, ledger):
    root, script = bench_ws
    entry = record(ledger, root, "0.10", "faster kernel")
    assert ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1",
                  "--bench", BENCH).exit_code == 0
    assert "[stale]" not in ledger("-C", root, "list").stdout
    r = ledger("-C", root, "record", "knob", "s", "FAKE_NOISE=0.2", "--class", "bugfix",
               "--title", "noisier", "--no-validate")
    assert r.exit_code == 0
    out = ledger("-C", root, "list").stdout
    assert "[stale]" in out
    # It names what differs (not "another engine commit", which did not change).
    r = ledger("-C", root, "evidence", "show", entry)
    assert "[stale: FAKE_NOISE" in r.stdout and "→ 0.2]" in r.stdout
    assert "engine commit" not in r.stdout
    assert "(stale: FAKE_NOISE" in ledger("-C", root, "show", entry).stdout


def test_import_and_bad_files(bench_ws, ledger, tmp_path):
    root, _ = bench_ws
    entry = record(ledger, root, "0.10", "faster kernel")
    sglang = tmp_path / "a.jsonl"
    sglang.write_text("".join(json.dumps({
        "backend": "sglang", "max_concurrency": 16, "completed": 64, "duration": 10.0,
        "request_throughput": 6.4, "input_throughput": 2000.0, "output_throughput": 1000.0 + i,
        "median_tpot_ms": 20.0, "total_input_tokens": 20000, "total_output_tokens": 10000,
        "mean_ttft_ms": 50.0, "p99_itl_ms": 30.0}) + "\n" for i in range(3)))
    r = ledger("-C", root, "evidence", "add", entry, str(sglang), "--side", "A", "--dry-run")
    assert r.exit_code == 0 and "3 row(s) at concurrency 16" in r.stdout
    assert not (root / "evidence" / entry).exists()
    r = ledger("-C", root, "evidence", "add", entry, str(sglang), "--side", "A")
    assert r.exit_code == 0, r.stderr
    assert (root / "evidence" / entry).is_dir()
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = ledger("-C", root, "evidence", "add", entry, str(bad), "--side", "A")
    assert r.exit_code == 1 and "error:" in r.stderr and "bad.json" in r.stderr
    assert len(list((root / "evidence" / entry).iterdir())) == 1  # nothing more stored


def test_render_through_the_cli(bench_ws, ledger, tmp_path):
    root, _ = bench_ws
    entry = record(ledger, root, "0.10", "<script>alert(1)</script> | pipe")
    assert ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1,2",
                  "--bench", BENCH).exit_code == 0
    out = tmp_path / "docs"
    r = ledger("-C", root, "render", "--out", out)
    assert r.exit_code == 0, r.stderr
    html = (out / "index.html").read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert (out / "entries" / f"{entry}.md").exists()
    first = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert ledger("-C", root, "render", "--out", out).exit_code == 0
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == first


SGLANG_BENCH = """\
import json, os, random, sys
out, conc = sys.argv[1], int(sys.argv[2])
rng = random.Random(os.path.basename(out))  # the same draws whatever the tmp dir is called
tput = 1000.0 * (1 + float(os.environ.get("FAKE_SHIFT", "0"))) * (1 + 0.01 * rng.gauss(0, 1))
with open(out, "a") as f:
    f.write(json.dumps({"backend": "sglang", "dataset_name": "random", "max_concurrency": conc,
        "completed": 64, "duration": 64 * 32 / tput, "total_input_tokens": 2048,
        "total_output_tokens": 2048, "request_throughput": tput / 32,
        "input_throughput": tput, "output_throughput": tput, "median_tpot_ms": 1000 / tput,
        "mean_ttft_ms": 5.0, "p99_itl_ms": 2.0}) + "\\n")
"""


def test_ab_with_an_sglang_style_bench(bench_ws, ledger, tmp_path):
    root, _ = bench_ws
    bench = tmp_path / "sglang_bench.py"
    bench.write_text(SGLANG_BENCH)
    entry = record(ledger, root, "0.10", "faster kernel")
    r = ledger("-C", root, "ab", entry, "--runs", "4", "--concurrency", "8",
               "--bench", f"{{python}} {bench} {{out}} {{concurrency}}")
    assert r.exit_code == 0, r.stderr
    assert "gain +" in r.stdout and "@c8" in r.stdout


def test_ab_with_three_runs_warns_yet_a_large_change_is_a_gain_saying_three_pairs(
        bench_ws, ledger):
    # Issue 52: 3 runs a side used to be "neutral … cannot reach p<0.05" whatever the data.
    root, _ = bench_ws
    entry = record(ledger, root, "0.30", "much faster kernel")
    dry = ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", "--dry-run",
                 "--bench", BENCH)
    assert dry.exit_code == 0 and "warning: 3 runs a side: the interval is wide" in dry.stderr
    r = ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", "--bench", BENCH)
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("warning: 3 runs a side") == 2  # before and after
    assert "verdict gain" in r.stdout and "clear of ±2%; 3 pairs)" in r.stdout, r.stdout
    summary = next((root / "evidence" / entry).glob("*/summary.yaml")).read_text()
    assert "3 runs a side: the interval is wide" in summary and "design: paired" in summary
    ok = ledger("-C", root, "ab", entry, "--runs", "5", "--concurrency", "1", "--bench", BENCH)
    assert ok.exit_code == 0 and "warning: 3 runs" not in ok.stderr


@pytest.mark.parametrize("runs", ["1", "2"])
def test_too_few_runs_for_any_statistics_still_print_a_summary(bench_ws, ledger, runs):
    root, _ = bench_ws
    entry = record(ledger, root, "0.30", "much faster kernel")
    r = ledger("-C", root, "ab", entry, "--runs", runs, "--concurrency", "1", "--bench", BENCH)
    assert r.exit_code == 0, r.stderr
    assert "verdict" in r.stdout and "Traceback" not in r.stderr + r.stdout
    assert "warning: fewer than 3 runs on a side: the verdict can only be inconclusive" \
        in r.stderr
    assert "inconclusive" in r.stdout and "—" in r.stdout  # no CI to print: a dash


def test_ab_until_decided_stops_when_decided_and_says_after_how_many_pairs(bench_ws, ledger):
    root, _ = bench_ws
    entry = record(ledger, root, "0.50", "much faster kernel")
    dry = ledger("-C", root, "ab", entry, "--runs", "4", "--until-decided", "--max-runs", "9",
                 "--concurrency", "1", "--bench", BENCH, "--dry-run")
    assert dry.exit_code == 0 and "would run up to 20 benches" in dry.stdout, dry.stdout
    assert "4 to 9, until decided" in dry.stdout
    r = ledger("-C", root, "ab", entry, "--runs", "4", "--until-decided", "--max-runs", "9",
               "--concurrency", "1", "--bench", BENCH)
    assert r.exit_code == 0, r.stderr
    assert "gain +" in r.stdout and "decided after 4 pairs" in r.stdout, r.stdout
    assert "sequential: 4 pairs, 1 of 6 planned looks" in r.stdout
    import yaml

    summary = yaml.safe_load(next((root / "evidence" / entry).glob("*/summary.yaml"))
                             .read_text())
    assert summary["sequential"]["stopped"] == "decided" and summary["sequential"]["looks"] == 1
    assert "decided after 4 pairs" in summary["headline"]
    assert summary["by_concurrency"][0]["metrics"]["output_throughput"]["confidence"] == \
        pytest.approx(1 - 0.025 / 5)
    assert "decided after 4 pairs" in ledger("-C", root, "show", entry).stdout
    bad = ledger("-C", root, "ab", entry, "--max-runs", "9", "--bench", BENCH)
    assert bad.exit_code != 0 and "--max-runs goes with --until-decided" in bad.stderr
    bad = ledger("-C", root, "ab", entry, "--runs", "5", "--until-decided", "--max-runs", "3",
                 "--bench", BENCH)
    assert bad.exit_code == 1 and "--max-runs 3 is below --runs 5" in bad.stderr
