"""Running a bisect's check: an argv, exit 0 = good, anything else = bad, a timeout = bad.

The check is split with :func:`shlex.split` and run without a shell; ``--shell`` runs
the text with ``/bin/sh -c`` instead (the operator's explicit choice).  It runs in its
own session, so a timeout or a Ctrl-C kills its whole process group (a hang is the
classic symptom, and a hung check's children must not outlive it).  Output (stdout and
stderr together) goes to a temporary file; the last lines are kept for the record.

Decisions: a check that cannot start (no such program) is an error, not a "bad"
verdict — otherwise a typo would "reproduce" every failure.  For the same reason, with
``--shell``, exit 126/127 (the shell's "not executable" / "not found") is an error too.
A check killed by a signal (negative return code) is bad.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ledger.errors import LedgerError
from ledger.errors import UsageError

TAIL_LINES = 20
TAIL_WIDTH = 300
GRACE_S = 2.0


class CheckError(LedgerError):
    """The check could not be run at all."""


@dataclass(frozen=True)
class CheckSpec:
    text: str
    argv: tuple[str, ...]
    shell: bool
    timeout_s: float | None

    def to_dict(self) -> dict:
        return {"text": self.text, "argv": list(self.argv), "shell": self.shell,
                "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class Run:
    exit_code: int | None  # None: timed out
    seconds: float
    timed_out: bool
    tail: tuple[str, ...]

    @property
    def bad(self) -> bool:
        return self.timed_out or self.exit_code != 0

    def to_dict(self) -> dict:
        return {"exit": self.exit_code, "seconds": round(self.seconds, 3),
                "timed_out": self.timed_out, "tail": list(self.tail)}


def parse_check(text: str, *, shell: bool, timeout_s: float | None) -> CheckSpec:
    """The check as an argv (never through a shell unless ``shell``)."""
    if timeout_s is not None and not timeout_s > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {timeout_s}")
    if not text.strip():
        raise UsageError("--check is empty: give the command that reproduces the failure")
    if shell:
        return CheckSpec(text, ("/bin/sh", "-c", text), True, timeout_s)
    try:
        argv = tuple(shlex.split(text))
    except ValueError as e:
        raise UsageError(f"--check {text!r}: {e} (quote it as a shell would)") from e
    return CheckSpec(text, argv, False, timeout_s)


def run_check(spec: CheckSpec, cwd: Path, env: Mapping[str, str]) -> Run:
    """Run the check once; kill its process group on a timeout or an interrupt."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(list(spec.argv), cwd=cwd, env=dict(env),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        except OSError as e:
            raise CheckError(f"cannot run the check {shlex.join(spec.argv)}: "
                             f"{e.strerror or e}") from e
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out, code = True, None
            kill_group(proc)
        except BaseException:
            kill_group(proc)
            raise
        seconds = time.monotonic() - start
        if not timed_out:
            kill_group(proc, grace=0)  # children it left running must not outlive it
        out.seek(0)
        tail = _tail(out.read())
    if spec.shell and code in (126, 127):
        raise CheckError(f"the shell could not run the check (exit {code}): "
                         + (tail[-1] if tail else spec.text))
    if timed_out:
        tail = tail + (f"[ledger: killed after {spec.timeout_s:g}s timeout]",)
    return Run(code, seconds, timed_out, tail)


def kill_group(proc: subprocess.Popen, grace: float = GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL) if grace else (signal.SIGKILL,):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace or None)
            if sig == signal.SIGTERM:
                # The leader is gone; its group may not be.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            break
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


def _tail(data: bytes) -> tuple[str, ...]:
    lines = data.decode("utf-8", "replace").splitlines()[-TAIL_LINES:]
    return tuple(line[:TAIL_WIDTH] for line in lines)


__all__ = ["CheckError", "CheckSpec", "Run", "kill_group", "parse_check", "run_check"]
