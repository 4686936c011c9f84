"""benchmarks/check_scale.py runs, and `ledger check` reads only what changed."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_check_scale_prints_its_figures_and_reads_only_the_changed_blobs():
    r = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "check_scale.py"),
                        "--targets", "12", "--entries", "60", "--repeat", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ledger check --base main (fresh process, cache warm):  median" in r.stdout
    # ledger.yaml is the same blob at both sides (read once), entries.jsonl and the one
    # changed script are read at base and head: nothing of the other eleven scripts
    assert re.search(r"run_check in-process \(cache empty\): [\d.]+ s, 5 blobs read, "
                     r"1 change\(s\)", r.stdout), r.stdout
