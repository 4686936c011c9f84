"""The proxy revelation, end to end on a bash serve script (issue 2's "Done when")."""

from __future__ import annotations

import subprocess


def live_value(script, knob: str) -> str:
    """What the launched server would see: source the script's exports in real bash."""
    text = script.read_text()
    head = text.split("\nexec ", 1)[0]
    out = subprocess.run(["bash", "-c", head + f'\nprintf %s "${{{knob}-<unset>}}"'],
                         capture_output=True, text=True, check=True)
    return out.stdout


def test_proxy_revelation_story(story, ledger, git_log):
    a = story.args
    r = ledger(*a("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class", "perf",
                  "--title", "TARGET_CTAS 512 for decode", "--why", "+12.8% decode tok/s @c64",
                  "--json"))
    assert r.exit_code == 0, r.stderr
    perf = r.json()["id"]
    r = ledger(*a("record", "knob", "decode", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30",
                  "--class", "bugfix", "--title", "bound the decode waiting queue", "--json"))
    assert r.exit_code == 0, r.stderr
    assert live_value(story.script, "SGLANG_SM120_MMA_TARGET_CTAS") == "512"
    assert live_value(story.script, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT") == "30"
    before_suspect = story.script.read_bytes()
    bugfix_line = "export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30\n"
    assert bugfix_line in before_suspect.decode()

    r = ledger(*a("suspect", perf, "--why", "harness hangs after several rounds"))
    assert r.exit_code == 0, r.stderr
    assert live_value(story.script, "SGLANG_SM120_MMA_TARGET_CTAS") == "256"
    assert bugfix_line in story.script.read_text()

    r = ledger(*a("diff"))
    assert r.exit_code == 0
    assert "off the table: 1 reverted entry" in r.stdout
    assert "harness hangs after several rounds" in r.stdout
    assert "TARGET_CTAS 512 for decode" in r.stdout
    assert "bound the decode waiting queue" not in r.stdout
    assert ledger(*a("diff", "--exit-code")).exit_code == 3

    # Suspects are held back until cleared.
    r = ledger(*a("restore", "--perf-only"))
    assert r.exit_code == 0 and "held back" in r.stdout
    assert live_value(story.script, "SGLANG_SM120_MMA_TARGET_CTAS") == "256"

    assert ledger(*a("clear", perf, "--why", "client proxy was the cause")).exit_code == 0
    r = ledger(*a("restore", "--perf-only"))
    assert r.exit_code == 0, r.stderr
    assert "restored" in r.stdout and "evidence: no evidence" in r.stdout
    assert story.script.read_bytes() == before_suspect
    assert ledger(*a("diff", "--exit-code")).exit_code == 0
    history = ledger(*a("show", perf, "--json")).json()["history"]
    assert history[-1]["action"] == "restore"
    assert history[-1]["why"] == "cleared: client proxy was the cause"

    subjects = git_log(story.root)
    assert subjects[0].startswith("restore 1 entry")
    assert any(s.startswith("clear 1 entry: client proxy") for s in subjects)
    assert any(s.startswith("suspect 1 entry: harness hangs") for s in subjects)


def test_bugfix_line_never_changes_through_perf_revert_and_restore(story, ledger):
    a = story.args
    ledger(*a("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class", "perf",
              "--title", "ctas"))
    ledger(*a("record", "knob", "decode", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30", "--class",
              "bugfix", "--title", "timeout"))
    start = story.script.read_bytes()
    r = ledger(*a("revert", "--perf-only", "--why", "suspect everything fast"))
    assert r.exit_code == 0, r.stderr
    lines = story.script.read_text().splitlines()
    assert "export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30" in lines
    assert "export SGLANG_SM120_MMA_TARGET_CTAS=256   # wave quantisation at c64: see ledger" in lines
    assert ledger(*a("restore", "--perf-only")).exit_code == 0
    assert story.script.read_bytes() == start
    assert story.script.stat().st_mode & 0o777 == 0o755
