"""Statistics and verdicts on runs drawn from known distributions (in-process, fast)."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.stats import VERDICT_RULE
from ledger.evidence.stats import _holm
from ledger.evidence.stats import analyze
from ledger.evidence.stats import entry_verdict
from ledger.evidence.headline import format_headline
from ledger.evidence.headline import neutral_reason
from ledger.evidence.summary import build_summary
from ledger.evidence.stats import metric_direction
from tests.evidence import fake_bench


def fake_ab(
    seed: int,
    shift: float,
    runs: int = 5,
    noise: float = 0.03,
    concurrencies=(64,),
    digest_b="d0",
    only_primary=False,
):
    """Rows of an A/B where side B is shifted by ``shift``; interleaved like run_ab.

    ``only_primary`` keeps just output_throughput: the 100-trial tests judge only that, and
    every extra metric costs a bootstrap.
    """
    rng = random.Random(seed)
    rows = []
    for c in concurrencies:
        for r in range(runs):
            for side, s, digest in (("A", 0.0, "d0"), ("B", shift, digest_b)):
                res = fake_bench.draw_result(rng, c, s, noise)
                res.pop("max_concurrency")
                if only_primary:
                    res = {"output_throughput": res["output_throughput"]}
                rows.append(
                    {"side": side, "concurrency": c, "repeat": r, "output_digest": digest, **res}
                )
    return rows


def test_a_a_is_never_a_gain_or_a_regression_and_neutral_when_steady():
    # 3% noise, 5 runs a side: the interval (about ±4.4%) cannot fit inside ±2%, so an A/A
    # is honestly inconclusive; it must (almost) never be called a gain or a regression.
    verdicts = [analyze(fake_ab(seed, 0.0, only_primary=True))["verdict"] for seed in range(100)]
    assert verdicts.count("gain") + verdicts.count("regression") <= 2, verdicts
    assert "neutral" not in verdicts or verdicts.count("inconclusive") > 50
    # A steady bench (0.5% noise) shows the A/A inside the tolerance: neutral.
    steady = [analyze(fake_ab(seed, 0.0, noise=0.005, only_primary=True))["verdict"]
              for seed in range(100)]
    assert steady.count("neutral") >= 95, steady


def test_a_a_over_three_concurrencies_keeps_false_calls_rare():
    # Three chances to be fooled: an interval must still clear the ±2% band to call a change.
    verdicts = [
        analyze(fake_ab(1000 + s, 0.0, concurrencies=(1, 16, 64), only_primary=True))["verdict"]
        for s in range(100)
    ]
    assert verdicts.count("gain") + verdicts.count("regression") <= 3, verdicts


@pytest.mark.parametrize("seed", range(10))
def test_ten_percent_better_is_a_gain(seed):
    a = analyze(fake_ab(seed, +0.10, concurrencies=(16, 64)))
    assert a["verdict"] == "gain"
    cell = a["by_concurrency"][-1]["metrics"]["output_throughput"]
    assert 5 < cell["delta_pct"] < 15
    assert cell["ci_low_pct"] > 0 and cell["n_a"] == cell["n_b"] == 5


@pytest.mark.parametrize("seed", range(10))
def test_ten_percent_worse_is_a_regression(seed):
    assert analyze(fake_ab(seed, -0.10, concurrencies=(16, 64)))["verdict"] == "regression"


def test_single_concurrency_gain_rate_is_high_at_n5():
    verdicts = [analyze(fake_ab(500 + s, +0.10, only_primary=True))["verdict"] for s in range(40)]
    assert verdicts.count("gain") >= 36 and "regression" not in verdicts


def test_regression_anywhere_beats_a_gain_elsewhere():
    rows = fake_ab(3, +0.10, concurrencies=(16,)) + fake_ab(4, -0.10, concurrencies=(64,))
    a = analyze(rows)
    by_c = {
        b["concurrency"]: b["metrics"]["output_throughput"]["verdict"] for b in a["by_concurrency"]
    }
    assert by_c == {16: "gain", 64: "regression"}
    assert a["verdict"] == "regression"


def test_fewer_than_three_runs_per_side_is_inconclusive():
    a = analyze(fake_ab(1, +0.30, runs=2))
    assert a["verdict"] == "inconclusive"
    assert a["by_concurrency"][0]["metrics"]["output_throughput"]["p_value"] is None


def test_one_side_only_is_inconclusive():
    rows = [r for r in fake_ab(1, 0.1) if r["side"] == "A"]
    a = analyze(rows)
    assert a["verdict"] == "inconclusive" and a["by_concurrency"][0]["n_b"] == 0


def test_latency_primary_metric_lower_is_better():
    a = analyze(fake_ab(0, +0.10), metric="median_tpot_ms")
    cell = a["by_concurrency"][0]["metrics"]["median_tpot_ms"]
    assert cell["higher_is_better"] is False and cell["delta_pct"] < 0
    assert a["verdict"] == "gain"  # tpot went down: better


def test_importing_the_package_does_not_import_pandas():
    # `ledger --help` imports the CLI, which imports this package: it must stay cheap.
    code = (
        "import sys, ledger.evidence; "
        "print(sorted({'pandas', 'numpy', 'scipy', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_metric_direction_from_names():
    assert metric_direction("output_throughput") is True
    assert metric_direction("total_token_throughput") is True
    assert metric_direction("p99_itl_ms") is False
    assert metric_direction("duration") is None
    assert metric_direction("completed") is None


def test_analysis_is_deterministic():
    rows = fake_ab(9, 0.04)
    assert analyze(rows) == analyze(list(reversed(rows)))


def test_outputs_identical_differ_unknown():
    assert analyze(fake_ab(1, 0.1))["outputs"] == "identical"
    assert analyze(fake_ab(1, 0.1, digest_b="d1"))["outputs"] == "differ"
    rows = fake_ab(1, 0.1)
    for r in rows:
        del r["output_digest"]
    assert analyze(rows)["outputs"] == "unknown"


def test_headline_format_and_no_evidence():
    a = analyze(fake_ab(0, +0.128, concurrencies=(1, 64)))
    line = format_headline(a)
    assert re.fullmatch(
        r"gain \+\d+\.\d% output_throughput @c(1|64) "
        r"\(CI \+\d+\.\d\.\.\+\d+\.\d%, clear of ±2%; 5 runs a side\), "
        r"\+\d+\.\d% @c(1|64); outputs identical",
        line,
    ), line
    assert format_headline(None) == "no evidence"


def test_a_neutral_headline_says_why_and_shows_every_load_point():
    a = analyze(fake_ab(2, +0.002, runs=5, noise=0.005, concurrencies=(64, 96)))
    line = format_headline(a)
    assert a["verdict"] == "neutral"
    assert "within ±2%; 5 runs a side)" in line and "@c64" in line and "@c96" in line
    cells = [b["metrics"]["output_throughput"] for b in a["by_concurrency"]]
    assert all(neutral_reason(c) == "within ±2%" for c in cells)
    # A noisy bench: the interval crosses the tolerance, and the line says what would settle it.
    noisy = analyze(fake_ab(3, +0.05, runs=5, noise=0.05, concurrencies=(64,)))
    assert noisy["verdict"] == "inconclusive", format_headline(noisy)
    assert re.search(r"crosses ±2%: need ~\d+ more runs a side; 5 runs a side\)",
                     format_headline(noisy)), format_headline(noisy)


def test_many_load_points_are_summed_up_as_a_range():
    a = analyze(fake_ab(4, +0.10, runs=3, concurrencies=(1, 2, 4, 8, 16, 32)))
    line = format_headline(a)
    assert re.search(r", [+-]\d+\.\d\.\.[+-]\d+\.\d% over c1\.\.32 \(6 points\); outputs", line)


def test_the_headline_and_the_table_show_one_ci():
    a = analyze(fake_ab(5, +0.128, concurrencies=(64,)))
    summary = build_summary(a, entry="e0001", run_id="20261204T000000Z-abcd", source="ab",
                            engine_commit=None, context=None, started="s", finished="f")
    cell = summary["by_concurrency"][0]["metrics"]["output_throughput"]
    ci = f"CI {cell['ci_low_pct']:+.1f}..{cell['ci_high_pct']:+.1f}%"
    assert ci in summary["headline"]
    assert "tolerance" in VERDICT_RULE and "pairs" in VERDICT_RULE


def test_headline_shows_the_regressing_concurrency():
    rows = fake_ab(3, +0.01, concurrencies=(16,)) + fake_ab(4, -0.20, concurrencies=(64,))
    assert format_headline(analyze(rows)).startswith("regression -")
    assert "@c64" in format_headline(analyze(rows))


def test_missing_or_undirected_primary_metric_is_refused():
    with pytest.raises(EvidenceError, match="no 'p50_weird_ms' column"):
        analyze(fake_ab(1, 0.0), metric="p50_weird_ms")
    with pytest.raises(EvidenceError, match="cannot judge 'duration'"):
        analyze(fake_ab(1, 0.0), metric="duration")


def test_bad_side_is_refused():
    with pytest.raises(EvidenceError, match="unknown side"):
        analyze([{"side": "C", "concurrency": 1, "repeat": 0, "output_throughput": 1.0}])


def test_holm_matches_hand_computation():
    # p sorted: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04): monotone step-down.
    assert _holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert _holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_entry_verdict_rules():
    assert entry_verdict([]) == "inconclusive"
    # Neutral only when every load point is shown neutral.
    assert entry_verdict(["inconclusive", "neutral"]) == "inconclusive"
    assert entry_verdict(["neutral", "neutral"]) == "neutral"
    assert entry_verdict(["gain", "neutral"]) == "gain"
    assert entry_verdict(["gain", "regression"]) == "regression"


def test_power_warnings_say_when_runs_are_few():
    from ledger.evidence.stats import power_warnings

    (w,) = power_warnings([(3, 3)])
    assert w.startswith("3 runs a side") and "5 or more" in w
    assert power_warnings([(5, 5)]) == [] and power_warnings([(4, 4)]) == []
    assert "inconclusive" in power_warnings([(2, 2)])[0]
