"""Bad input, drift, the writer lock, all-or-nothing and crash recovery."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ledger.store.txn import CRASH_POINTS
from ledger.store.txn import WriterLock
from ledger.store.workspace import Workspace


def record_ctas(ledger, story, value="512", *extra):
    return ledger(*story.args("record", "knob", "decode", f"SGLANG_SM120_MMA_TARGET_CTAS={value}",
                              "--class", "perf", "--title", "ctas", *extra))


def snapshot(story):
    """Everything a failed command must leave as it was."""
    return (story.script.read_bytes(), (story.root / "entries.jsonl").read_bytes(),
            subprocess.run(["git", "-C", str(story.root), "rev-parse", "HEAD"],
                           capture_output=True, text=True).stdout)


@pytest.mark.parametrize("assignment", ["A;rm=1", "1X=1", "A B=1", "=1", "K\x00=1"])
def test_bad_knob_names_are_refused(story, ledger, assignment):
    before = snapshot(story)
    r = ledger(*story.args("record", "knob", "decode", assignment, "--class", "perf", "--title", "t"))
    assert r.exit_code == 1
    assert r.stderr.startswith("error: ") and "knob name" in r.stderr
    assert snapshot(story) == before


@pytest.mark.parametrize("value,what", [("a\nb", "newline"), ("a\x00b", "NUL")])
def test_bad_values_are_refused(story, ledger, value, what):
    before = snapshot(story)
    r = ledger(*story.args("record", "knob", "decode", f"SGLANG_X={value}", "--class", "perf",
                           "--title", "t", "--no-validate"))
    assert r.exit_code == 1 and what in r.stderr
    assert snapshot(story) == before


@pytest.mark.parametrize("value", ["$(touch {p})", "`touch {p}`", "a'b\"c\\d", "ünï ☃ 🚀",
                                   "x; touch {p}", "${{HOME}}"])
def test_hostile_values_are_data(story, ledger, tmp_path, value):
    pwned = tmp_path / "pwned"
    value = value.format(p=pwned)
    r = ledger(*story.args("record", "knob", "decode", f"SGLANG_SOME_VALUE={value}",
                           "--class", "bugfix", "--title", "hostile", "--no-validate"))
    assert r.exit_code == 0, r.stderr
    head = story.script.read_text().split("\nexec ", 1)[0]
    out = subprocess.run(["bash", "-c", head + '\nprintf %s "$SGLANG_SOME_VALUE"'],
                         capture_output=True, text=True)
    assert out.stdout == value
    assert not pwned.exists()


def test_unknown_or_ambiguous_ids(story, ledger):
    assert record_ctas(ledger, story).exit_code == 0
    r = ledger(*story.args("revert", "deadbeef"))
    assert r.exit_code == 1 and "no entry matches 'deadbeef'" in r.stderr
    r = ledger(*story.args("revert", ""))
    assert r.exit_code == 1


def test_missing_target_file_and_symlink(story, ledger, tmp_path):
    r = ledger(*story.args("target", "add", "x", tmp_path / "nope.sh", "--format", "bash"))
    assert r.exit_code == 1 and "nope.sh" in r.stderr and "does not exist" in r.stderr
    link = tmp_path / "link.sh"
    link.symlink_to(story.script)
    r = ledger(*story.args("target", "add", "y", link, "--format", "bash"))
    assert r.exit_code == 1 and "symlink" in r.stderr


def test_malformed_ledger_yaml_names_file_and_line(story, ledger):
    cfg = story.root / "ledger.yaml"
    cfg.write_text(cfg.read_text() + "targets: [unclosed\n")
    r = ledger(*story.args("list"))
    assert r.exit_code == 1
    assert "ledger.yaml:" in r.stderr and "Traceback" not in r.stderr


def test_malformed_entry_file_names_file_and_line(story, ledger):
    assert record_ctas(ledger, story).exit_code == 0
    assert ledger(*story.args("record", "knob", "decode", "SGLANG_X=1", "--class", "bugfix",
                              "--title", "x", "--no-validate")).exit_code == 0
    entries = story.root / "entries.jsonl"
    lines = entries.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"seq":', '"seq" ', 1)
    entries.write_text("".join(lines))
    r = ledger(*story.args("status"))
    assert r.exit_code == 1
    assert f"{entries}:2:" in r.stderr and "not valid JSON" in r.stderr


def test_drift_is_refused_with_file_knob_expected_found(story, ledger):
    assert record_ctas(ledger, story).exit_code == 0
    story.script.write_text(story.script.read_text().replace("CTAS=512", "CTAS=1024"))
    hand_edited = snapshot(story)
    st = ledger(*story.args("status", "--json")).json()
    assert st["drift"] == [{"path": str(story.script), "knob": "SGLANG_SM120_MMA_TARGET_CTAS",
                            "expected": "512", "found": "1024"}]
    r = ledger(*story.args("revert", "--perf-only"))
    assert r.exit_code == 1
    assert str(story.script) in r.stderr and "expected '512', found '1024'" in r.stderr
    assert snapshot(story) == hand_edited
    r = ledger(*story.args("revert", "--perf-only", "--force"))
    assert r.exit_code == 0
    assert "SGLANG_SM120_MMA_TARGET_CTAS=256" in story.script.read_text()


def test_second_writer_fails_fast(story, ledger):
    ws = Workspace(story.root)
    with WriterLock(ws, "revert --perf-only"):
        r = record_ctas(ledger, story)
    assert r.exit_code == 1 and "another ledger command" in r.stderr
    assert "revert --perf-only" in r.stderr


def test_readers_work_while_a_writer_holds_the_lock(story, ledger):
    assert record_ctas(ledger, story).exit_code == 0
    ws = Workspace(story.root)
    with WriterLock(ws, "revert --perf-only"):
        (story.root / ".ledger" / "intent.json").write_text("{}")  # as a running writer has it
        r = ledger(*story.args("status"))
        assert r.exit_code == 0 and "changing this workspace right now" in r.stderr
        assert record_ctas(ledger, story, "1024").exit_code == 1
    (story.root / ".ledger" / "intent.json").unlink()


def test_dry_run_changes_nothing(story, ledger):
    before = snapshot(story)
    r = record_ctas(ledger, story, "512", "--dry-run")
    assert r.exit_code == 0 and "+export SGLANG_SM120_MMA_TARGET_CTAS=512" in r.stdout
    assert snapshot(story) == before


def test_adopt_records_a_hand_edit(story, ledger):
    story.script.write_text(story.script.read_text().replace("QUEUE_SIZE=4", "QUEUE_SIZE=8"))
    edited = story.script.read_bytes()
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                           "--class", "perf", "--title", "queue 8", "--adopt", "--before", "4",
                           "--json"))
    assert r.exit_code == 0, r.stderr
    assert r.json()["before"] == "4"
    assert story.script.read_bytes() == edited
    assert ledger(*story.args("revert", "queue-8")).exit_code == 0
    assert "QUEUE_SIZE=4" in story.script.read_text()


def test_unset_and_restore(story, ledger):
    start = story.script.read_bytes()
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE",
                           "--unset", "--class", "perf", "--title", "default queue"))
    assert r.exit_code == 0, r.stderr
    assert "QUEUE_SIZE" not in story.script.read_text()
    assert ledger(*story.args("revert", "default-queue")).exit_code == 0
    assert story.script.read_bytes() == start


def _run_cli(story, *args, env=None):
    return subprocess.run([sys.executable, "-m", "ledger.cli", "-C", str(story.root), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_killed_command_is_rolled_back_by_the_next_one(story, ledger, point):
    assert record_ctas(ledger, story).exit_code == 0
    before = snapshot(story)
    r = _run_cli(story, "revert", "--perf-only", "--why", "crash test",
                 env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9
    assert (story.root / ".ledger" / "intent.json").exists()
    r = _run_cli(story, "status")
    assert r.returncode == 0, r.stderr
    assert "note:" in r.stderr
    assert not (story.root / ".ledger" / "intent.json").exists()
    if point == "after-commit":
        assert "had completed" in r.stderr
        assert "SGLANG_SM120_MMA_TARGET_CTAS=256" in story.script.read_text()
    else:
        assert "rolled back" in r.stderr
        assert snapshot(story) == before
    assert ledger(*story.args("status", "--json")).json()["clean"]


def test_a_vanished_target_is_reported_and_refused(story, ledger):
    assert record_ctas(ledger, story).exit_code == 0
    story.script.rename(story.script.with_suffix(".moved"))
    r = ledger(*story.args("status"))
    assert "UNREADABLE" in r.stdout and f"{story.script}: does not exist" in r.stderr
    r = ledger(*story.args("revert", "--perf-only"))
    assert r.exit_code == 1 and f"error: {story.script}: does not exist" in r.stderr
    assert not story.script.exists()
