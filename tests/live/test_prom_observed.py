"""Observed evidence end to end: a real Prometheus (Debian's ``prometheus``) on loopback
scraping the bundled engine every second while ``engine bench`` loads it; changes recorded
with ``--restart`` judged by ``ledger evidence prom`` over short windows, and a
``--bake`` that rolls a slow change back.

One Prometheus, one engine and one load for the module; the tests run in order, each
change waiting out the previous restart's warmup before its "before" window (24 s each
side after a 12 s warmup, a sample every 2 s: 12 samples a side, where a load bin needs 5;
a before window inside a warmup would be shortened by ``evidence prom``).  The engine, its
load and Prometheus run at a higher priority than the rest of the suite (``PRIORITY``), so
the module can run beside the heaviest modules (it starts first: tests/conftest.py)
without a neighbour's burst landing in one window only.  The slow change is a real knob
value: ``ENGINE_PREFILL_CHUNK_TOKENS=1`` prefills the load's 256-token prompts one token
per step instead of in one chunk (about -90% output tok/s at concurrency 1: _start_load).
Tolerance 50% (ledger.yaml): on the shared 2-core machine (load average 13) two identical
40-prompt bench runs differed by 30-40%, and a 3 s step's throughput moves about as much;
observed evidence is judged with the same rule, so a tolerance narrower than the noise
could only ever say ``inconclusive``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from tests.engine.conftest import REPO
from tests.engine.conftest import free_port

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow(minutes=4),  # mostly waiting out windows (tests/conftest.py: its place)
    pytest.mark.skipif(PROMETHEUS is None, reason="no `prometheus` binary: install Debian's "
                       "prometheus package (.ci/run does) to run the observed-evidence tests"),
]

WINDOW, WARMUP, STEP = 24, 12, 2
# Pairs of windows the harmless change gets to read neutral.  In the suite its windows
# can overlap the upgrade story's c32 benches and the kernels' builds, which slow the
# engine through the shared caches and memory, where no priority reaches: one pair in
# two read `inconclusive` (+27.7%, +73% in the worst), a later pair neutral.
PAIRS = 3
SAID = f"observed in production, {WINDOW} s each side"
# The "production" processes (the engine, its load, Prometheus) run at a higher priority
# than the test workers around them, standing for the machine of their own a production
# engine has: on the shared 2-core machine a neighbour module's kernel build or engine
# bisect otherwise slows one window and not the other (a harmless change read
# "inconclusive +26.8%").  The highest priority, -20: the scheduler shares a core by
# weight, and at -10 (weight 9548 against 1024 for each normal task) the engine kept only
# ~65% of its core beside five runnable neighbours -- a clean-tree suite read a harmless
# change +73% in its second pair of windows -- where at -20 (88761) it keeps ~95%.
# Raising priority needs root (CI runs as root); elsewhere nice(1) says it cannot and
# runs the command at the normal priority.
PRIORITY = ["nice", "-n", "-20"]
SLOW = "ENGINE_PREFILL_CHUNK_TOKENS=1"
HARMLESS = "ENGINE_INFLIGHT_TIMEOUT_S=60"
SERVE = """#!/usr/bin/env bash
# The bundled engine, prefill and decode in one process, under knob ledger.
set -euo pipefail
export ENGINE_PREFILL_CHUNK_TOKENS=512
export ENGINE_INFLIGHT_TIMEOUT_S=30
export ENGINE_NUM_THREADS=1
exec "$PYTHON" -m engine serve --role both --host 127.0.0.1 --port "$PORT" --preset tiny
"""


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = root / "ws"
        self.script = root / "deploy" / "serve.sh"
        self.port, self.prom_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.prom = f"http://127.0.0.1:{self.prom_port}"
        self.pid_file = root / "run" / "engine.pid"
        self.procs: list[subprocess.Popen] = []
        self.runner = CliRunner()

    def ledger(self, *args: str):
        r = self.runner.invoke(cli, ["-C", str(self.ws), *map(str, args)],
                               catch_exceptions=False)
        return r

    def control(self, action: str, *extra: str) -> list[str]:
        return [sys.executable, "-m", "engine", "service", action, "--pid-file",
                str(self.pid_file), "--log", str(self.root / "run" / "engine.log"),
                "--grace", "5", *extra]

    def launch(self) -> list[str]:
        return [*PRIORITY, "env", f"PORT={self.port}", f"PYTHON={sys.executable}",
                f"PYTHONPATH={REPO}", "bash", str(self.script)]


def _wait_ok(url: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not come up at {url}")


def _start_prometheus(st: Stack) -> None:
    config = st.root / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n  - job_name: engine\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{st.port}']\n")
    st.procs.append(subprocess.Popen(
        [*PRIORITY, PROMETHEUS, f"--config.file={config}",
         f"--storage.tsdb.path={st.root / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{st.prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(st.root / "prometheus.log", "wb"),
        start_new_session=True))
    _wait_ok(f"{st.prom}/-/ready", 60, "prometheus")


def _start_load(st: Stack) -> None:
    """``engine bench`` at concurrency 1, again and again (a restart ends a bench run): one
    request in the engine at a time keeps every busy step in one load bin on both sides (at
    concurrency 4 a loaded CI machine put the before side at 4 and the after side at 2).
    Prompts of 256 tokens make the slow change (one prefill token a step: 256 steps where 1
    did) cost ~90% of output throughput, so a neighbour's burst in one window cannot pull it
    inside the ±50% tolerance (at 64 tokens it cost ~78%, and a CI bake once read -57%)."""
    bench = shlex.join([sys.executable, "-m", "engine", "bench", "--mode", "online",
                        "--url", st.url, "--concurrency", "1", "--num-prompts", "3000",
                        "--input-len", "256", "--output-len", "16", "--json", os.devnull])
    st.procs.append(subprocess.Popen(
        [*PRIORITY, "bash", "-c", f"while true; do {bench} >/dev/null 2>&1 || sleep 0.5; done"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    st = Stack(tmp_path_factory.mktemp("prom"))
    for d in ("deploy", "run"):
        (st.root / d).mkdir()
    st.script.write_text(SERVE)
    run = st.runner.invoke
    assert run(cli, ["init", str(st.ws), "--root", f"deploy={st.script.parent}"]).exit_code == 0
    assert st.ledger("target", "add", "engine", st.script, "--format", "bash").exit_code == 0
    r = st.ledger("target", "set", "engine", "--live", f"pid_file={st.pid_file}",
                  "--restart", shlex.join(st.control("restart", "--", *st.launch())),
                  "--health-url", f"{st.url}/health", "--health-timeout", "120")
    assert r.exit_code == 0, r.output
    config = st.ws / "ledger.yaml"
    config.write_text(config.read_text() + "bench:\n  tolerance_pct: 50\n  guards:\n"
                      "    - {metric: p99_ttft_ms, max_change_pct: 90}\n")
    subprocess.run(["git", "-C", str(st.ws), "commit", "-qam", "tolerance 50%, a TTFT guard"],
                   check=True)
    subprocess.run(st.control("start", "--", *st.launch()), check=True, capture_output=True)
    try:
        _wait_ok(f"{st.url}/health", 120, "the engine")
        _start_prometheus(st)
        _start_load(st)
        time.sleep(WINDOW + 3)  # the first change's "before" window, under load
        yield st
    finally:
        for p in st.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
        subprocess.run(st.control("stop"), capture_output=True, timeout=60)


def _observe(st: Stack, ref: str, *metric: str):
    """``evidence prom`` once the after window is over (the command says when)."""
    args = ("evidence", "prom", ref, "--prometheus", st.prom, "--window", f"{WINDOW}s",
            "--warmup", f"{WARMUP}s", "--step", f"{STEP}s", "--match", '{job="engine"}',
            *metric)
    for _ in range(3):
        r = st.ledger(*args)
        wait = re.search(r"\(in (\d+) s\): wait", r.output)
        if r.exit_code == 0 or not wait:
            return r
        time.sleep(int(wait.group(1)) + 3)  # + a scrape and a step
    return r


def _entry(st: Stack, title: str) -> dict:
    return next(e for e in _json(st.ledger("list", "--json")) if e["title"] == title)


def _json(r):
    import json

    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_slower_engine_is_judged_a_regression_from_production_metrics(stack):
    st = stack
    r = st.ledger("record", "knob", "engine", SLOW, "--class", "perf", "--title", "slow",
                  "--restart")
    assert r.exit_code == 0, r.output
    r = _observe(st, "slow")
    assert r.exit_code == 0, r.output
    line = r.stdout.splitlines()[0]
    assert f"{SAID} (not a controlled A/B): regression" in line
    assert "output_throughput @load" in line
    assert "histogram buckets A" in r.stdout and "interpolated inside a bucket" in r.stdout
    shown = st.ledger("show", "slow").stdout
    assert SAID in shown
    runs = _json(st.ledger("evidence", "show", "slow", "--json"))["runs"]
    (run,) = runs
    assert run["source"] == "observed" and run["verdict"] == "regression"
    assert run["observed"]["design"] == "observational (not a controlled A/B)"
    assert run["observed"]["counter_resets"] == "handled by rate()"
    assert any("not a controlled A/B" in w for w in run["warnings"])
    text = st.ledger("evidence", "show", "slow").stdout
    assert "LOAD" in text and f"{SAID}: not a controlled " \
        "A/B (A before, B after the change" in text
    assert st.ledger("render", "--out", st.root / "docs").exit_code == 0
    page = (st.root / "docs" / "entries" / f"{_entry(st, 'slow')['id']}.md").read_text()
    assert f"{SAID}: not a controlled A/B" in page
    assert "| Requests in the engine |" in page and "bootstrap" not in page
    r = st.ledger("revert", "slow", "--why", "slower in production", "--restart")
    assert r.exit_code == 0, r.output
    diff = st.ledger("diff").stdout
    assert "observed in production" in diff  # what is off the table, and how we know


def test_a_change_that_does_not_touch_speed_is_neutral(stack):
    """Judged on the median inter-token latency, which the engine times itself.  The
    closed loop's output throughput at one request in the engine also counts the bench
    client's own time between requests, so a client slowed by a neighbour reads as a
    slower engine: in one CI run a pair read +36% output_throughput @load 1 (median 584
    against 816 tok/s) while the same windows' median ITL moved -5.5%.  The regression
    test above judges throughput, where the slow change costs ~90%."""
    st = stack
    time.sleep(WINDOW + WARMUP + 2)  # the revert's restart and warmup out of the "before"
    r = st.ledger("record", "knob", "engine", HARMLESS, "--class", "bugfix", "--title",
                  "longer inflight timeout", "--restart")
    assert r.exit_code == 0, r.output
    ref = "longer-inflight-timeout"
    for pair in range(1, PAIRS + 1):
        r = _observe(st, ref, "--metric", "median_itl_ms")
        assert r.exit_code == 0, r.output
        # never a false call, whatever the neighbours do
        assert ": regression" not in r.stdout and ": gain" not in r.stdout, r.stdout
        if ": inconclusive" not in r.stdout or pair == PAIRS:
            break
        # A neighbour's burst (other test workers on this 2-core machine) in one window can
        # leave the interval wide: the same change is taken off and put back, and a later
        # pair of windows must read neutral.
        assert st.ledger("revert", ref, "--why", "again", "--restart").exit_code == 0
        time.sleep(WINDOW + WARMUP + 2)  # the revert's warmup out of the restore's "before"
        assert st.ledger("restore", ref, "--restart").exit_code == 0
    runs = _json(st.ledger("evidence", "show", "longer-inflight-timeout", "--json"))["runs"]
    said = f"{r.stdout}\n{runs[-1]['by_concurrency']}"
    assert f"{SAID} (not a controlled A/B): neutral" in \
        r.stdout and "median_itl_ms @load" in r.stdout, said
    assert "within ±50%" in r.stdout, said


def test_a_bake_rolls_the_slow_change_back(stack):
    st = stack
    before = st.script.read_bytes()
    r = st.ledger("restore", "slow", "--force", "--restart", "--bake", f"{WINDOW}s",
                  "--prometheus", st.prom, "--match", '{job="engine"}', "--bake-step",
                  f"{STEP}s")
    assert r.exit_code == 1, r.output
    assert f"bake {WINDOW} s: {SAID} (not a controlled A/B): regression" in r.stdout
    assert "rolled back: workspace commit" in r.stdout
    assert "the bake found a regression after the change; rolled back (the service is " \
        "healthy on the old configuration)" in r.stderr
    assert st.script.read_bytes() == before
    slow = _entry(st, "slow")
    assert slow["state"] == "reverted" and slow["suspicion"] == "suspected"
    history = _json(st.ledger("show", "slow", "--json"))["history"]
    actions = [a["action"] for a in history]
    assert actions[-4:] == ["restore", "restart", "bake", "rollback"] or \
        actions[-5:-1] == ["restore", "restart", "bake", "rollback"], actions
    bake = next(a for a in reversed(history) if a["action"] == "bake")
    assert "regression" in bake["why"] and "critical regression" in bake["why"]


def test_a_bake_that_cannot_read_prometheus_rolls_back_and_says_why(stack):
    st = stack
    dead = f"http://127.0.0.1:{free_port()}"
    r = st.ledger("record", "knob", "engine", "ENGINE_INFLIGHT_TIMEOUT_S=45", "--class",
                  "bugfix", "--title", "unbaked", "--restart", "--bake", "1s",
                  "--prometheus", dead)
    assert r.exit_code == 1, r.output
    assert f"bake 1 s FAILED: cannot reach Prometheus at {dead}" in r.stdout
    assert "the bake could not read Prometheus after the change; rolled back" in r.stderr
    history = _json(st.ledger("show", "unbaked", "--json"))["history"]
    assert [a["action"] for a in history][:4] == ["record", "restart", "bake", "rollback"]
    # --bake alone, or without a Prometheus, is refused before any change.
    head = st.script.read_bytes()
    r = st.ledger("record", "knob", "engine", "ENGINE_INFLIGHT_TIMEOUT_S=46", "--class",
                  "bugfix", "--title", "x", "--bake", "1s", "--prometheus", dead)
    assert r.exit_code == 1 and "--bake waits after a restart's health gate" in r.stderr
    r = st.ledger("record", "knob", "engine", "ENGINE_INFLIGHT_TIMEOUT_S=46", "--class",
                  "bugfix", "--title", "x", "--restart", "--bake", "1s")
    assert r.exit_code == 1 and "--bake needs --prometheus URL" in r.stderr
    assert st.script.read_bytes() == head


def test_prometheus_unreachable_is_an_error_naming_it_and_changes_nothing(stack):
    st = stack
    r = st.ledger("record", "knob", "engine", "ENGINE_INFLIGHT_TIMEOUT_S=61", "--class", "perf",
                  "--title", "unreached")
    assert r.exit_code == 0, r.output
    head = subprocess.run(["git", "-C", str(st.ws), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout
    stored = sorted((st.ws / "evidence").rglob("*"))
    dead = f"http://127.0.0.1:{free_port()}"
    time.sleep(2)  # the 1 s "after" window is over
    r = st.ledger("evidence", "prom", "unreached", "--prometheus", dead, "--window", "1s",
                  "--warmup", "0s")
    assert r.exit_code == 1 and f"cannot reach Prometheus at {dead}" in r.stderr, r.output
    assert subprocess.run(["git", "-C", str(st.ws), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout == head
    assert sorted((st.ws / "evidence").rglob("*")) == stored
    assert st.ledger("revert", "unreached", "--why", "not measured").exit_code == 0
