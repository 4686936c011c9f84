"""A service that exits before its health check passes fails the command at once, with
its log's last lines and the likely cause (issue 53: a `pip install .` without the
``[engine]`` extra made `ledger demo` look hung for 180 s, the cause only in the log).

The "server" is real: started by the bundled engine's own supervisor (``python -m engine
service``), it dies the way a missing torch makes it die.  Nothing listens on the health
URL (a port the kernel just handed out and took back), so only the exit can end the wait.
"""

from __future__ import annotations

import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

from ledger.commands.demo import Step
from ledger.errors import LedgerError

DIES = ("import sys; sys.stderr.write('Traceback (most recent call last):\\n"
        "  File \"<string>\", line 1, in <module>\\n"
        "ModuleNotFoundError: No module named \\'torch\\'\\n'); sys.exit(1)")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _service(run: Path, action: str) -> list[str]:
    return [sys.executable, "-m", "engine", "service", action, "--pid-file",
            str(run / "decode.pid"), "--log", str(run / "decode.log"), "--",
            sys.executable, "-c", DIES]


def test_a_restart_whose_service_dies_fails_at_once_with_its_log(story, ledger, tmp_path):
    run = tmp_path / "run"
    r = ledger(*story.args("target", "set", "decode", "--live", f"pid_file={run / 'decode.pid'}",
                           "--restart", shlex.join(_service(run, "restart")),
                           "--health-url", f"http://127.0.0.1:{_closed_port()}/health",
                           "--health-timeout", "120"))
    assert r.exit_code == 0, r.stderr
    t0 = time.monotonic()
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                           "--class", "perf", "--title", "queue 8", "--restart"))
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.exit_code == 1, out
    assert took < 60, f"waited {took:.0f}s for a service that had exited"
    assert "likely cause: the engine's dependencies are not installed" in out, out
    assert "[engine]" in out and "No module named 'torch'" in out
    assert f"last lines of {run / 'decode.log'}" in out


def test_the_demo_stops_waiting_for_a_server_that_died(tmp_path):
    from ledger.cli.docs import run_command_step

    run = tmp_path / "run"
    step = Step("start", (), command=tuple(_service(run, "start")),
                wait_url=f"http://127.0.0.1:{_closed_port()}/health",
                pid_file=str(run / "decode.pid"))
    t0 = time.monotonic()
    with pytest.raises(LedgerError) as e:
        run_command_step(step, timeout=120)
    assert time.monotonic() - t0 < 60
    text = str(e.value)
    assert "exited before it answered" in text and "No module named 'torch'" in text
    assert "pip install 'knob-ledger[engine]'" in text
