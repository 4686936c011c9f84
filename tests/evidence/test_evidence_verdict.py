"""The interval verdict (issue 52): the size of the effect with its uncertainty against a
practical tolerance, pairs for interleaved runs, guards that veto."""

from __future__ import annotations

import random

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.headline import format_headline
from ledger.evidence.stats import analyze
from ledger.evidence.summary import build_summary
from ledger.evidence.verdict import judge_cell


def table(a, b, conc=64, **extra):
    """Rows of one load point: A's runs then B's, repeat numbers in order."""
    rows = [{"side": "A", "concurrency": conc, "repeat": i, "output_throughput": v, **extra}
            for i, v in enumerate(a)]
    rows += [{"side": "B", "concurrency": conc, "repeat": i, "output_throughput": v, **extra}
             for i, v in enumerate(b)]
    return rows


# The case: three runs a side of a real-shaped bench, +12.1% at c64 with a tight
# interval.  Under the rank test alone it was "neutral … n=3/3 cannot reach p<0.05".
A64, B64 = [1000.0, 1005.0, 995.0], [1114.0, 1128.0, 1121.0]


def test_three_runs_a_side_with_a_tight_twelve_percent_is_a_gain_saying_three_runs():
    a = analyze(table(A64, B64) + table([800.0, 803.0, 798.0], [845.0, 849.0, 842.0], conc=96))
    cell = a["by_concurrency"][0]["metrics"]["output_throughput"]
    assert a["verdict"] == "gain" and cell["verdict"] == "gain"
    assert 10.0 < cell["ci_low_pct"] < 12.1 < cell["ci_high_pct"] < 14.5
    line = format_headline(a)
    assert line.startswith("gain +12.1% output_throughput @c64 (CI +"), line
    assert "clear of ±2%; 3 runs a side)" in line and ", +5.6% @c96" in line
    assert a["warnings"] and a["warnings"][0].startswith("3 runs a side")


def test_a_a_with_a_steady_bench_is_neutral_within_the_tolerance():
    a = analyze(table([1000.0, 1004.0, 998.0, 1001.0, 997.0], [999.0, 1003.0, 1000.0, 996.0,
                                                              1002.0]))
    assert a["verdict"] == "neutral"
    assert "within ±2%; 5 runs a side" in format_headline(a)


def test_a_wide_interval_is_inconclusive_with_the_runs_that_would_settle_it():
    a = analyze(table([1000.0, 1150.0, 870.0, 1080.0], [1060.0, 1210.0, 950.0, 1160.0]))
    cell = a["by_concurrency"][0]["metrics"]["output_throughput"]
    assert a["verdict"] == "inconclusive" and cell["ci_low_pct"] < 2 < cell["ci_high_pct"]
    assert isinstance(cell["runs_needed"], int) and cell["runs_needed"] > 4
    more = cell["runs_needed"] - 4
    assert f"crosses ±2%: need ~{more} more runs a side; 4 runs a side" in format_headline(a)


def test_too_few_runs_are_said_and_never_neutral():
    a = analyze(table([1000.0, 1001.0], [1000.5, 1000.0]))
    assert a["verdict"] == "inconclusive"
    line = format_headline(a)
    assert "fewer than 3 runs a side; 2 runs a side" in line and "neutral" not in line


def test_the_tolerance_is_the_operators():
    steady_four = table([1000.0, 1002.0, 998.0, 1001.0, 999.0],
                        [1040.0, 1042.0, 1038.0, 1041.0, 1039.0])
    assert analyze(steady_four)["verdict"] == "gain"
    wide = analyze(steady_four, tolerance_pct=5)
    assert wide["verdict"] == "neutral" and "within ±5%" in format_headline(wide)
    with pytest.raises(EvidenceError, match="tolerance_pct"):
        analyze(steady_four, tolerance_pct=0)


def test_a_guard_metric_that_regresses_vetoes_the_gain():
    rng = random.Random(7)
    rows = []
    for r in range(5):
        for side, tput, itl in (("A", 1000.0, 20.0), ("B", 1100.0, 26.0)):
            rows.append({"side": side, "concurrency": 64, "repeat": r,
                         "output_throughput": tput * (1 + 0.004 * rng.gauss(0, 1)),
                         "p99_itl_ms": itl * (1 + 0.004 * rng.gauss(0, 1))})
    assert analyze(rows)["verdict"] == "gain"  # no guard: throughput alone
    vetoed = analyze(rows, guards=["p99_itl_ms"])
    assert vetoed["verdict"] == "regression"
    assert vetoed["veto"]["metric"] == "p99_itl_ms" and vetoed["veto"]["concurrency"] == 64
    line = format_headline(vetoed)
    assert line.startswith("regression: guard p99_itl_ms +30.") and "vetoes gain +10." in line
    summary = build_summary(vetoed, entry="e1", run_id="r", source="ab", engine_commit=None,
                            context=None, started="s", finished="f")
    assert summary["verdict"] == "regression" and summary["guards"] == ["p99_itl_ms"]
    assert summary["veto"]["metric"] == "p99_itl_ms" and summary["headline"] == line
    # A guard that did not regress changes nothing; a guard that is no metric is refused.
    calm = [{**r, "p99_itl_ms": 20.0 + (r["repeat"] % 3) * 0.01} for r in rows]
    assert analyze(calm, guards=["p99_itl_ms"])["verdict"] == "gain"
    with pytest.raises(EvidenceError, match="cannot guard with 'completed'"):
        analyze(rows, guards=["completed"])


def test_the_same_runs_give_the_same_verdict_in_any_order():
    rows = table([1000.0, 1150.0, 870.0, 1080.0, 990.0], [1060.0, 1210.0, 950.0, 1160.0, 1100.0])
    first = build_summary(analyze(rows), entry="e", run_id="r", source="import",
                          engine_commit=None, context=None, started="s", finished="f")
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    again = build_summary(analyze(shuffled), entry="e", run_id="r", source="import",
                          engine_commit=None, context=None, started="s", finished="f")
    assert first == again


def test_judge_cell_reads_a_latency_in_its_good_direction():
    faster = judge_cell([20.0, 20.1, 19.9], [17.0, 17.1, 16.9], higher_is_better=False,
                        paired=False)
    assert faster["verdict"] == "gain" and faster["ci_high_pct"] < -2
    slower = judge_cell([20.0, 20.1, 19.9], [23.0, 23.1, 22.9], higher_is_better=False,
                        paired=True)
    assert slower["verdict"] == "regression" and slower["design"] == "paired"


def test_imported_runs_pair_when_their_times_alternate():
    rows = table(A64, B64)
    for k, r in enumerate(rows):  # A0 at t=0, B0 at t=10, A1 at t=20, …
        r["run_time"] = (r["repeat"] * 2 + (r["side"] == "B")) * 10.0
    cell = analyze(rows)["by_concurrency"][0]["metrics"]["output_throughput"]
    assert cell["design"] == "paired"
    # Pairs whose order turns (A B, B A, … as `ledger ab` runs them) are pairs as well.
    for r in rows:
        r["run_time"] = r["repeat"] * 20.0 + (10.0 if (r["side"] == "B") == (r["repeat"] % 2 == 0)
                                             else 0.0)
    assert analyze(rows)["by_concurrency"][0]["metrics"]["output_throughput"]["design"] \
        == "paired"
    # Not alternating (all A first, then all B): no pairs.
    for r in rows:
        r["run_time"] = r["repeat"] + (100.0 if r["side"] == "B" else 0.0)
    assert analyze(rows)["by_concurrency"][0]["metrics"]["output_throughput"]["design"] \
        == "unpaired"


def test_a_vllm_date_gives_an_imported_run_its_time():
    from ledger.evidence.import_run import _run_time

    assert _run_time({"date": "20250704-123456"}) == pytest.approx(1751632496.0)
    assert _run_time({"date": "2025-07-04T12:34:56Z"}) == pytest.approx(1751632496.0)
    assert _run_time({"date": "yesterday"}) is None and _run_time({}) is None


def test_pairs_cancel_a_drifting_machine_that_hides_ten_percent_from_unpaired_runs():
    """Real measured numbers (15 runs of one SGLang ``bench_one_batch_server`` workload on a
    GPU, their ``overall_throughput``: a 9% spread with two slow spells) are the runs'
    base; a machine drifting under them is simulated: a slow spell that halves pairs 2-4
    and a 3%-per-pair trend, the same for the A and B run of a pair (they run back to
    back), plus 1% noise of its own on each run.  B is 10% faster.  Judged as the
    unpaired samples they were before, the drift is noise and the 10% is lost; judged as
    pairs, the drift cancels and the gain is shown."""
    import json
    from pathlib import Path

    path = Path(__file__).parent / "fixtures/real/sglang-bench_one_batch_server-result.jsonl"
    base = [json.loads(line)["overall_throughput"] for line in path.read_text().splitlines()
            if line.strip()]
    rng = random.Random(52)
    rows = []
    for i, real in enumerate(base[:12]):
        drift = (0.5 if 2 <= i <= 4 else 1.0) * (1 - 0.03 * i)
        for side, effect in (("A", 1.0), ("B", 1.10)):
            rows.append({"side": side, "concurrency": 8192, "repeat": i,
                         "output_throughput": real * effect * drift
                         * (1 + 0.01 * rng.gauss(0, 1))})
    unpaired = analyze(rows)
    paired = analyze(rows, paired=True)
    u = unpaired["by_concurrency"][0]["metrics"]["output_throughput"]
    p = paired["by_concurrency"][0]["metrics"]["output_throughput"]
    assert unpaired["verdict"] == "inconclusive" and u["ci_low_pct"] < 2, format_headline(unpaired)
    assert paired["verdict"] == "gain" and p["design"] == "paired", format_headline(paired)
    assert 7 < p["delta_pct"] < 13 and p["ci_low_pct"] > 2
    assert "12 pairs" in format_headline(paired)


def test_vllm_results_imported_in_alternating_order_are_judged_as_pairs(tmp_path):
    """A real vLLM 0.9.2 ``--save-result`` file, copied per run with its ``date`` moved on
    and its throughput set: A and B imported side by side, their dates alternating A B A
    B …, are paired; the stored runs keep every number the files said."""
    import json
    from pathlib import Path

    from ledger.evidence.import_run import import_evidence
    from ledger.evidence.store import load_run

    real = json.loads((Path(__file__).parent / "fixtures/real/vllm-0.9.2-c4.json").read_text())
    files = {"A": [], "B": []}
    drift = [1.0, 0.6, 0.9, 0.55]  # a machine with slow spells, the same for both of a pair
    for i, slow in enumerate(drift):
        for side, k in (("A", 0), ("B", 1)):
            obj = dict(real, date=f"20261206-05{i:02d}{k * 30:02d}",
                       output_throughput=real["output_throughput"] * slow * (1.10 if k else 1.0)
                       * (1 + 0.003 * ((i + k) % 3 - 1)))
            path = tmp_path / f"{side}{i}.json"
            path.write_text(json.dumps(obj))
            files[side].append((path, obj["output_throughput"]))
    import_evidence(tmp_path / "ws", "e1", [p for p, _ in files["A"]], "A")
    summary = import_evidence(tmp_path / "ws", "e1", [p for p, _ in files["B"]], "B")
    cell = summary["by_concurrency"][0]["metrics"]["output_throughput"]
    assert cell["design"] == "paired" and summary["verdict"] == "gain", summary["headline"]
    assert "4 pairs" in summary["headline"]
    rows, _, _ = load_run(tmp_path / "ws", "e1", summary["run_id"])
    stored = sorted(r["output_throughput"] for r in rows)
    assert stored == sorted(v for side in files.values() for _, v in side)  # never altered


def test_a_spread_no_affordable_run_count_settles_is_said_so():
    from ledger.evidence.verdict import cell_reason

    # Pairs +10%, -5%, +2%, -1%, +4%: a change of +1.9%, right on the ±2% edge.
    cell = judge_cell([1000.0] * 5, [1100.0, 950.0, 1020.0, 990.0, 1040.0], True, paired=True)
    cell.update(n_a=5, n_b=5)
    assert cell["verdict"] == "inconclusive" and cell["runs_needed"] is None, cell
    assert cell_reason(cell) == "crosses ±2%: more than 1000 pairs would not settle it at " \
        "this spread"
