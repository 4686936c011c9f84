"""Drift messages that say what --force does, --force overwrites on the record, and
`ledger amend` (issue 29)."""

from __future__ import annotations

import subprocess


def _perf(ledger, story, value="512"):
    r = ledger(*story.args("record", "knob", "decode", f"SGLANG_SM120_MMA_TARGET_CTAS={value}",
                           "--class", "perf", "--title", "ctas", "--why", "wave dip at c64"))
    assert r.exit_code == 0, r.stderr
    return ledger(*story.args("list", "--json")).json()[-1]["id"]


def _edit(story, old: str, new: str) -> None:
    text = story.script.read_text()
    assert old in text
    story.script.write_text(text.replace(old, new))


def _head(story) -> str:
    return subprocess.run(["git", "-C", str(story.root), "log", "-1", "--format=%B"],
                          capture_output=True, text=True, check=True).stdout


def test_a_file_already_holding_what_the_restore_writes_is_only_marked(story, ledger):
    entry = _perf(ledger, story)
    assert ledger(*story.args("revert", entry, "--why", "incident")).exit_code == 0
    _edit(story, "TARGET_CTAS=256", "TARGET_CTAS=512")  # put back by hand
    before = story.script.read_bytes()
    r = ledger(*story.args("restore", entry))
    assert r.exit_code == 1
    assert "found '512' — already holds the value the restore writes: --force only marks it" \
        in r.stderr
    assert "--adopt" not in r.stderr and "overwrite" not in r.stderr
    r = ledger(*story.args("restore", entry, "--force"))
    assert r.exit_code == 0, r.stderr
    assert story.script.read_bytes() == before  # nothing in the file changed
    last = ledger(*story.args("show", entry, "--json")).json()["history"][-1]
    assert last["action"] == "restore" and "already held SGLANG_SM120_MMA_TARGET_CTAS='512'" \
        in last["why"]


def test_a_forced_overwrite_records_the_overwritten_value(story, ledger):
    entry = _perf(ledger, story)
    assert ledger(*story.args("revert", entry, "--why", "incident")).exit_code == 0
    _edit(story, "TARGET_CTAS=256", "TARGET_CTAS=384")  # a hand edit of another value
    r = ledger(*story.args("restore", entry))
    assert r.exit_code == 1
    assert "found '384' — --force overwrites it with '512'" in r.stderr
    # The way to keep it instead, as a command that can be typed.
    assert "`ledger record knob decode SGLANG_SM120_MMA_TARGET_CTAS=384 --adopt --before 256`" \
        in r.stderr
    assert ledger(*story.args("restore", entry, "--force")).exit_code == 0
    assert "export SGLANG_SM120_MMA_TARGET_CTAS=512" in story.script.read_text()
    note = "--force overwrote a hand edit: SGLANG_SM120_MMA_TARGET_CTAS was '384'"
    last = ledger(*story.args("show", entry, "--json")).json()["history"][-1]
    assert last["action"] == "restore" and note in last["why"]
    assert note in _head(story)


def test_drift_on_a_knob_the_command_leaves_alone_says_so(story, ledger):
    entry = _perf(ledger, story)
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                           "--class", "perf", "--title", "queue"))
    assert r.exit_code == 0, r.stderr
    _edit(story, "QUEUE_SIZE=8", "QUEUE_SIZE=16")
    r = ledger(*story.args("revert", entry, "--why", "x"))
    assert r.exit_code == 1
    assert "found '16' — the revert does not change this knob: --force leaves it as found" \
        in r.stderr
    assert ledger(*story.args("revert", entry, "--why", "x", "--force")).exit_code == 0
    assert "QUEUE_SIZE=16" in story.script.read_text()  # the hand edit stays
    assert "--force: left as found" in _head(story)


def test_amend_replaces_a_reason_and_history_keeps_the_old_text(story, ledger):
    entry = _perf(ledger, story)
    assert ledger(*story.args("suspect", entry, "--why", "hangz afer round 3")).exit_code == 0
    r = ledger(*story.args("amend", entry, "--why", "hangs after round 3"))
    assert r.exit_code == 0, r.stderr
    shown = ledger(*story.args("show", entry, "--json")).json()
    assert shown["suspect_why"] == "hangs after round 3"
    assert shown["why"] == "wave dip at c64"  # the record's reason is another one
    last = shown["history"][-1]
    assert last["action"] == "amend" and "'hangz afer round 3'" in last["why"]
    assert [a["action"] for a in shown["history"]] == ["record", "suspect", "amend"]
    assert _head(story).startswith("amend 1 entry: hangs after round 3")
    diff = ledger(*story.args("diff")).stdout
    assert "hangs after round 3" in diff and "hangz" not in diff
    r = ledger(*story.args("amend", entry, "--of", "record", "--why", "wave dip at c64, c96"))
    assert r.exit_code == 0 and ledger(*story.args("show", entry, "--json")).json()["why"] == \
        "wave dip at c64, c96"
    r = ledger(*story.args("amend", entry, "--of", "clear", "--why", "x"))
    assert r.exit_code == 1 and "has no clear to amend" in r.stderr
    r = ledger(*story.args("amend", entry, "--why", "  "))
    assert r.exit_code == 2


def test_a_forced_record_over_a_hand_edit_notes_the_value_it_overwrote(story, ledger):
    _perf(ledger, story)  # the ledger now expects 512
    _edit(story, "TARGET_CTAS=512", "TARGET_CTAS=384")
    args = ("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=1024", "--class", "perf",
            "--title", "ctas 1024")
    r = ledger(*story.args(*args))
    assert r.exit_code == 1 and "found '384' — --force overwrites it with '1024'" in r.stderr
    r = ledger(*story.args(*args, "--force", "--json"))
    assert r.exit_code == 0, r.stderr
    note = "--force overwrote a hand edit: SGLANG_SM120_MMA_TARGET_CTAS was '384'"
    new = r.json()["id"]
    shown = ledger(*story.args("show", new, "--json")).json()
    assert shown["before"] == "384" and note in shown["history"][-1]["why"]
    assert note in _head(story)
    assert "export SGLANG_SM120_MMA_TARGET_CTAS=1024" in story.script.read_text()


def test_amend_corrects_a_reverts_reason_and_a_later_revert_keeps_its_own(story, ledger):
    entry = _perf(ledger, story)
    assert ledger(*story.args("revert", "--perf-only", "--why", "incidnet 4711")).exit_code == 0
    r = ledger(*story.args("amend", entry, "--why", "incident 4711"))  # the latest: revert
    assert r.exit_code == 0, r.stderr
    diff = ledger(*story.args("diff")).stdout
    assert "incident 4711" in diff and "incidnet" not in diff
    shown = ledger(*story.args("show", entry, "--json")).json()
    assert shown["why"] == "wave dip at c64"
    assert [a["action"] for a in shown["history"]] == ["record", "revert", "amend"]
    assert shown["history"][1]["why"] == "incidnet 4711"  # history is never rewritten
    assert shown["history"][2]["why"] == "revert reason amended; it was: 'incidnet 4711'"
    assert _head(story).startswith("amend 1 entry: incident 4711")
    r = ledger(*story.args("amend", entry, "--of", "revert", "--why", "incident 4711"))
    assert r.exit_code == 1 and "already reads 'incident 4711'" in r.stderr
    # Restored and reverted again: that revert's own reason shows, not the amended one.
    assert ledger(*story.args("restore", entry)).exit_code == 0
    assert ledger(*story.args("revert", entry, "--why", "second look")).exit_code == 0
    diff = ledger(*story.args("diff")).stdout
    assert "second look" in diff and "incident 4711" not in diff
