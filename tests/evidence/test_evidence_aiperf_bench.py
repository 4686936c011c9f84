"""``--bench aiperf:MODEL_DIR``: AIPerf driving the bundled engine as the A/B bench."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from ledger.errors import EvidenceError
from ledger.evidence import aiperf_bench
from ledger.evidence.runner import Side
from ledger.evidence.runner import check_template
from ledger.evidence.runner import render_command
from ledger.evidence.runner import resolve_bench
from ledger.evidence.runner import run_alternating

REPO = Path(__file__).resolve().parents[2]


def test_the_template_keeps_an_odd_model_dir_one_argument_and_flags_after_dashes(tmp_path):
    model = tmp_path / "my model; $(rm -rf x)"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    tokens = check_template(resolve_bench(f"aiperf:{model}"))
    argv = render_command(tokens, {"out": "/o.json", "concurrency": "8", "rate": "",
                                   "python": "py"}, ["--mem-fraction-static", "0.9"])
    assert argv == ["py", "-m", "ledger.evidence.aiperf_bench", "--model", str(model),
                    "--out", "/o.json", "--concurrency", "8", "--rate", "", "--",
                    "--mem-fraction-static", "0.9"]


def test_a_model_dir_without_a_tokenizer_is_refused_and_other_benches_pass(tmp_path):
    with pytest.raises(EvidenceError, match=r"tokenizer\.json"):
        resolve_bench(f"aiperf:{tmp_path}")
    assert resolve_bench("{python} bench.py --json {out}") == "{python} bench.py --json {out}"


def test_a_relative_model_dir_is_made_absolute_since_the_bench_runs_elsewhere(tmp_path,
                                                                             monkeypatch):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "tokenizer.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    tokens = check_template(resolve_bench("aiperf:ck"))
    assert tokens[tokens.index("--model") + 1] == str(tmp_path / "ck")


def _args(**kw) -> argparse.Namespace:
    base = dict(model=Path("/m"), out=Path("/t/out-3.json"), concurrency=None, rate="",
                requests=16, input_len=32, output_len=16, seed=0)
    return argparse.Namespace(**{**base, **kw})


def test_aiperf_argv_gives_the_load_point_asked_for():
    by_c = aiperf_bench.aiperf_argv("aiperf", _args(concurrency=4), "http://h:1")
    assert by_c[:2] == ["aiperf", "profile"]
    assert by_c[by_c.index("--concurrency") + 1] == "4" and "--request-rate" not in by_c
    assert by_c[by_c.index("--artifact-dir") + 1] == "/t/out-3.json"
    assert by_c[by_c.index("--url") + 1] == "http://h:1"
    by_r = aiperf_bench.aiperf_argv("aiperf", _args(rate="2.5"), "http://h:1")
    assert by_r[by_r.index("--request-rate") + 1] == "2.5" and "--concurrency" not in by_r


def test_the_command_needs_a_load_point():
    with pytest.raises(SystemExit):
        aiperf_bench.main(["--model", "/m", "--out", "/o", "--concurrency", "", "--rate", ""])


AIPERF = aiperf_bench.find_aiperf()


@pytest.mark.skipif(AIPERF is None, reason="AIPerf is not installed (pip install aiperf into a "
                    "venv of its own, then put aiperf on PATH or set AIPERF=/path/to/aiperf)")
def test_an_aiperf_driven_ab_on_the_bundled_engine_yields_percentiles(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    from engine_checkpoint import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "ckpt")
    monkeypatch.setenv("AIPERF", AIPERF)
    command = resolve_bench(f"aiperf:{ckpt}")
    sides = Side("A", {}, REPO), Side("B", {"LEDGER_TEST_SIDE": "b"}, REPO)
    result = run_alternating(command, *sides, [2], 1, warmup=False)
    assert [(r["side"], r["concurrency"]) for r in result.rows] == [("A", 2.0), ("B", 2.0)]
    for row in result.rows:
        assert row["completed"] == 16
        assert 0 < row["median_ttft_ms"] <= row["p99_ttft_ms"]
        assert row["output_throughput"] > 0
        assert len(row["output_digest"]) >= 16  # from the artifact directory's outputs.json
    assert result.meta["workload"]["A"]["tool"] == "aiperf"
    assert result.meta["workload"]["A"] == result.meta["workload"]["B"]
