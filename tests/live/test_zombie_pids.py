"""One answer to "is this pid alive" (issue 30): a zombie — exited, not yet reaped —
is dead, for the temporaries doctor may delete (store/leftovers) and for the services
``status --live`` reads (live/probe).  A real zombie: a child of this test process that
has exited and that the test does not wait for until the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.live import probe
from ledger.procs import pid_alive
from ledger.store import leftovers
from tests.store.kit import run_cli
from tests.store.kit import with_ctas_512


def state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.fixture
def zombie():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while state_of(proc.pid) != "Z":  # exited; this process has not reaped it
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    yield proc.pid
    assert state_of(proc.pid) == "Z"  # still a zombie: nothing above reaped it
    proc.wait()


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={"PATH": "/usr/bin:/bin", "SGLANG_SM120_MMA_TARGET_CTAS": "512"})
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_zombie_is_dead_a_sleeper_alive_a_reaped_pid_dead(zombie, sleeper):
    assert not pid_alive(zombie)
    assert pid_alive(sleeper) and pid_alive(os.getpid())
    assert not pid_alive(0) and not pid_alive(-1)
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert not pid_alive(done.pid)


def test_both_callers_agree_on_a_zombie(tmp_path, zombie, sleeper):
    for pid, alive in ((zombie, False), (sleeper, True)):
        temp = tmp_path / f".ledger-tmp-p{pid}-serve.sh"
        temp.write_text("half")
        assert leftovers.is_orphan(temp, writer_running=False) is not alive
        (tmp_path / "s.pid").write_text(f"{pid}\n")
        found, state, _ = probe.find_pid(probe.LiveProbe("pid_file", "s.pid"), tmp_path)
        assert (state == probe.RUNNING) is alive and (found == pid) is alive


def test_through_the_cli_doctor_and_status_live(story, ledger, zombie, sleeper):
    ws = with_ctas_512(story, ledger)
    dead = ws.script.with_name(f".ledger-tmp-p{zombie}-{ws.script.name}")
    live = ws.script.with_name(f".ledger-tmp-p{sleeper}-{ws.script.name}")
    for temp in (dead, live):
        temp.write_text("half-written")
    r = run_cli(ws.root, "doctor", "--json")
    findings = {f["path"]: f for f in json.loads(r.stdout)["findings"]}
    assert findings[str(dead)]["repair"] == "remove the temporary"  # its writer is gone
    assert findings[str(live)]["repair"] is None  # its writer still runs: left alone
    assert run_cli(ws.root, "doctor", "--repair").returncode == 1  # the live one stays
    assert not dead.exists() and live.exists()
    live.unlink()
    (ws.root / "run").mkdir()
    r = run_cli(ws.root, "target", "set", "decode", "--live", "pid_file=run/d.pid")
    assert r.returncode == 0, r.stderr
    (ws.root / "run" / "d.pid").write_text(f"{zombie}\n")
    r = run_cli(ws.root, "status", "--live", "--json")
    assert r.returncode == 0, r.stderr
    assert f"pid {zombie}" in r.stdout and "is not running" in r.stdout
    (ws.root / "run" / "d.pid").write_text(f"{sleeper}\n")
    r = run_cli(ws.root, "status", "--live", "--json")
    assert r.returncode == 0 and "is not running" not in r.stdout and str(sleeper) in r.stdout
