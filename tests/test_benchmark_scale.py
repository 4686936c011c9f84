"""benchmarks/ledger_scale.py runs as issue 24's Done-when writes it (no ``--keep``): a
small workspace built in a temporary directory, every row printed, nothing left behind.
A smoke run of the real script, not a timing: the figures are the benchmark's to judge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ledger_scale_runs_without_keep_and_removes_its_workspace(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ledger_scale.py"),
                        "--entries", "40", "--targets", "3"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {line[:34].strip(): line[34:].split() for line in r.stdout.splitlines()
            if line.startswith("ledger ")}
    assert rows["ledger status --json (cache empty)"][1:3] == ["-", "(once,"]  # no goal
    for label in ("ledger status --json (median of 3)", "ledger diff --json (median of 3)",
                  "ledger revert --perf-only", "ledger restore --perf-only"):
        assert rows[label][2] in ("ok", "SLOW"), r.stdout
    assert "revert: 3 target files written, each once" in r.stdout
    assert list(tmp_path.iterdir()) == []  # workspace, scripts and cache all removed
