"""run_alternating for real: a fake bench script in tmp_path, run as a subprocess (no shell)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dotenv import dotenv_values
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.errors import EvidenceError
from ledger.evidence.runner import DEFAULT_BENCH_COMMAND
from ledger.evidence.runner import Side
from ledger.evidence.runner import check_template
from ledger.evidence.runner import env_file_text
from ledger.evidence.runner import render_command
from ledger.evidence.runner import run_alternating
from ledger.evidence.store import latest_summary
from ledger.evidence.store import record_ab

HERE = Path(__file__).parent


@pytest.fixture
def bench(tmp_path) -> Path:
    script = tmp_path / "fake_bench.py"
    shutil.copy(HERE / "fake_bench.py", script)
    return script


def template(script: Path, log: str = "{engine_dir}/log.jsonl") -> str:
    return (
        f"{{python}} {shlex.quote(str(script))} --out {{out}} --concurrency {{concurrency}} "
        f"--log {log} --env-file {{env_file}}"
    )


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_ab_alternates_and_stores_a_gain(tmp_path, bench, monkeypatch):
    monkeypatch.setenv("FAKE_SHIFT", "0.5")  # exported by the operator's shell; side A unsets it
    # 1% noise a run: a +10% shift over 5 pairs (4 degrees of freedom) clears ±2% on any
    # draw; at 3% it read +9.9% (CI +1.1..+19.5%) on one, an honest inconclusive.
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    dir_a, dir_b = tmp_path / "tree A", tmp_path / "tree B"
    dir_a.mkdir()
    dir_b.mkdir()
    calls = []
    result = run_alternating(
        template(bench),
        Side("A", {"FAKE_SHIFT": None, "FAKE_SEED": "7"}, dir_a),
        Side("B", {"FAKE_SHIFT": "0.10", "FAKE_SEED": "7"}, dir_b),
        [4],
        5,
        progress=lambda done, total, eta, label: calls.append((done, total, eta, label)),
    )
    # Runs happened where they should, warm-ups first, then pairs A B, B A, … (the order
    # turns, so what favours a pair's second run lands on each side alike; a log per dir).
    log_a, log_b = read_log(dir_a / "log.jsonl"), read_log(dir_b / "log.jsonl")
    assert len(log_a) == len(log_b) == 6 and all(e["shift"] == 0.0 for e in log_a)
    assert all(e["shift"] == 0.10 and e["cwd"] == str(dir_b) for e in log_b)
    assert [c[3] for c in calls[:4]] == [
        "warm-up A @c4",
        "warm-up B @c4",
        "run 1/5 A @c4",
        "run 1/5 B @c4",
    ]
    assert [c[3] for c in calls[4:8]] == ["run 2/5 B @c4", "run 2/5 A @c4", "run 3/5 A @c4",
                                          "run 3/5 B @c4"]
    assert [c[0] for c in calls] == list(range(1, 13)) and {c[1] for c in calls} == {12}
    assert calls[-1][2] == 0.0 and all(c[2] >= 0 for c in calls)
    # Warm-ups are not stored.
    assert len(result.rows) == 10
    assert [r["side"] for r in result.rows] == ["A", "B", "B", "A"] * 2 + ["A", "B"]
    assert [r["repeat"] for r in result.rows] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert result.meta["env"] == {"FAKE_SHIFT": {"A": None, "B": "0.10"}}
    assert result.meta["device"] == "cpu" and result.meta["runs"] == 5
    summary = record_ab(
        tmp_path / "ws", "e0001", result, engine_commit="abc1234", context={"X": "1"}
    )
    assert summary["verdict"] == "gain" and summary["outputs"] == "identical", summary["headline"]
    assert latest_summary(tmp_path / "ws", "e0001") == summary
    assert summary["headline"].startswith("gain +1")


def test_env_file_is_written_per_side(tmp_path, bench):
    script = tmp_path / "show_env.py"
    script.write_text(
        textwrap.dedent("""
        import json, sys
        out, env_file = sys.argv[1], sys.argv[2]
        open(out + ".env", "w").write(open(env_file).read())
        open(out, "w").write(json.dumps({"max_concurrency": 1, "output_throughput": 1.0,
                                         "output_digest": "x"}))
        print(open(env_file).read(), file=open(sys.argv[3], "a"))
    """)
    )
    log = tmp_path / "envs.txt"
    run_alternating(
        f"{{python}} {shlex.quote(str(script))} {{out}} {{env_file}} {shlex.quote(str(log))}",
        Side("A", {"K": "it's"}, tmp_path),
        Side("B", {"K": "512"}, tmp_path),
        [1],
        1,
        warmup=False,
    )
    assert log.read_text().split() == ['K="it\'s"', "K='512'"]


def test_placeholder_values_stay_one_argument(tmp_path, bench):
    evil = tmp_path / "dir with space; $(touch pwned) `id`"
    evil.mkdir()
    run_alternating(template(bench), Side("A", {}, evil), Side("B", {}, evil), [2], 1, warmup=False)
    assert len(read_log(evil / "log.jsonl")) == 2
    assert not list(tmp_path.rglob("pwned")) and not (Path.cwd() / "pwned").exists()


def test_failed_run_reports_command_and_stderr(tmp_path, bench):
    with pytest.raises(EvidenceError) as ei:
        run_alternating(
            template(bench),
            Side("A", {}, tmp_path),
            Side("B", {"FAKE_FAIL": "1"}, tmp_path),
            [1],
            2,
        )
    msg = str(ei.value)
    assert "exit 3" in msg and "CUDA out of memory (simulated)" in msg and "fake_bench.py" in msg


def test_bench_that_writes_garbage_is_refused(tmp_path):
    script = tmp_path / "garbage.py"
    script.write_text("import sys; open(sys.argv[1], 'w').write('{\"tokens\": 3}')\n")
    with pytest.raises(EvidenceError, match="unknown result shape"):
        run_alternating(f"{{python}} {script} {{out}}", Side("A"), Side("B"), [1], 1)


@pytest.mark.parametrize(
    "tmpl, problem",
    [
        ("", "empty"),
        ("bench --json {out} 'unbalanced", "cannot be split"),
        ("bench --json out.json", "must write its JSON to {out}"),
        ("bench --json {out} --c {conc}", "unknown placeholder"),
    ],
)
def test_bad_templates(tmpl, problem):
    with pytest.raises(EvidenceError, match=problem):
        check_template(tmpl)


def test_render_substitutes_inside_tokens_only():
    tokens = check_template("run --out={out} '{\"json\": {concurrency}}'")
    assert render_command(tokens, {"out": "a b", "concurrency": "8"}) == [
        "run",
        "--out=a b",
        '{"json": 8}',
    ]


def test_bad_inputs_are_refused(tmp_path):
    with pytest.raises(EvidenceError, match="side name"):
        Side("C")
    with pytest.raises(EvidenceError, match="invalid knob name"):
        Side("A", {"BAD-NAME": "1"})
    with pytest.raises(EvidenceError, match="concurrencies"):
        run_alternating("x {out}", Side("A"), Side("B"), [0], 1)
    with pytest.raises(EvidenceError, match="runs per side"):
        run_alternating("x {out}", Side("A"), Side("B"), [1], 0)


env_values = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00\n\r"), max_size=20
)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.from_regex(r"KNOB_[A-Z0-9_]{0,8}", fullmatch=True), env_values, max_size=4)
)
def test_env_file_reads_back_the_same_in_bash_and_dotenv(tmp_path_factory, env):
    try:
        text = env_file_text(env)
    except EvidenceError:
        # The documented refusal: a quote or backslash together with a $ or backtick.
        assert any(("'" in v or "\\" in v) and ("$" in v or "`" in v) for v in env.values())
        return
    path = tmp_path_factory.mktemp("env") / "side.env"
    path.write_text(text, encoding="utf-8")
    assert dict(dotenv_values(path)) == env  # with interpolation on, as dotenv defaults
    names = " ".join(env)
    script = f'set -a; . "$1"; for k in {names}; do printf "%s=%s\\0" "$k" "${{!k}}"; done'
    out = subprocess.run(
        ["bash", "-c", script, "bash", str(path)], capture_output=True, check=True
    ).stdout
    got = dict(item.split("=", 1) for item in out.decode("utf-8").split("\0") if item)
    assert got == env


def test_ctrl_c_kills_the_bench_and_leaves_no_temp_files(tmp_path, bench):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    pidfile = tmp_path / "bench.pid"
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(f"""
        import sys
        from ledger.evidence.runner import Side
        from ledger.evidence.runner import run_alternating
        env = {{"FAKE_SLEEP": "60", "FAKE_PIDFILE": {str(pidfile)!r}}}
        side = Side("A", env, {str(tmp_path)!r})
        try:
            run_alternating({template(bench)!r}, side, Side("B", {{}}, side.engine_dir), [1], 1)
        except KeyboardInterrupt:
            print("interrupted")
            sys.exit(130)
    """)
    )
    proc = subprocess.Popen(
        [sys.executable, str(driver)],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    bench_pid = int(pidfile.read_text())
    assert list(tmpdir.iterdir())  # the run's temp dir exists while the bench runs
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "interrupted" in out
    with pytest.raises(ProcessLookupError):
        os.kill(bench_pid, 0)  # the bench was killed, not orphaned
    assert list(tmpdir.iterdir()) == []


@pytest.mark.slow
def test_default_command_on_the_bundled_engine(tmp_path):
    """One A and one B run of the real engine bench (tiny preset): the real output format."""
    repo = Path(__file__).resolve().parents[2]
    if not (repo / "engine" / "tools" / "bench.py").is_file():
        pytest.skip("the bundled engine is not in this checkout")
    side_a = Side("A", {"ENGINE_SEED": "0"}, repo)
    side_b = Side("B", {"ENGINE_SEED": "0"}, repo)
    result = run_alternating(DEFAULT_BENCH_COMMAND, side_a, side_b, [2], 1, warmup=False, timeout_s=240)
    assert [r["side"] for r in result.rows] == ["A", "B"]
    assert all(r["output_throughput"] > 0 and r["output_digest"] for r in result.rows)
    summary = record_ab(tmp_path, "e0001", result)
    # Same weights, same knobs: the generated tokens must match; one run per side says nothing.
    assert summary["outputs"] == "identical" and summary["verdict"] == "inconclusive"
    assert "median_tpot_ms" in summary["by_concurrency"][0]["metrics"]


def test_run_ab_sweeps_request_rates(tmp_path, bench):
    rate_template = (
        f"{{python}} {shlex.quote(str(bench))} --out {{out}} --rate {{rate}} "
        "--log {engine_dir}/log.jsonl"
    )
    result = run_alternating(
        rate_template,
        Side("A", {"FAKE_SEED": "3"}, tmp_path),
        Side("B", {"FAKE_SHIFT": "0.2", "FAKE_SEED": "3"}, tmp_path),
        [],
        3,
        rates=[2.0, float("inf")],
    )
    assert [e["rate"] for e in read_log(tmp_path / "log.jsonl")][:4] == [2.0, 2.0, 2.0, 2.0]
    assert {r["rate"] for r in result.rows} == {2.0, float("inf")}
    assert all("concurrency" not in r for r in result.rows)
    assert result.meta["rates"] == [2.0, float("inf")]
    summary = record_ab(tmp_path / "ws", "e0001", result, engine_commit="abc1234")
    assert summary["load"] == "rate" and "@rate " in summary["headline"]
    with pytest.raises(EvidenceError, match="needs a bench command that uses {rate}"):
        run_alternating(template(bench), Side("A"), Side("B"), [], 1, rates=[1.0])
    with pytest.raises(EvidenceError, match="not both"):
        run_alternating(rate_template, Side("A"), Side("B"), [4], 1, rates=[1.0])


def test_the_pair_order_turns_so_a_second_run_advantage_is_no_gain(tmp_path):
    """A machine where whatever runs second in a pair is 3% faster (a cache the first run
    warmed): an A/A must not read as a gain.  With A always first (A B A B …) every pair
    said B +3.0% with no spread, a `gain`; with the order turning (A B, B A, …) the
    advantage lands on each side in half the pairs and the change reads ~0."""
    script = tmp_path / "second_is_faster.py"
    script.write_text(textwrap.dedent("""
        import json, pathlib, sys
        out, count = sys.argv[1], pathlib.Path(sys.argv[2])
        k = int(count.read_text()) if count.exists() else 0
        count.write_text(str(k + 1))
        # Runs 0, 1 are the warm-ups; then each pair is runs 2k, 2k + 1: odd is second.
        tput = 1000.0 * (1.03 if k % 2 else 1.0)
        json.dump({"max_concurrency": 1, "output_throughput": tput, "output_digest": "x"},
                  open(out, "w"))
    """))
    counter = tmp_path / "count"
    command = f"{{python}} {shlex.quote(str(script))} {{out}} {shlex.quote(str(counter))}"
    result = run_alternating(command, Side("A", {}, tmp_path), Side("B", {}, tmp_path), [1], 6)
    from ledger.evidence.stats import analyze

    analysis = analyze(result.rows, "output_throughput", paired=True)
    cell = analysis["by_concurrency"][0]["metrics"]["output_throughput"]
    assert analysis["verdict"] != "gain" and abs(cell["delta_pct"]) < 0.1, cell
    assert sorted({round(r["output_throughput"]) for r in result.rows}) == [1000, 1030]


def test_until_runs_rounds_over_the_load_points_and_stops_where_it_is_told(tmp_path, bench):
    """A sequential A/B (``ab --until-decided``): the pairs run in rounds, one at every load
    point, ``until`` is asked after each round with the rows so far, and True stops it."""
    asked = []

    def until(rows, pairs):
        asked.append((pairs, len(rows)))
        return pairs == 3

    result = run_alternating(template(bench), Side("A", {}, tmp_path),
                             Side("B", {"FAKE_SHIFT": "0.2"}, tmp_path), [1, 4], 8,
                             until=until)
    assert asked == [(1, 4), (2, 8), (3, 12)]
    assert [(r["concurrency"], r["repeat"], r["side"]) for r in result.rows[:8]] == [
        (1, 0, "A"), (1, 0, "B"), (4, 0, "A"), (4, 0, "B"),
        (1, 1, "B"), (1, 1, "A"), (4, 1, "B"), (4, 1, "A")]
    assert len(result.rows) == 12 and result.meta["runs"] == 3
    log = read_log(tmp_path / "log.jsonl")
    assert len(log) == 2 + 12  # the warm-ups, then 3 rounds: nothing ran past the stop
