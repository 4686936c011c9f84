"""``GET /server_info``: what a running engine process runs (SGLang's ``/get_server_info``
is the model; both paths answer).

Captured once, at start-up, so the answer is what the process *runs*, not what its serve
script says now: the pid, the start time, the role, the model, every engine knob as read
from the environment at start-up (``env``: the raw strings, ``null`` when unset, which is
what a ledger compares with a file; ``knobs``: the values in effect after defaults and
parsing), the launch arguments, and the engine tree's git commit when the engine runs from
a git checkout (``null`` when it does not, or git is missing; ``engine_dirty`` says whether
the tree had uncommitted changes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Any

from engine.knobs import REGISTRY
from engine.knobs import EngineKnobs


def engine_commit(package_dir: Path | None = None) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty) of the git checkout holding the engine package, or (None, None)."""
    here = package_dir or Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(here.parent), *args], capture_output=True,
                                 text=True, timeout=10, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None

    head = git("rev-parse", "--verify", "HEAD")
    if not head:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no", "--", here.name)
    return head.strip(), None if status is None else bool(status.strip())


def process_start_unix(pid: int | str = "self") -> float | None:
    """When a process started (seconds since the epoch), from /proc; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def startup_info(role: str, model: str | None, knobs: EngineKnobs | None,
                 environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``/server_info`` of this process, as of now (call once, at start-up)."""
    env = os.environ if environ is None else environ
    commit, dirty = engine_commit()
    now = process_start_unix() or time.time()
    return {
        "pid": os.getpid(),
        "start_time": datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "start_unix": now,
        "role": role,
        "model": model,
        "env": {knob.name: env.get(knob.name) for knob in REGISTRY},
        "knobs": knobs.as_env() if knobs is not None else {},
        "engine_release": knobs.release if knobs is not None else None,
        "argv": list(sys.argv),
        "engine_commit": commit,
        "engine_dirty": dirty,
        "python": sys.version.split()[0],
    }
