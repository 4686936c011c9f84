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


# What a service's last log lines most often mean, and what to do about it.  First match
# wins; each pattern is matched against the tail of the log.
_CAUSES = (
    (r"No module named '(torch|safetensors|tokenizers|ninja)'",
     "the engine's dependencies are not installed: pip install 'knob-ledger[engine]' "
     "(the `[engine]` extra) into the interpreter the service runs on"),
    (r"No module named '([\w.]+)'",
     "a Python module the service imports is missing: install {0} into the interpreter "
     "the service runs on"),
    (r"Address already in use", "the port is taken: another server (an earlier one still "
     "running?) listens there"),
    (r"(CUDA out of memory|OutOfMemoryError)", "the GPU ran out of memory at startup: lower "
     "the memory fraction or the batch/KV settings"),
    (r"Permission denied", "the service could not open a file or port it needs (permissions)"),
)


def log_tail(log: Path, lines: int = 12) -> list[str]:
    """The last ``lines`` lines of a service's log ([] when there is none)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def likely_cause(lines: list[str]) -> str:
    """What a service's last log lines most likely mean ("" when nothing known matches)."""
    import re

    text = "\n".join(lines)
    for pattern, cause in _CAUSES:
        m = re.search(pattern, text)
        if m:
            return cause.format(*m.groups())
    return ""


def exited_report(what: str, log: Path | None) -> str:
    """``what`` exited before it was healthy: with its log's last lines and the likely
    cause, so a missing dependency reads as one instead of as a hang."""
    tail = log_tail(log) if log is not None else []
    cause = likely_cause(tail)
    out = what
    if cause:
        out += f"\nlikely cause: {cause}"
    if tail:
        out += f"\nlast lines of {log}:\n" + "\n".join(f"  {line}" for line in tail)
    return out


def service_log(pid_file: Path) -> Path | None:
    """The log beside a pid file (``run/decode.pid`` → ``run/decode.log``), where
    ``python -m engine service`` and most supervisors' wrappers write it; None if none."""
    log = pid_file.with_suffix(".log")
    return log if log.is_file() else None
