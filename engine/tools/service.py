"""``python -m engine service start|stop|restart``: a minimal supervisor for one server.

For hosts without systemd (and for the demo and the tests): it runs a serve script
detached (its own session, output to a log file), records the pid in a pid file, and stops
it again (SIGTERM, then SIGKILL after ``--grace`` seconds).  It never waits for the server
to be healthy: that is the caller's job (``ledger … --restart`` polls the health check).

The serve scripts ``exec`` the engine, so the recorded pid is the engine process itself,
whose ``/proc/PID/environ`` holds the knobs it started with.

    python -m engine service restart --pid-file run/decode.pid --log run/decode.log \\
        -- env PORT=30200 bash deploy/serve_decode.sh
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


# /proc/PID/stat's state letters of a process that no longer runs: zombie, dead.
GONE = ("Z", "X", "x")


def alive(pid: int) -> bool:
    """True while ``pid`` runs; False for a zombie, a reaped pid, or no pid (<= 0).

    The engine's own copy of the ledger's definition (``ledger.procs.pid_alive``; the
    engine never imports the ledger): a zombie — exited, not yet reaped by its parent —
    serves nothing, so ``stop`` is done with it and ``start`` may start again.  /proc is
    read first (``kill -0`` succeeds on a zombie); ``kill -0`` only where there is none.
    A pid of 0 or below names a process group to ``kill``: never a server's pid (a pid
    file holding ``0`` must not make ``stop`` signal its own group).
    """
    if pid <= 0:
        return False
    if Path("/proc/self").is_dir():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        fields = stat.rpartition(")")[2].split()  # after "(comm)", which may hold spaces
        return bool(fields) and fields[0] not in GONE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(pid_file: Path, grace: float = 10.0) -> int | None:
    """Stop the process named in ``pid_file``; return its pid (None if none ran)."""
    pid = read_pid(pid_file)
    if pid is None or not alive(pid):
        pid_file.unlink(missing_ok=True)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    return pid


def start(pid_file: Path, log: Path, command: list[str]) -> int:
    """Start ``command`` detached; write its pid to ``pid_file`` (atomically)."""
    if not command:
        raise ValueError("no command to start (give it after --)")
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    tmp = pid_file.with_name(pid_file.name + ".tmp")
    tmp.write_text(f"{proc.pid}\n")
    os.replace(tmp, pid_file)
    return proc.pid


def main(action: str, pid_file: str, log: str | None, grace: float, command: list[str]
         ) -> int:
    """The ``service`` subcommand; prints what it did, one line each."""
    pid_path = Path(pid_file)
    if action in ("stop", "restart"):
        old = stop(pid_path, grace)
        print(f"service: stopped pid {old}" if old else "service: nothing was running")
    if action in ("start", "restart"):
        if action == "start" and (pid := read_pid(pid_path)) and alive(pid):
            print(f"service: already running as pid {pid}")
            return 1
        new = start(pid_path, Path(log or pid_path.with_suffix(".log")), command)
        print(f"service: started pid {new}")
    return 0
