"""`ledger bisect --upgrade ID`: the release itself, or which default it moved.

A real SGLang-shaped serve script upgraded 0.5.20 -> 0.5.23 (`ledger record upgrade`; the
defaults that upgrade moves under its unset knobs come from the bundled release catalogs:
eight, SGLANG_ENABLE_FAILED_SESSION_PROBE false -> true among them), and a real bash check
that reads the script as the engine would and fails while a given knob runs on its new
default (the stand-in for a regression; the bundled engine's own story, with a measured
one, is tests/engine/test_engine_upgrade_story.py).  Real git, real bash, real files.
"""

from __future__ import annotations

import subprocess

import pytest

pytest.importorskip("ledger.core.upgrade", reason="upgrade entries (issue 47 items 2-3)")

SCRIPT = """\
#!/usr/bin/env bash
# Decode node of the PD pair (sglang, pinned).
set -euo pipefail
pip install "sglang[all]==0.5.20"
export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
exec python3 -m sglang.launch_server --model-path /models/glm --port 30001 \\
    --disaggregation-mode decode
"""
KNOB = "SGLANG_ENABLE_FAILED_SESSION_PROBE"


@pytest.fixture
def upgraded(tmp_path, ledger):
    script = tmp_path / "serve_decode.sh"
    script.write_text(SCRIPT)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"t={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "decode", script, "--format", "bash"
                  ).exit_code == 0
    r = ledger("-C", root, "record", "upgrade", "decode", "--to", "sglang==0.5.23", "--class",
               "perf", "--title", "sglang 0.5.23", "--json")
    assert r.exit_code == 0, r.stderr
    check = tmp_path / "check.sh"
    check.write_text(f"#!/bin/bash\n# slow while {KNOB} runs on its 0.5.23 default\n"
                     f"if grep -q '^export {KNOB}=false$' {script}; then echo fast; exit 0; fi\n"
                     "echo slow; exit 1\n")
    check.chmod(0o755)
    return root, script, r.json()["id"], check


def snapshot(root, script) -> tuple[bytes, bytes]:
    return script.read_bytes(), (root / "entries.jsonl").read_bytes()


def test_it_names_the_moved_default_offers_the_pin_and_the_pin_cures_it(upgraded, ledger):
    root, script, upgrade, check = upgraded
    start = snapshot(root, script)
    r = ledger("-C", root, "bisect", "--upgrade", upgrade, "--check", check, "--json")
    assert r.exit_code == 0, r.stderr
    rec = r.json()["record"]
    assert rec["conclusion"]["answer"] == "default" and rec["conclusion"]["knobs"] == [KNOB]
    assert rec["conclusion"]["text"].startswith(
        f"the moved default: {KNOB} (false -> true) in the upgrade sglang==0.5.20 -> "
        "sglang==0.5.23")
    assert len(rec["upgrade"]["moved"]) == len(rec["selection"]) >= 2
    assert snapshot(root, script) == start  # the temporary entries are gone, files as they were
    (pin,) = rec["conclusion"]["suggest"]
    assert pin.startswith(f"ledger record knob decode {KNOB}=false --class perf --title ")
    assert subprocess.run([str(check)], capture_output=True).returncode == 1
    r = subprocess.run(["bash", "-c", pin.replace("ledger ", f"{ledger_bin()} -C {root} ", 1)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(check)], capture_output=True).returncode == 0
    assert f"export {KNOB}=false" in script.read_text()


def ledger_bin() -> str:
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} -m ledger.cli"


def test_a_regression_every_pin_leaves_is_the_release_itself(upgraded, ledger):
    root, script, upgrade, _ = upgraded
    start = snapshot(root, script)
    r = ledger("-C", root, "bisect", "--upgrade", upgrade, "--check", "false")
    assert r.exit_code == 0, r.stderr
    assert "the release itself: on sglang==0.5.23 the check fails with all" in r.stdout
    assert f"ledger suspect {upgrade} --why" in r.stdout
    assert snapshot(root, script) == start


def test_what_is_no_upgrade_or_no_longer_applied_is_refused_and_nothing_changes(upgraded,
                                                                                ledger):
    root, script, upgrade, check = upgraded
    r = ledger("-C", root, "record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
               "--class", "perf", "--title", "queue 8", "--json")
    knob = r.json()["id"]
    start = snapshot(root, script)
    r = ledger("-C", root, "bisect", "--upgrade", knob, "--check", check)
    assert r.exit_code == 1 and f"entry {knob} is a knob entry, not an upgrade" in r.stderr
    r = ledger("-C", root, "bisect", "--upgrade", upgrade, knob, "--check", check)
    assert r.exit_code == 2 and "--upgrade ID selects the entries itself" in r.stderr
    assert snapshot(root, script) == start
    assert ledger("-C", root, "revert", upgrade).exit_code == 0
    r = ledger("-C", root, "bisect", "--upgrade", upgrade, "--check", check)
    assert r.exit_code == 1 and "the upgrade is reverted" in r.stderr


def test_dry_run_lists_the_moves_it_would_pin_back(upgraded, ledger):
    root, script, upgrade, check = upgraded
    start = snapshot(root, script)
    r = ledger("-C", root, "bisect", "--upgrade", upgrade, "--check", check, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert f"{KNOB} at sglang==0.5.23's default (true; false in sglang==0.5.20)" in r.stdout
    assert snapshot(root, script) == start


def test_killed_mid_search_the_next_command_removes_the_temporary_entries(upgraded, ledger,
                                                                          tmp_path):
    import os
    import sys

    root, script, upgrade, _ = upgraded
    start = snapshot(root, script)
    killer = tmp_path / "killer.sh"  # at the baseline probe (every default pinned back)
    killer.write_text('#!/bin/bash\n[ "$LEDGER_BISECT_STEP" = 2 ] && kill -KILL $PPID\n'
                      "sleep 1; exit 1\n")
    killer.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-m", "ledger.cli", "-C", str(root), "bisect", "--upgrade",
                    upgrade, "--check", str(killer)], env=env, capture_output=True, timeout=120)
    assert f"export {KNOB}=false" in script.read_text()  # killed with the pins in the file
    assert (root / ".ledger" / "bisect.json").exists()
    r = ledger("-C", root, "status")
    assert "had been interrupted: restored the configuration it started from" in r.stderr
    assert snapshot(root, script) == start  # the temporary entries went with the probe
