"""Ctrl-C and SIGTERM in long commands, a closed pipe, and click's usage errors (issue 29).

Real signals to a real `ledger` process: each slow step (a bench run, a bisect check, a
restart hook) is a script that writes its pid to a marker file and sleeps, so the signal
lands while the command is in the middle of it.  Each stop must print one
``error: interrupted: …`` line saying what was put back and kept, exit 130, and leave
the workspace as the line says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

LEDGER = str(Path(sys.executable).parent / "ledger")
SLOW = """\
import os, sys, time
mark = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "only-if-reverted":
    if "=512" in open(sys.argv[3]).read():
        sys.exit(1)  # applied: the failure, at once
with open(mark + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(mark + ".tmp", mark)
time.sleep(120)
"""


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "LEDGER_WORKSPACE"}


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True,
                          env=_env(), timeout=120, check=False)


def _interrupt(args: list, mark: Path, sig: int = signal.SIGINT) -> tuple[subprocess.CompletedProcess, int]:
    """Run `ledger ARGS`, wait until its slow step has started, signal it; (result, slow pid)."""
    proc = subprocess.Popen([LEDGER, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + 90
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            pytest.fail(f"the slow step never started (exit {proc.returncode}):\n{out}\n{err}")
        time.sleep(0.05)
    slow_pid = int(mark.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=90)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), slow_pid


def _one_interrupted_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: "), err
    assert "Traceback" not in err and "Aborted!" not in err
    return lines[0]


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def perf(story, ledger, tmp_path):
    """The story workspace with one applied perf knob; the slow script beside it."""
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                           "--class", "perf", "--title", "ctas 512"))
    assert r.exit_code == 0, r.stderr
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW)
    entry = ledger(*story.args("list", "--json")).json()[0]["id"]
    return story, entry, slow


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_ab_stops_its_bench_and_stores_nothing(perf, tmp_path, sig):
    story, entry, slow = perf
    mark = tmp_path / "bench.pid"
    before = story.script.read_bytes()
    r, bench = _interrupt(story.args("ab", entry, "--runs", "4", "--concurrency", "1",
                                     "--bench", f"{sys.executable} {slow} {mark} {{out}}"), mark, sig)
    assert r.returncode == 130, r.stderr
    line = _one_interrupted_line(r.stderr)
    assert f"interrupted: ab {entry}: its bench runs are stopped" in line
    assert "kept: nothing" in line and f"rerun `ledger ab {entry}`" in line
    assert _gone(bench), "the bench process outlived the interrupted ab"
    assert not (story.root / "evidence" / entry).exists()
    assert story.script.read_bytes() == before
    # The writer lock went with it: the next command runs, and there is nothing to recover.
    st = _cli(*story.args("status"))
    assert st.returncode == 0 and "interrupted" not in st.stderr, st.stderr


def test_an_interrupted_bisect_puts_the_start_back_and_keeps_its_record(perf, tmp_path):
    story, entry, slow = perf
    mark = tmp_path / "check.pid"
    before = story.script.read_bytes()
    # Bad (exit 1) with the knob applied; the baseline (reverted) hangs until the signal.
    check = f"{sys.executable} {slow} {mark} only-if-reverted {story.script}"
    r, checker = _interrupt(story.args("bisect", "--class", "perf", "--check", check), mark)
    assert r.returncode == 130, r.stderr
    line = _one_interrupted_line(r.stderr)
    assert "interrupted: bisect " in line and "the starting configuration is back" in line
    assert "kept: its record (2 steps, interrupted) in `ledger bisect show`" in line
    assert _gone(checker)
    assert story.script.read_bytes() == before  # the probe's revert is undone
    rows = json.loads(_cli(*story.args("list", "--json")).stdout)
    assert rows[0]["state"] == "applied"
    shown = _cli(*story.args("bisect", "show"))
    assert "interrupted" in shown.stdout, shown.stdout


@pytest.mark.slow
def test_an_interrupted_restart_rolls_the_mutation_back(perf, tmp_path):
    story, entry, slow = perf
    mark = tmp_path / "restart.pid"
    r = _cli(*story.args("target", "set", "decode", "--restart", f"{sys.executable} {slow} {mark}",
                         "--health-url", "http://127.0.0.1:9/health", "--health-timeout", "5"))
    assert r.returncode == 0, r.stderr
    before = story.script.read_bytes()
    head = _cli(*story.args("log", "--json"))
    r, restart = _interrupt(story.args("revert", entry, "--why", "try without", "--restart"), mark)
    assert r.returncode == 130, r.stderr
    line = _one_interrupted_line(r.stderr)
    assert "interrupted: `ledger revert" in line
    assert "is rolled back before its health check passed: files and entries are as before it" \
        in line
    assert _gone(restart)
    assert story.script.read_bytes() == before
    rows = json.loads(_cli(*story.args("list", "--json")).stdout)
    assert rows[0]["state"] == "applied"
    log = json.loads(_cli(*story.args("log", "--json")).stdout)
    new = log[:len(log) - len(json.loads(head.stdout))]
    assert [c["subject"].split(" ", 1)[0] for c in new] == ["rollback", "revert"], new


def test_a_closed_pipe_ends_a_read_command_quietly(perf):
    story, _, _ = perf
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line (`ledger log | head -0`)
    try:
        done = subprocess.run([LEDGER, "-C", str(story.root), "log"], stdout=write,
                              stderr=subprocess.PIPE, text=True, env=_env(), timeout=60,
                              check=False)
    finally:
        os.close(write)
    assert done.stderr == "", done.stderr
    assert done.returncode == 141  # as a process ended by SIGPIPE, like git


@pytest.mark.parametrize("args, message", [
    (["lst"], "error: No such command 'lst'. Did you mean 'list'?"),
    (["list", "--bogus"], "error: No such option '--bogus'"),
    (["show"], "error: Missing argument 'ID'."),
])
def test_click_usage_errors_speak_the_tools_error_style(args, message):
    r = _cli(*args)
    assert r.returncode == 2
    assert message in r.stderr and "Error:" not in r.stderr
    assert r.stderr.splitlines()[0].startswith("Usage: ledger")


@pytest.mark.parametrize("point, sig", [("after-targets", "INT"), ("after-ledger-files", "TERM")])
def test_an_interrupted_transaction_puts_every_file_back(perf, ledger, point, sig):
    """Ctrl-C (SIGTERM) landing inside a mutation's transaction — after the target files,
    or after the ledger's own files, were written — puts every one back: the files, the
    entries and the workspace's history are as before the command."""
    from tests.store.kit import run_cli

    story, entry, _ = perf
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                           "--class", "perf", "--title", "queue 8"))
    assert r.exit_code == 0, r.stderr
    before = story.script.read_bytes()
    entries = (story.root / "entries.jsonl").read_bytes()
    log = _cli(*story.args("log", "--json")).stdout
    r = run_cli(story.root, "revert", "--perf-only", "--why", "incident",
                env={"LEDGER_INTERRUPT_AT": f"{point}:{sig}"})
    assert r.returncode == 130, r.stderr
    line = _one_interrupted_line(r.stderr)
    assert line == ("error: interrupted: `ledger revert --perf-only --why incident`: every "
                    "file it had written is put back and the ledger is unchanged; nothing of "
                    "it was kept"), line
    assert story.script.read_bytes() == before
    assert (story.root / "entries.jsonl").read_bytes() == entries
    assert _cli(*story.args("log", "--json")).stdout == log
    assert not (story.root / ".ledger" / "intent.json").exists()
    st = _cli(*story.args("status"))  # nothing left to recover, nothing drifted
    assert st.returncode == 0 and "interrupted" not in st.stderr, st.stderr
    assert all(e["state"] == "applied" for e in json.loads(_cli(*story.args("list", "--json")).stdout))
