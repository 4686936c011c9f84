"""The paired interval one slow run cannot stretch (Hodges-Lehmann with the Wilcoxon
signed-rank interval), and the sequential A/B's looks (issue 52)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from ledger.errors import EvidenceError
from ledger.evidence.headline import format_headline
from ledger.evidence.rank_interval import EXACT_MAX_N
from ledger.evidence.rank_interval import critical_k
from ledger.evidence.rank_interval import min_pairs
from ledger.evidence.rank_interval import signed_rank_interval
from ledger.evidence.rank_interval import walsh_averages
from ledger.evidence.sequential import Sequential
from ledger.evidence.sequential import look_confidences
from ledger.evidence.sequential import replay
from ledger.evidence.stats import analyze
from ledger.evidence.verdict import effect_interval
from ledger.evidence.verdict import judge_cell

REAL = Path(__file__).parent / "fixtures/real/sglang-bench_one_batch_server-result.jsonl"


def real_throughputs() -> list[float]:
    """15 measured runs of one SGLang bench_one_batch_server workload (a 9% spread)."""
    return [json.loads(line)["overall_throughput"] for line in REAL.read_text().splitlines()
            if line.strip()]


def pairs_table(a, b, conc=1):
    rows = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        rows += [{"side": "A", "concurrency": conc, "repeat": i, "output_throughput": x},
                 {"side": "B", "concurrency": conc, "repeat": i, "output_throughput": y}]
    return rows


# --- the interval itself, on constructed data -------------------------------------------

def test_critical_orders_match_the_published_signed_rank_table():
    # Two-sided 5% critical values T (k = T + 1) of the Wilcoxon signed-rank table.
    table = {6: 0, 7: 2, 8: 3, 9: 5, 10: 8, 12: 13, 15: 25, 20: 52, 25: 89, 30: 137}
    assert {n: critical_k(n, 0.05) for n in table} == {n: t + 1 for n, t in table.items()}
    assert critical_k(5, 0.05) is None and min_pairs(0.95) == 6  # 2/32 > 5%: no interval
    assert critical_k(8, 0.001) is None and min_pairs(0.999) == 11


def test_the_normal_approximation_takes_over_where_the_table_ends():
    n = EXACT_MAX_N
    exact = critical_k(n, 0.05)
    m, sigma = n * (n + 1) / 2, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    assert abs(exact - math.floor(m / 2 + 0.5 - 1.959964 * sigma)) <= 1
    assert critical_k(n + 1, 0.05) == math.floor((n + 1) * (n + 2) / 4 + 0.5 - 1.959964 *
                                                 math.sqrt((n + 1) * (n + 2) * (2 * n + 3) / 24))


def test_hodges_lehmann_and_the_interval_on_constructed_differences():
    d = [-0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    w = walsh_averages(d)
    assert len(w) == 36 and list(w) == sorted(w)
    r = signed_rank_interval(d, 0.95)
    assert r["est"] == pytest.approx(0.015) and r["k"] == 4  # symmetric about 0.015
    assert r["lo"] == pytest.approx(w[3]) and r["hi"] == pytest.approx(w[32])
    assert r["lo"] == pytest.approx(0.03 - r["hi"])
    assert signed_rank_interval(d[:5], 0.95) is None


def test_the_interval_covers_at_least_its_confidence():
    """Seeded: 3000 sets of 8 normal log-ratios; the exact level for 8 pairs is 1 - 2 x
    5/256 = 96.1%, and the interval must cover the true shift at least that often (within
    the simulation's own error)."""
    rng = np.random.default_rng(52)
    hits = 0
    for _ in range(3000):
        r = signed_rank_interval(0.01 + rng.normal(0, 0.03, 8), 0.95)
        hits += r["lo"] <= 0.01 <= r["hi"]
    assert hits / 3000 >= 0.95


def test_one_outlier_pair_does_not_stretch_the_interval_from_twelve_pairs():
    rng = np.random.default_rng(7)
    d = list(rng.normal(0.0, 0.01, 11))
    near, far = (signed_rank_interval(d + [x], 0.95) for x in (0.20, 2.0))
    assert (near["lo"], near["hi"], near["est"]) == (far["lo"], far["hi"], far["est"])
    t_near, t_far = (effect_interval([1.0] * 12, list(np.exp(d + [x])), paired=True,
                                     confidence=0.95) for x in (0.20, 2.0))
    assert t_near["method"] == "signed-rank"  # 12 pairs: the rank interval decides
    # The t interval of the same pairs grows with the outlier, the rank interval did not.
    from scipy import stats

    dd = np.array(d + [2.0])
    t_half = stats.t.ppf(0.975, 11) * dd.std(ddof=1) / math.sqrt(12)
    assert far["hi"] - far["lo"] < 0.05 < 2 * t_half


def test_fewer_than_six_pairs_use_the_t_interval_and_say_so():
    cell = judge_cell([1000.0] * 5, [1100.0, 1102.0, 1098.0, 1101.0, 1099.0], True,
                      paired=True)
    assert cell["interval"] == "t" and cell["verdict"] == "gain"
    cell = judge_cell([1000.0] * 6, [1100.0, 1102.0, 1098.0, 1101.0, 1099.0, 1100.0], True,
                      paired=True)
    assert cell["interval"] == "signed-rank" and cell["verdict"] == "gain"
    assert judge_cell([1.0] * 6, [1.1] * 6, True, paired=False)["interval"] == "welch"


# --- real runs with a simulated slow neighbour ------------------------------------------

def test_an_a_a_with_one_slowed_run_is_neutral_where_the_t_interval_was_not():
    """Real runs (15 measured SGLang throughputs, each the level of one pair: the machine's
    state when the pair ran), B the same as A but for 0.4% noise of its own; one B run is
    slowed 18% whole (a busy neighbour, as measured on the shared VM).  Paired t: the one
    run stretches the interval past ±2%, inconclusive.  Signed-rank: neutral."""
    rng = random.Random(52)
    base = real_throughputs()
    a = list(base)
    b = [x * (1 + 0.004 * rng.gauss(0, 1)) for x in base]
    b[6] *= 0.82
    rows = pairs_table(a, b)
    ranked = analyze(rows, paired=True)
    cell = ranked["by_concurrency"][0]["metrics"]["output_throughput"]
    assert ranked["verdict"] == "neutral" and cell["interval"] == "signed-rank", \
        format_headline(ranked)
    assert -2 < cell["ci_low_pct"] and cell["ci_high_pct"] < 2
    d = np.log(np.array(b) / np.array(a))
    t = effect_interval(a, b, paired=False)  # sanity: unpaired is hopeless here
    assert t["hi"] - t["lo"] > 0.05
    from scipy import stats

    half = stats.t.ppf(0.975, 14) * d.std(ddof=1) / math.sqrt(15)
    assert d.mean() - half < math.log1p(-0.02)  # the paired t interval crosses -2%


def test_a_ten_percent_gain_on_drifting_real_runs_survives_a_slow_run():
    """Real runs under a simulated drifting machine (a slow spell halving pairs 2-4, a 3%
    per pair trend) with B 10% faster and one A run slowed 20% more: a gain, its estimate
    near +10% (the mean of the log-ratios would read +11.5%)."""
    rng = random.Random(10)
    base = real_throughputs()[:12]
    a, b = [], []
    for i, real in enumerate(base):
        drift = (0.5 if 2 <= i <= 4 else 1.0) * (1 - 0.03 * i)
        a.append(real * drift * (1 + 0.01 * rng.gauss(0, 1)))
        b.append(real * drift * 1.10 * (1 + 0.01 * rng.gauss(0, 1)))
    a[9] *= 0.8
    analysis = analyze(pairs_table(a, b), paired=True)
    cell = analysis["by_concurrency"][0]["metrics"]["output_throughput"]
    assert analysis["verdict"] == "gain" and cell["interval"] == "signed-rank"
    assert 8 < cell["delta_pct"] < 12 and cell["ci_low_pct"] > 2


def test_the_same_runs_give_the_same_rank_verdict_in_any_order():
    base = real_throughputs()
    rows = pairs_table(base, [x * 1.01 for x in reversed(base)])
    first = analyze(rows, paired=True)
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    assert analyze(shuffled, paired=True) == first


# --- the sequential A/B's looks ---------------------------------------------------------

def test_looks_spend_five_percent_half_of_it_on_the_last():
    conf = look_confidences(8, 16)
    assert sorted(conf) == list(range(8, 17))
    assert sum(1 - c for c in conf.values()) == pytest.approx(0.05)
    assert conf[16] == pytest.approx(0.975) and conf[8] == pytest.approx(1 - 0.025 / 8)
    assert look_confidences(5, 5) == {5: pytest.approx(0.95)}
    with pytest.raises(EvidenceError, match="maximum must be at least the minimum"):
        look_confidences(8, 6)


def judge_rows(rows, confidence):
    return analyze(rows, paired=True, confidence=confidence)


def rows_of(shift, noise, pairs, seed, outlier_at=None):
    rng = random.Random(seed)
    a, b = [], []
    for i in range(pairs):
        level = 1000 * (1 + 0.05 * rng.gauss(0, 1))  # the machine's state for the pair
        a.append(level * (1 + noise * rng.gauss(0, 1)))
        b.append(level * (1 + shift) * (1 + noise * rng.gauss(0, 1)))
    if outlier_at is not None:
        b[outlier_at] *= 0.82
    return pairs_table(a, b)


def test_a_clear_gain_stops_at_the_first_look():
    seq = replay(rows_of(0.25, 0.01, 16, 1), 8, 16, judge_rows)
    assert seq.record() == {"pairs": 8, "looks": 1, "planned_looks": 9, "stopped": "decided",
                            "confidence": pytest.approx(1 - 0.025 / 8), "min_pairs": 8,
                            "max_pairs": 16}
    assert seq.analysis["verdict"] == "gain"


def test_an_a_a_with_a_slow_run_goes_on_until_it_is_shown_neutral():
    rows = rows_of(0.0, 0.003, 16, 2, outlier_at=3)
    fixed = analyze([r for r in rows if r["repeat"] < 8], paired=True)
    assert fixed["verdict"] == "inconclusive", format_headline(fixed)
    seq = replay(rows, 8, 16, judge_rows)
    assert seq.analysis["verdict"] == "neutral" and 8 < seq.pairs <= 16
    said = format_headline({**seq.analysis, "sequential": seq.record()})
    assert f"decided after {seq.pairs} pairs" in said and "% CI" in said


def test_at_max_runs_it_stops_inconclusive_with_the_pairs_it_would_need():
    seq = replay(rows_of(0.02, 0.03, 10, 3), 6, 10, judge_rows)
    rec = seq.record()
    assert rec["stopped"] == "max_runs" and rec["pairs"] == 10 and rec["looks"] == 5
    cell = seq.analysis["by_concurrency"][0]["metrics"]["output_throughput"]
    assert seq.analysis["verdict"] == "inconclusive" and cell["confidence"] == 0.975
    said = format_headline({**seq.analysis, "sequential": rec})
    assert "not decided in 10 pairs (--max-runs)" in said and "pairs" in said


def test_the_error_over_looks_stays_under_its_share_where_looking_at_95_percent_does_not():
    """Seeded: 400 A/Bs whose true change is exactly +2%, the tolerance's edge, with a 3%
    spread a run, looked at after every pair from 6 to 14.  A ``gain`` (the interval wholly
    above +2%) is a wrong verdict, which one 95% interval makes at most 2.5% of the time.
    Looked at 9 times at 95% each, the noise gets 9 chances: more than 5% of these A/Bs
    are called a gain.  With the alpha spent over the looks, at most 2.5%."""
    def wrong_gains(confidence_at) -> float:
        wrong = 0
        for seed in range(400):
            d = math.log1p(0.02) + np.random.default_rng(seed).normal(0, 0.03 * math.sqrt(2), 14)
            seq = Sequential(6, 14, lambda pairs, c: {"verdict": judge_cell(
                [1.0] * len(pairs), list(np.exp(pairs)), True, paired=True,
                confidence=confidence_at(c))["verdict"]})
            for n in range(1, 15):
                if seq.look(list(d[:n]), n):
                    break
            wrong += seq.analysis["verdict"] == "gain"
        return wrong / 400

    assert wrong_gains(lambda c: 0.95) > 0.05
    assert wrong_gains(lambda c: c) <= 0.025
