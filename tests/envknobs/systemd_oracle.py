"""systemd itself as the oracle: what ``systemd-analyze verify`` parsed from a unit.

At debug log level ``systemd-analyze verify`` dumps each unit it verified, with one
``Environment: K=V`` line per assignment of the service's environment and the argv of
each command as ``Command Line: ...``, quoted for a shell (split back here by real bash).
Nothing is started.  Tests that need it skip, saying why, where systemd is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")

needs_systemd = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)


@dataclass
class Parsed:
    env: dict[str, str]
    commands: list[list[str]]  # argv of each ExecStart= command
    warnings: list[str]


def _split(line: str) -> list[str]:
    out = subprocess.run(["bash", "-c", 'eval "set -- $1"; printf "%s\\0" "$@"', "_", line],
                         capture_output=True, text=True, check=True)
    return out.stdout.split("\0")[:-1]


def systemd_reads(text: str, tmp: Path, name: str = "oracle.service") -> Parsed:
    """What systemd parses from unit ``text`` (written to ``tmp/name``)."""
    unit = tmp / name
    unit.write_text(text)
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "debug", "SYSTEMD_LOG_COLOR": "0"}
    out = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True,
                         text=True, env=env, timeout=60)
    lines = (out.stdout + out.stderr).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == f"-> Unit {name}:")
    depth = len(lines[start]) - len(lines[start].lstrip())
    parsed = Parsed({}, [], [ln for ln in lines if ln.startswith(f"{unit}:")])
    section = ""
    for ln in lines[start + 1 :]:
        if ln.strip().startswith("-> Unit ") and len(ln) - len(ln.lstrip()) <= depth:
            break
        body = ln.strip()
        if body.startswith("-> "):
            section = body[3:].rstrip(":")
        elif body.startswith("Environment: "):
            k, _, v = body[len("Environment: "):].partition("=")
            parsed.env[k] = v
        elif body.startswith("Command Line: ") and section == "ExecStart":
            parsed.commands.append(_split(body[len("Command Line: "):]))
    return parsed
