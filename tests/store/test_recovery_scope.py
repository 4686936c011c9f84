"""Recovery touches only what it may, and one damaged record never blocks another
(issue 12, defects 3, 5 and 6)."""

from __future__ import annotations

import json
import subprocess

import pytest

from ledger.commands.session import open_session
from ledger.commands.setup import add_target
from tests.conftest import SERVE_DECODE
from tests.store.kit import assert_refused
from tests.store.kit import run_cli
from tests.store.kit import start_cli

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


def killed_revert(story, ledger, point="after-targets") -> dict:
    assert ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                              "--title", "ctas")).exit_code == 0
    r = run_cli(story.root, "revert", "--perf-only", env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9
    return json.loads((story.root / ".ledger" / "intent.json").read_text())


def test_a_corrupt_unrelated_manifest_does_not_block_recovery(story, ledger):
    intent = killed_revert(story, ledger)
    other = story.root / ".ledger" / "backups" / "20200101T000000Z-0001"
    other.mkdir()
    (other / "manifest.json").write_text('{"id": "x", "files": [')
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "rolled back" in r.stderr, r.stderr
    assert f"{CTAS}=512" in story.script.read_text()
    assert intent["backup"] and not (story.root / ".ledger" / "intent.json").exists()


@pytest.mark.parametrize("damage", ["outside-target", "dotdot-ledger-file", "absolute-ledger",
                                    "git-ledger-file", "foreign-temp", "foreign-engine",
                                    "dotdot-staged"])
def test_a_damaged_intent_never_deletes_outside_the_managed_set(story, ledger, tmp_path, damage):
    intent = killed_revert(story, ledger)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    (story.root.parent / "outside.txt").write_text("keep me too\n")
    if damage == "outside-target":
        intent["targets"].append({"path": str(victim), "before": None, "after": "0" * 64})
    elif damage == "dotdot-ledger-file":
        intent["ledger_files"].append({"path": "../outside.txt", "existed": False})
    elif damage == "absolute-ledger":
        intent["ledger_files"].append({"path": str(victim), "existed": False})
    elif damage == "git-ledger-file":
        intent["ledger_files"].append({"path": ".git/HEAD", "existed": False})
    elif damage == "foreign-temp":
        intent["temps"].append(str(victim))
    elif damage == "dotdot-staged":
        intent["staged"] = ["../outside.txt"]
    else:
        intent["engine"] = {"path": str(tmp_path), "head": "0" * 40}
    path = story.root / ".ledger" / "intent.json"
    path.write_text(json.dumps(intent))
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "refuses to touch it" in r.stderr and "ledger doctor" in r.stderr
    assert_refused(run_cli(story.root, "restore", "--perf-only"), "refuses to touch it")
    assert victim.read_text() == "keep me\n"
    assert (story.root.parent / "outside.txt").read_text() == "keep me too\n"
    assert (story.root / ".git" / "HEAD").exists() and path.exists()


def test_a_target_edited_by_hand_after_the_kill_is_left_alone(story, ledger):
    killed_revert(story, ledger)
    story.script.write_text(story.script.read_text() + "# edited after the crash\n")
    edited = story.script.read_bytes()
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "changed by hand since" in r.stderr
    assert story.script.read_bytes() == edited


def test_no_lost_update_between_sessions_opened_together(story, tmp_path):
    """The lost update, step by step: both commands read the config before either locks."""
    paths = []
    for name in ("prefill", "router"):
        p = tmp_path / f"{name}.sh"
        p.write_text(SERVE_DECODE)
        paths.append(p)
    first = open_session(str(story.root), "target add prefill")
    second = open_session(str(story.root), "target add router")
    add_target(first, "prefill", str(paths[0]), "bash", None, tmp_path, False)
    add_target(second, "router", str(paths[1]), "bash", None, tmp_path, False)
    text = (story.root / "ledger.yaml").read_text()
    assert "prefill:" in text and "router:" in text and "decode:" in text


def test_concurrent_target_adds_both_land_or_one_fails_cleanly(story, tmp_path):
    for rnd in range(4):
        procs = {}
        for name in (f"a{rnd}", f"b{rnd}"):
            p = tmp_path / f"{name}.sh"
            p.write_text(SERVE_DECODE)
            procs[name] = start_cli(story.root, "target", "add", name, p, "--format", "bash")
        text_of = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            text_of[name] = (proc.returncode, err.decode())
        config = (story.root / "ledger.yaml").read_text()
        for name, (code, err) in text_of.items():
            if code == 0:
                assert f"{name}:" in config, (name, config)
            else:
                assert code == 1 and "another ledger command" in err and "Traceback" not in err
        status = subprocess.run(["git", "-C", str(story.root), "status", "--porcelain"],
                                capture_output=True, text=True).stdout
        assert status == ""
