"""The pure parts of observed evidence and guards: PromQL per engine release, the windows
an entry's history gives, load bins, durations, guard settings and their use by every
verdict (per-guard tolerance, critical or not)."""

from __future__ import annotations

import random

import pytest

from ledger.core.action import Action
from ledger.core.guards import Guard
from ledger.core.guards import as_guard
from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.errors import EvidenceError
from ledger.errors import InvalidValue
from ledger.evidence.headline import format_headline
from ledger.evidence.observed import history_windows
from ledger.evidence.observed import load_bin
from ledger.evidence.observed import observed_headline
from ledger.evidence.observed import parse_duration
from ledger.evidence.observed import span_text
from ledger.evidence.prom import bucket_resolution
from ledger.evidence.prom import parse_match
from ledger.evidence.prom import queries
from ledger.evidence.stats import analyze
from ledger.store.config_file import dump_config
from ledger.store.config_file import parse_config_text


def test_promql_follows_the_release_and_the_selector():
    old = queries("vllm", "0.10.2", 'job="decode"', 2)
    assert old["p99_itl_ms"] == ("histogram_quantile(0.99, sum by (le) (rate("
                                 'vllm:time_per_output_token_seconds_bucket{job="decode"}'
                                 "[2s]))) * 1000")
    new = queries("vllm", None, "", 30)
    assert "vllm:inter_token_latency_seconds_bucket[30s]" in new["median_itl_ms"]
    assert new["output_throughput"] == "sum(rate(vllm:generation_tokens_total[30s]))"
    assert new["running"] == "sum(avg_over_time(vllm:num_requests_running[30s]))"
    sglang = queries("sglang", "0.4.5", "", 15)
    assert "sglang:time_per_output_token_seconds_bucket" in sglang["p99_itl_ms"]
    assert "sglang:e2e_request_latency_seconds_bucket" in sglang["median_e2e_latency_ms"]
    assert sglang["queued"] == "sum(avg_over_time(sglang:num_queue_reqs[15s]))"
    assert set(sglang) == {"output_throughput", "running", "queued", "median_ttft_ms",
                           "p99_ttft_ms",
                           "median_itl_ms", "p99_itl_ms", "median_e2e_latency_ms",
                           "p99_e2e_latency_ms"}


def test_a_selector_is_checked_before_it_reaches_promql():
    assert parse_match('{job="decode", instance=~"10\\\\..*"}') == \
        'job="decode", instance=~"10\\\\..*"'
    assert parse_match(None) == "" and parse_match("{}") == ""
    for bad in ('job="decode"', '{job="a"} or vector(1)', '{job=decode}', '{"x"}'):
        with pytest.raises(EvidenceError, match="--match"):
            parse_match(bad)


def _entry(actions, applied=True) -> Entry:
    return Entry(id="e1", seq=1, cls="perf", title="t", slug="t", recorded=actions[0][0],
                 kind="knob", target="decode", knob="K",
                 before="1", after="2", state="applied" if applied else "reverted",
                 history=tuple(Action(at=at, action=a) for at, a in actions))


def test_windows_come_from_the_entrys_latest_change():
    from ledger.core.when import parse_time

    e = _entry([("2026-12-01T10:00:00Z", "record"), ("2026-12-01T11:00:00Z", "restart")])
    t = parse_time("2026-12-01T10:00:00Z").timestamp()
    (before, after), notes = history_windows(e, [e], 1200, 300, t + 3600)
    assert (before.side, before.start, before.end) == ("A", t - 1200, t)
    assert (after.side, after.start, after.end) == ("B", t + 300, t + 1500)
    assert notes == []
    # After a revert the later window is side A (the entry reverted).
    r = _entry([("2026-12-01T10:00:00Z", "record"), ("2026-12-01T12:00:00Z", "revert")],
               applied=False)
    (before, after), _ = history_windows(r, [], 60, 0, t + 9000)
    assert (before.side, after.side) == ("B", "A") and before.end == t + 7200
    # An after window not over yet is refused with when it ends; another entry changed
    # inside the windows is said.
    with pytest.raises(EvidenceError, match=r"ends at 2026-12-01T10:25:00Z \(in 60 s\)"):
        history_windows(e, [], 1200, 300, t + 1440)
    other = Entry(id="e2", seq=2, cls="perf", title="o", slug="o",
                  recorded="2026-12-01T10:10:00Z", kind="knob", target="decode", knob="J",
                  before="1", after="2", state="applied",
                  history=(Action(at="2026-12-01T10:10:00Z", action="record"),))
    _, notes = history_windows(e, [e, other], 1200, 300, t + 3600)
    assert notes and "entry e2 also changed (record at 2026-12-01T10:10:00Z)" in notes[0]


def test_the_before_window_starts_after_an_earlier_changes_warmup():
    """A restart's ramp on the before side only would read as the change's effect."""
    from ledger.core.when import parse_time

    t = parse_time("2026-12-01T10:00:00Z").timestamp()
    # This entry's own earlier revert and restore: the before window waits out the
    # revert's warmup and says how long it is.
    e = _entry([("2026-12-01T09:00:00Z", "record"), ("2026-12-01T09:41:40Z", "revert"),
                ("2026-12-01T10:00:00Z", "restore")])
    (before, after), notes = history_windows(e, [e], 1200, 300, t + 3600)
    assert (before.start, before.end) == (t - 1100 + 300, t) and after.start == t + 300
    assert notes == ["the before window is 800 s, not 20 min: it starts after the warmup "
                     "of entry e1's revert at 2026-12-01T09:41:40Z"]
    # Another entry's change long enough before leaves the window whole, and is no warning.
    other = Entry(id="e2", seq=2, cls="perf", title="o", slug="o",
                  recorded="2026-12-01T09:30:00Z", kind="knob", target="decode", knob="J",
                  before="1", after="2", state="applied",
                  history=(Action(at="2026-12-01T09:30:00Z", action="record"),))
    late = _entry([("2026-12-01T10:00:00Z", "record")])
    (before, _), notes = history_windows(late, [late, other], 1200, 300, t + 3600)
    assert before.start == t - 1200 and notes == []
    # No settled time left before the change: refused, naming the change it waits for.
    with pytest.raises(EvidenceError, match=r"inside the warmup of entry e2's record at "
                       r"2026-12-01T09:30:00Z \(30 min\).*shorter --warmup"):
        history_windows(late, [other], 1200, 1800, t + 9000)


def test_load_bins_durations_and_bucket_resolution():
    assert [load_bin(x) for x in (0.6, 1.4, 2.9, 3.1, 4, 5.6, 6, 60)] == \
        [1, 1, 4, 4, 4, 4, 8, 64]
    assert parse_duration("20m", "--window") == 1200 and parse_duration("1.5s", "x") == 1.5
    assert parse_duration("90", "x") == 90 and parse_duration("1h", "x") == 3600
    assert parse_duration("0m", "--warmup", allow_zero=True) == 0
    for bad in ("0s", "-1m", "fast", ""):
        with pytest.raises(EvidenceError, match="--window"):
            parse_duration(bad, "--window")
    assert [span_text(s) for s in (1200, 20, 5400, 90, 45)] == \
        ["20 min", "20 s", "1.5 h", "1.5 min", "45 s"]
    bounds = [0.1, 0.2, 0.4, 0.6]
    assert bucket_resolution(bounds, 300.0) == "0.2..0.4 s"
    assert bucket_resolution(bounds, 50.0) == "0..0.1 s"
    assert bucket_resolution(bounds, 900.0) == "above 0.6 s"
    assert observed_headline("regression -40.0% output_throughput @c4 (…)", 1200) == \
        "observed in production, 20 min each side (not a controlled A/B): regression " \
        "-40.0% output_throughput @load 4 (…)"


def test_guards_in_ledger_yaml_name_direction_change_and_criticality():
    text = ("version: 1\nbench:\n  guards:\n    - p99_itl_ms\n    - metric: p99_ttft_ms\n"
            "      max_change_pct: 10\n      direction: lower\n    - metric: output_throughput\n"
            "      critical: false\n")
    config = parse_config_text(text, "ledger.yaml")
    assert config.bench_guards == ("p99_itl_ms", Guard("p99_ttft_ms", 10, True, "lower"),
                                   Guard("output_throughput", None, False))
    again = parse_config_text(dump_config(config), "ledger.yaml")
    assert again.bench_guards == config.bench_guards
    for bad, said in (("    - metric: p99_ttft_ms\n      direction: higher\n", "contradicts"),
                      ("    - metric: p99_ttft_ms\n      max_change_pct: 300\n", "max_change"),
                      ("    - metric: completed\n", "a guard metric is a rate"),
                      ("    - {metric: p99_ttft_ms, tolerance: 5}\n", "keys are")):
        with pytest.raises(ConfigError, match=said) as err:
            parse_config_text("version: 1\nbench:\n  guards:\n" + bad, "ledger.yaml")
        assert "ledger.yaml:3" in str(err.value)
    with pytest.raises(InvalidValue):
        as_guard(3)


def _runs(tput_b: float, ttft_b: float, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for r in range(6):
        for side, tput, ttft in (("A", 1000.0, 100.0), ("B", tput_b, ttft_b)):
            rows.append({"side": side, "concurrency": 8, "repeat": r,
                         "output_throughput": tput * (1 + 0.003 * rng.gauss(0, 1)),
                         "p99_ttft_ms": ttft * (1 + 0.003 * rng.gauss(0, 1))})
    return rows


def test_a_guard_judges_with_its_own_allowed_change_and_only_a_critical_one_decides():
    rows = _runs(1100.0, 135.0)  # +10% throughput, TTFT p99 +35%
    assert analyze(rows)["verdict"] == "gain"
    vetoed = analyze(rows, guards=[Guard("p99_ttft_ms", max_change_pct=10)])
    assert vetoed["verdict"] == "regression" and vetoed["veto"]["metric"] == "p99_ttft_ms"
    assert format_headline(vetoed).startswith("regression: guard p99_ttft_ms +35.")
    # +35% is within an allowed change of 50%: the guard's own tolerance, not the run's.
    loose = analyze(rows, guards=[Guard("p99_ttft_ms", max_change_pct=50)])
    assert loose["verdict"] == "gain"
    assert loose["by_concurrency"][0]["metrics"]["p99_ttft_ms"]["tolerance_pct"] == 50
    # Not critical: said in the warnings, the gain stands.
    soft = analyze(rows, guards=[Guard("p99_ttft_ms", critical=False)])
    assert soft["verdict"] == "gain" and soft["veto"] is None
    assert any("non-critical guard p99_ttft_ms regressed +35." in w for w in soft["warnings"])
    # Neutral says which metric decided and why.
    calm = analyze(_runs(1001.0, 100.0), guards=["p99_ttft_ms"])
    assert calm["verdict"] == "neutral"
    assert "neutral" in format_headline(calm) and "output_throughput @c8" in \
        format_headline(calm) and "within ±2%" in format_headline(calm)


def test_only_load_bins_both_sides_saw_are_compared():
    from ledger.evidence.observed import Observation
    from ledger.evidence.observed import _keep_shared_bins

    def rows(side, load, n):
        return [{"side": side, "concurrency": load, "repeat": i} for i in range(n)]

    # load 2 has 3 steps on A and 4 on B: a bench's 3 runs, but too few scrape steps (5)
    obs = Observation(rows=rows("A", 4, 9) + rows("B", 4, 8) + rows("A", 2, 3) +
                      rows("B", 2, 4) + rows("B", 1, 5))
    _keep_shared_bins(obs)
    assert {r["concurrency"] for r in obs.rows} == {4} and obs.sparse_steps == 12
    apart = Observation(rows=rows("A", 4, 9) + rows("B", 1, 9))
    with pytest.raises(EvidenceError, match="no load bin has 5 steps on both sides "
                       r"\(steps per bin, A: 9 at load 4; B: 9 at load 1\)"):
        _keep_shared_bins(apart)
