"""History the ledger did not see (issue 27): a tuning already reverted by hand, the
inversion trap (a hand revert recorded as a perf change), and real dates (--when)."""

from __future__ import annotations

import json
import subprocess

from tests.cli.test_story import live_value

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


def _head(root) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _entries(root) -> bytes:
    return (root / "entries.jsonl").read_bytes() if (root / "entries.jsonl").exists() else b""


def test_already_reverted_is_off_the_table_and_restore_claws_it_back(story, ledger):
    a = story.args
    start = story.script.read_bytes()
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "CTAS 512 for decode", "--why", "+12.8% decode tok/s @c64",
                  "--already-reverted", "--json"))
    assert r.exit_code == 0, r.stderr
    entry = r.json()
    assert entry["state"] == "reverted" and entry["before"] == "256" and entry["after"] == "512"
    assert entry["files"] == {} and entry["backup"] is None
    assert story.script.read_bytes() == start  # nothing written to the target

    r = ledger(*a("diff"))
    assert "off the table: 1 reverted entry" in r.stdout
    assert "CTAS 512 for decode" in r.stdout and "reverted by hand" in r.stdout
    assert ledger(*a("status", "--exit-code")).exit_code == 0  # the file is as expected

    r = ledger(*a("restore", "--perf-only"))
    assert r.exit_code == 0, r.stderr
    assert f"restored {entry['id']}" in r.stdout
    assert live_value(story.script, CTAS) == "512"
    # the value is edited in place: the line keeps its comment
    assert f"export {CTAS}=512   # wave quantisation at c64: see ledger\n" in story.script.read_text()
    assert ledger(*a("revert", "--perf-only")).exit_code == 0
    assert story.script.read_bytes() == start


def test_already_reverted_knob_the_file_lacks_comes_back_on_restore(story, ledger):
    a = story.args
    r = ledger(*a("record", "knob", "decode", "SGLANG_ENABLE_JIT_DEEPGEMM=1", "--class", "perf",
                  "--title", "jit deepgemm", "--already-reverted", "--json"))
    assert r.exit_code == 0, r.stderr
    assert r.json()["before"] is None
    assert live_value(story.script, "SGLANG_ENABLE_JIT_DEEPGEMM") == "<unset>"
    assert ledger(*a("restore", "--perf-only")).exit_code == 0
    assert live_value(story.script, "SGLANG_ENABLE_JIT_DEEPGEMM") == "1"


def test_already_reverted_as_a_suspect_is_held_until_cleared(story, ledger):
    a = story.args
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "ctas", "--already-reverted", "--suspected"))
    assert r.exit_code == 2 and "--reverted-why" in r.stderr
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "ctas", "--already-reverted", "--suspected", "--reverted-why",
                  "harness hangs after several rounds", "--json"))
    assert r.exit_code == 0, r.stderr
    eid = r.json()["id"]
    assert r.json()["suspicion"] == "suspected"
    r = ledger(*a("restore", "--perf-only"))
    assert "held back" in r.stdout and "harness hangs" in r.stdout
    assert live_value(story.script, CTAS) == "256"
    assert ledger(*a("clear", eid, "--why", "a client proxy")).exit_code == 0
    assert ledger(*a("restore", "--perf-only")).exit_code == 0
    assert live_value(story.script, CTAS) == "512"
    actions = [h["action"] for h in ledger(*a("show", eid, "--json")).json()["history"]]
    assert actions == ["adopt", "suspect", "clear", "restore"]


def test_already_reverted_refuses_a_value_the_file_holds_and_drift(story, ledger):
    a = story.args
    before = (_head(story.root), _entries(story.root))
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=256", "--class", "perf", "--title", "x",
                  "--already-reverted"))
    assert r.exit_code == 1 and "is '256' in the file now: it is not reverted" in r.stderr
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title", "x",
                  "--already-reverted", "--adopt", "--before", "1"))
    assert r.exit_code == 2
    assert (_head(story.root), _entries(story.root)) == before
    # the ledger expects 384; the file was edited by hand to 300: drift, refused
    assert ledger(*a("record", "knob", "decode", f"{CTAS}=384", "--class", "perf",
                     "--title", "384")).exit_code == 0
    story.script.write_text(story.script.read_text().replace("=384", "=300"))
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title", "x",
                  "--already-reverted"))
    assert r.exit_code == 1 and "300" in r.stderr and "384" in r.stderr


def test_adopt_unset_perf_is_refused_naming_already_reverted(story, ledger):
    """The trap of issue 27: this used to be accepted, after which diff said nothing was
    off the table and revert --perf-only would have added the knob back."""
    a = story.args
    story.script.write_text(story.script.read_text().replace(
        f"export {CTAS}=256   # wave quantisation at c64: see ledger\n", ""))
    start = story.script.read_bytes()
    before = (_head(story.root), _entries(story.root))
    r = ledger(*a("record", "knob", "decode", CTAS, "--unset", "--adopt", "--before", "512",
                  "--class", "perf", "--title", "CTAS revert"))
    assert r.exit_code == 1
    assert "removes SGLANG_SM120_MMA_TARGET_CTAS (it was '512')" in r.stderr
    assert (f"ledger record knob decode {CTAS}=512 --class perf --title 'CTAS revert' "
            "--already-reverted") in r.stderr
    assert "--not-a-revert" in r.stderr
    assert (_head(story.root), _entries(story.root)) == before
    assert story.script.read_bytes() == start

    # the command it names does the right thing
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "CTAS revert", "--already-reverted"))
    assert r.exit_code == 0, r.stderr
    assert "off the table: 1 reverted entry" in ledger(*a("diff")).stdout


def test_a_perf_removal_that_is_the_change_says_so_when_reverted(story, ledger):
    a = story.args
    story.script.write_text(story.script.read_text().replace(
        f"export {CTAS}=256   # wave quantisation at c64: see ledger\n", ""))
    r = ledger(*a("record", "knob", "decode", CTAS, "--unset", "--adopt", "--before", "512",
                  "--class", "perf", "--title", "drop the CTAS override", "--not-a-revert",
                  "--json"))
    assert r.exit_code == 0, r.stderr
    eid = r.json()["id"]
    r = ledger(*a("revert", "--perf-only", "--dry-run"))
    assert r.exit_code == 0
    assert (f"note: this revert ADDS {CTAS}=512 to decode ({eid} drop the CTAS override had "
            "removed it)") in r.stdout
    r = ledger(*a("revert", "--perf-only", "--json"))
    assert any("ADDS" in n for n in r.json()["notices"])
    assert live_value(story.script, CTAS) == "512"


def test_record_undoing_an_entry_is_refused_naming_revert(story, ledger):
    a = story.args
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "ctas 512", "--json"))
    eid = r.json()["id"]
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=256", "--class", "perf", "--title",
                  "back to 256"))
    assert r.exit_code == 1
    assert f"takes back {eid} (ctas 512: '256' -> '512')" in r.stderr
    assert f"ledger revert {eid}" in r.stderr
    assert live_value(story.script, CTAS) == "512"
    # a bugfix is not a perf claw-back: not refused
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=256", "--class", "bugfix", "--title",
                  "256 avoids a hang"))
    assert r.exit_code == 0, r.stderr


def test_adopt_back_to_the_default_is_refused(story, ledger):
    a = story.args
    story.script.write_text(story.script.read_text().replace(f"{CTAS}=256", f"{CTAS}=512"))
    assert ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--adopt", "--before-unset",
                     "--class", "perf", "--title", "ctas")).exit_code == 0
    story.script.write_text(story.script.read_text().replace(f"{CTAS}=512", f"{CTAS}=256"))
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=256", "--adopt", "--before", "512",
                  "--class", "perf", "--title", "ctas back"))
    assert r.exit_code == 1 and "sets SGLANG_SM120_MMA_TARGET_CTAS back to its default" in r.stderr
    eid = ledger(*a("list", "--json")).json()[0]["id"]
    assert f"record it as what it is: ledger revert {eid} --force" in r.stderr
    assert ledger(*a("revert", eid, "--force")).exit_code == 0
    assert "off the table: 1 reverted entry" in ledger(*a("diff")).stdout


def test_when_orders_history_and_log(story, ledger):
    a = story.args
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "ctas", "--already-reverted", "--when", "2026-12-01T14:14",
                  "--reverted-when", "20261202-1414", "--reverted-why", "hang", "--suspected",
                  "--json"))
    assert r.exit_code == 0, r.stderr
    eid = r.json()["id"]
    recorded = r.json()["recorded"]
    assert ledger(*a("clear", eid, "--why", "proxy", "--when", "2026-12-03 09:00")).exit_code == 0
    history = ledger(*a("show", eid, "--json")).json()["history"]
    assert [(h["action"], h.get("when")) for h in history] == [
        ("adopt", "2026-12-01T14:14:00Z"), ("suspect", "2026-12-02T14:14:00Z"),
        ("clear", "2026-12-03T09:00:00Z")]
    assert all(h["at"] >= recorded for h in history)  # the record times stay
    shown = ledger(*a("show", eid)).stdout
    assert "2026-12-02T14:14:00Z  suspect  hang" in shown and "(recorded " in shown
    assert "2026-12-02T14:14:00Z" in ledger(*a("diff")).stdout
    # a later command without --when sorts after; the backdated ones in date order
    assert ledger(*a("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                     "--class", "bugfix", "--title", "queue 8")).exit_code == 0
    log = ledger(*a("log", "--json")).json()
    subjects = [c["subject"].split(" ", 1)[0] for c in log]
    assert subjects[0] == "record" and "queue 8" in log[0]["subject"]
    dated = [c for c in log if c["when"]]
    assert [c["when"] for c in dated] == ["2026-12-03T09:00:00Z", "2026-12-01T14:14:00Z"]
    # the backdated commands sort below today's (init, target add), oldest last
    assert [c["subject"].split(" ", 1)[0] for c in log][-2:] == ["clear", "record"]
    text = ledger(*a("log")).stdout.splitlines()
    clear_line = next(line for line in text if "clear 1 entry" in line)
    assert clear_line.split()[1] == "2026-12-03T09:00:00Z" and "(recorded " in clear_line


def test_when_is_checked(story, ledger):
    a = story.args
    for bad, words in (("yesterday", "not a time"), ("2999-01-01", "is after now")):
        r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                      "--title", "x", "--when", bad))
        assert r.exit_code == 1 and words in r.stderr, r.stderr
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title", "x",
                  "--already-reverted", "--when", "2026-12-02", "--reverted-when", "2026-12-01"))
    assert r.exit_code == 2 and "before --when" in r.stderr
    assert live_value(story.script, CTAS) == "256"


def test_old_ledgers_without_real_dates_still_load(story, ledger):
    a = story.args
    r = ledger(*a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
                  "ctas", "--json"))
    line = json.loads((story.root / "entries.jsonl").read_text().splitlines()[0])
    assert all("when" not in h for h in line["history"])  # bytes as before
    assert ledger(*a("show", r.json()["id"])).exit_code == 0


def test_when_on_revert_and_suspect_orders_show_log_and_docs(story, ledger, tmp_path):
    a = story.args
    ids = {}
    for name, knob, when in (("ctas", f"{CTAS}=512", "2026-12-01T14:48"),
                             ("queue", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8", "2026-11-30")):
        r = ledger(*a("record", "knob", "decode", knob, "--class", "perf", "--title", name,
                      "--when", when, "--json"))
        assert r.exit_code == 0, r.stderr
        ids[name] = r.json()["id"]
    r = ledger(*a("revert", ids["ctas"], "--why", "hang", "--when", "2026-12-02T14:14"))
    assert r.exit_code == 0, r.stderr
    r = ledger(*a("suspect", ids["queue"], "--why", "queue?", "--when", "2026-12-03T08:00"))
    assert r.exit_code == 0, r.stderr
    hist = ledger(*a("show", ids["ctas"], "--json")).json()["history"]
    assert [(h["action"], h.get("when")) for h in hist] == [
        ("record", "2026-12-01T14:48:00Z"), ("revert", "2026-12-02T14:14:00Z")]
    dated = [(c["when"], c["subject"].split(" ", 1)[0]) for c in
             ledger(*a("log", "--json")).json() if c["when"]]
    assert dated == [("2026-12-03T08:00:00Z", "suspect"), ("2026-12-02T14:14:00Z", "revert"),
                     ("2026-12-01T14:48:00Z", "record"), ("2026-11-30T00:00:00Z", "record")]
    docs = tmp_path / "docs"
    assert ledger(*a("render", "--out", docs)).exit_code == 0
    md = (docs / "entries" / f"{ids['queue']}.md").read_text()
    assert "queue? (2026-12-03 08:00 UTC)" in md  # the card dates the suspicion
    history = md[md.index("## History"):]
    assert history.index("2026-11-30 00:00 UTC") < history.index("2026-12-03 08:00 UTC")
    r = ledger(*a("revert", ids["ctas"], "--when", "2999-01-01"))
    assert r.exit_code == 1 and "is after now" in r.stderr
