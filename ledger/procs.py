"""Whether a process runs: the ledger's one definition, for every check that asks.

``ledger doctor`` and the next command delete a temporary file whose writer is gone
(:mod:`ledger.store.leftovers`), and ``ledger status --live`` reads the environment of a
service that runs (:mod:`ledger.live.probe`); both ask this module.

A *zombie* — a process that has exited but whose parent has not reaped it yet — counts
as dead: it holds no file open, writes nothing and serves nothing, and its pid stays in
``/proc`` only until the parent calls ``wait``.  (A service whose supervisor never reaps
it is not running, whatever ``kill -0`` says.)  Where there is no ``/proc`` the signal 0
test is all there is: it cannot tell a zombie, and a pid of another user counts as alive.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
# /proc/PID/stat's state letters of a process that no longer runs: zombie, dead.
GONE = ("Z", "X", "x")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; False for a zombie, a reaped pid, or no pid (<= 0)."""
    if pid <= 0:
        return False  # 0 and negative pids name process groups to kill(), not a process
    if (PROC / "self").is_dir():
        try:
            stat = (PROC / str(pid) / "stat").read_text()
        except OSError:
            return False  # gone (or exited between listing and reading)
        fields = stat.rpartition(")")[2].split()  # after "(comm)", which may hold spaces
        return bool(fields) and fields[0] not in GONE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
