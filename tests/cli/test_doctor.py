"""`ledger doctor`: finds each condition made by hand, repairs the safe ones, touches
nothing else (issue 12)."""

from __future__ import annotations

import json
import os

import pytest

from tests.store.kit import CTAS
from tests.store.kit import git
from tests.store.kit import git_locks
from tests.store.kit import ledger_temps
from tests.store.kit import run_cli
from tests.store.kit import tree
from tests.store.kit import with_ctas_512


@pytest.fixture
def ws(story, ledger):
    return with_ctas_512(story, ledger)


def doctor(story, *args):
    r = run_cli(story.root, "doctor", "--json", *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def checks(report) -> set[tuple[str, str]]:
    return {(f["check"], os.path.basename(f["path"].split(":")[0])) for f in report["findings"]}


def test_a_healthy_workspace(ws):
    code, report = doctor(ws)
    assert code == 0 and report["ok"] and report["findings"] == []
    r = run_cli(ws.root, "doctor")
    assert r.returncode == 0 and "no problems found" in r.stdout


def make_locks(story):
    for name in ("HEAD.lock", "index.lock", "refs/heads/main.lock"):
        (story.root / ".git" / name).write_text("")


def make_temps(story):
    (story.script.parent / f".ledger-tmp-0a1b2c3d4e5f-{story.script.name}").write_text("x")
    (story.script.parent / f".{story.script.name}.ab12cd34.tmp").write_text("x")
    (story.root / ".ledger-tmp-0a1b2c3d4e5f-entries.jsonl").write_text("x")
    (story.root / ".ledger" / ".ledger-tmp-0a1b2c3d4e5f-intent.json").write_text("x")


def make_interrupted(story, point="after-targets"):
    r = run_cli(story.root, "revert", "--perf-only", env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9


def make_damaged_intent(story):
    (story.root / ".ledger" / "intent.json").write_text('{"targets": 5}')


def make_outside_intent(story):
    make_interrupted(story, "after-intent")
    path = story.root / ".ledger" / "intent.json"
    intent = json.loads(path.read_text())
    intent["ledger_files"].append({"path": "../victim.txt", "existed": False})
    path.write_text(json.dumps(intent))


def make_bad_manifest(story):
    d = story.root / ".ledger" / "backups" / "20200101T000000Z-0001"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text("[")


CONDITIONS = {
    "git-locks": (make_locks, {("git-lock", "HEAD.lock"), ("git-lock", "index.lock"),
                               ("git-lock", "main.lock")}),
    "temps": (make_temps, {("temp", ".ledger-tmp-0a1b2c3d4e5f-serve_decode.sh"),
                           ("temp", ".serve_decode.sh.ab12cd34.tmp"),
                           ("temp", ".ledger-tmp-0a1b2c3d4e5f-entries.jsonl"),
                           ("temp", ".ledger-tmp-0a1b2c3d4e5f-intent.json")}),
    "interrupted": (make_interrupted, {("intent", "intent.json")}),
    "damaged-intent": (make_damaged_intent, {("intent", "intent.json")}),
    "outside-intent": (make_outside_intent, {("intent", "intent.json")}),
    "bad-manifest": (make_bad_manifest, {("backup", "manifest.json")}),
}


@pytest.mark.parametrize("condition", list(CONDITIONS))
def test_doctor_finds_and_repairs(ws, condition):
    make, expected = CONDITIONS[condition]
    good_script = ws.script.read_bytes()
    victim = ws.root.parent / "victim.txt"
    victim.write_text("keep\n")
    make(ws)
    code, report = doctor(ws)
    assert code == 1 and expected <= checks(report), report
    assert all(f["repair"] for f in report["findings"]), report
    picture = tree(ws.root, ws.script)
    code, dry = doctor(ws, "--repair", "--dry-run")
    assert code == 1 and dry["repaired"] and all(r.startswith("would ") for r in dry["repaired"])
    assert tree(ws.root, ws.script) == picture  # a dry run changes nothing
    code, after = doctor(ws, "--repair")
    assert code == 0 and after["ok"], after
    assert len(after["repaired"]) >= len(expected)
    assert ws.script.read_bytes() == good_script and victim.read_text() == "keep\n"
    assert git_locks(ws.root) == [] and git(ws.root, "status", "--porcelain") == ""
    assert ledger_temps(ws.root, ws.script.parent) == []
    assert run_cli(ws.root, "revert", "--perf-only").returncode == 0  # writes work again


def test_doctor_reports_what_it_must_not_repair(ws, ledger):
    entries = ws.root / "entries.jsonl"
    line = json.loads(entries.read_text())
    dup = dict(line, seq=2)
    bad = dict(line, id="feedbeef", seq="@@")
    entries.write_text("\n".join([json.dumps(line), json.dumps(dup),
                                  json.dumps(bad).replace('"@@"', "1e400")]) + "\n")
    ws.script.write_text(ws.script.read_text().replace(f"{CTAS}=512", f"{CTAS}=1024"))
    blob_dir = ws.root / ".ledger" / "backups" / "objects"
    blob = next(blob_dir.iterdir())
    blob.write_bytes(blob.read_bytes() + b"#")
    evidence = ws.root / "evidence" / line["id"] / "20260101T000000Z-abcd"
    evidence.mkdir(parents=True)
    (evidence / "summary.yaml").write_text("[" * 1500)
    picture = tree(ws.root, ws.script)
    code, report = doctor(ws)
    assert code == 1
    problems = " | ".join(f["problem"] for f in report["findings"])
    assert f"id {line['id']} is also used on line 1" in problems
    assert "'seq' must be a whole number" in problems
    assert "does not match its hash" in problems
    assert "expected '512', found '1024'" in problems
    by_check = {f["check"] for f in report["findings"]}
    assert {"entries", "backup", "target", "evidence"} <= by_check
    code, after = doctor(ws, "--repair")
    assert code == 1  # entries, drift, evidence, the lost backup copy stay for the operator
    assert {f["check"] for f in after["findings"]} == {"entries", "target", "evidence", "git",
                                                      "backup"}
    assert "is missing" in " ".join(f["problem"] for f in after["findings"]
                                    if f["check"] == "backup")
    assert ws.script.read_text().count(f"{CTAS}=1024") == 1
    assert entries.read_bytes() == picture[str(entries)]
    assert (blob_dir / (blob.name + ".damaged")).exists()


def test_doctor_checks_patch_checksums(tmp_path, ledger):
    from ledger.commands.demo import prepare

    d = prepare(tmp_path / "demo")
    r = ledger("-C", d.workspace, "record", "patch", d.root / "patches" / "perf.patch",
               "--class", "perf", "--title", "split-K", "--json")
    assert r.exit_code == 0, r.stderr
    stored = d.workspace / r.json()["patch"]
    stored.write_text(stored.read_text() + "\n")
    result = run_cli(d.workspace, "doctor")
    assert result.returncode == 1 and "does not match its sha256" in result.stdout
    assert "Traceback" not in result.stderr
