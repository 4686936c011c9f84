"""`ledger bisect` end to end with fast, real checks: small python scripts reading the target.

The check is a real process (an argv run without a shell), the toggles real transactions
on a real dotenv file and a real git workspace; only the failure is synthetic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.store.txn import WriterLock
from ledger.store.workspace import Workspace

CHECK = """\
import os, sys
path, counter, mode = sys.argv[1], sys.argv[2], sys.argv[3]
needed = sys.argv[4:]
vals = dict(l.strip().split("=", 1) for l in open(path) if "=" in l)
print("live:", " ".join(f"{k}={v}" for k, v in sorted(vals.items())))
with open(counter, "a") as f:
    f.write("x")
runs = os.path.getsize(counter)
if mode == "outside":
    sys.exit(3)                      # fails whatever the ledger does
bad = all(vals.get(k) == "1" for k in needed)
if mode == "flaky":                  # the culprit fails 1 run in 3
    bad = bad and runs % 3 == 0
sys.exit(1 if bad else 0)
"""


class Bench:
    def __init__(self, tmp_path: Path, ledger, n: int = 8) -> None:
        self.tmp = tmp_path
        self.ledger = ledger
        self.env_file = tmp_path / "app.env"
        self.env_file.write_text("# app settings\nA=0\n")
        self.root = tmp_path / "ws"
        self.script = tmp_path / "check.py"
        self.script.write_text(CHECK)
        self.counter = tmp_path / "runs"
        assert ledger("init", self.root, "--root", f"tmp={tmp_path}").exit_code == 0
        assert self.run("target", "add", "app", self.env_file, "--format", "dotenv").exit_code == 0
        self.ids = []
        for i in range(n):
            r = self.run("record", "knob", "app", f"K{i}=1", "--class", "perf",
                         "--title", f"set K{i}", "--json")
            assert r.exit_code == 0, r.stderr
            self.ids.append(r.json()["id"])

    def run(self, *args):
        return self.ledger("-C", self.root, *args)

    def check(self, mode: str, *knobs: str) -> str:
        return " ".join([sys.executable, str(self.script), str(self.env_file), str(self.counter),
                         mode, *knobs])

    def snapshot(self) -> tuple[bytes, bytes]:
        return self.env_file.read_bytes(), (self.root / "entries.jsonl").read_bytes()

    def commits(self) -> list[str]:
        out = subprocess.run(["git", "-C", str(self.root), "log", "--format=%s"],
                             capture_output=True, text=True, check=True).stdout
        return out.splitlines()

    def bisect(self, *args):
        r = self.run("bisect", *args, "--json")
        assert r.exit_code == 0, r.stderr
        return r.json()


@pytest.fixture
def bench(tmp_path, ledger):
    return Bench(tmp_path, ledger)


def test_one_culprit_is_found_and_the_workspace_ends_where_it_started(bench):
    start = bench.snapshot()
    out = bench.bisect("--class", "perf", "--check", bench.check("plain", "K5"))
    c = out["record"]["conclusion"]
    assert c["kind"] == "culprit" and c["entries"] == [bench.ids[5]]
    assert len(out["record"]["steps"]) <= out["max_checks"]
    assert bench.snapshot() == start
    # The record is committed, one commit per toggle plus the restore.
    record = json.loads((bench.root / "bisect" / out["id"] / "record.json").read_text())
    assert record["status"] == "concluded" and record["conclusion"] == c
    step = record["steps"][0]
    assert step["purpose"] == "confirm" and step["verdict"] == "bad"
    assert step["runs"][0]["exit"] == 1 and step["runs"][0]["tail"][-1].startswith("live: ")
    assert "K5=1" in step["runs"][0]["tail"][-1]
    assert bench.commits()[0].startswith(f"bisect {out['id']}: one culprit: {bench.ids[5]}")
    assert sum(s.startswith(f"bisect {out['id']} step") for s in bench.commits()) >= 3
    assert not (bench.root / ".ledger" / "bisect.json").exists()
    # show links the entry to the bisect, and says what it was found to be.
    shown = bench.run("show", bench.ids[5], "--json").json()
    assert shown["bisects"][0]["id"] == out["id"] and shown["bisects"][0]["role"] == "culprit"
    assert bench.run("show", bench.ids[0], "--json").json()["bisects"][0]["role"] == \
        "not needed for the failure"
    text = bench.run("bisect", "--check", bench.check("plain", "K5"), "--class", "perf")
    assert f"ledger suspect {bench.ids[5]} --why" in text.stdout


def test_an_interacting_pair_is_reported_as_failing_only_together(bench):
    out = bench.bisect("--all-applied", "--check", bench.check("plain", "K2", "K6"))
    c = out["record"]["conclusion"]
    assert c["kind"] == "interaction" and c["entries"] == [bench.ids[2], bench.ids[6]]
    assert "fail only together" in c["text"]
    assert len(c["suggest"]) == 2


def test_not_in_these_entries_clears_the_suspects_with_the_bisect_as_reason(bench):
    ids = bench.ids
    assert bench.run("suspect", ids[3], "--why", "harness hangs").exit_code == 0
    start = bench.snapshot()
    r = bench.run("bisect", "--class", "perf", "--check", bench.check("outside"))
    assert r.exit_code == 0, r.stderr
    assert "not in these entries" in r.stdout and f"ledger clear {ids[3]}" in r.stdout
    assert bench.snapshot() == start  # not cleared without --clear-suspects
    out = bench.bisect("--class", "perf", "--check", bench.check("outside"), "--clear-suspects")
    assert out["record"]["conclusion"]["kind"] == "not-in-entries"
    assert len(out["record"]["steps"]) == 2 and out["cleared"] == [ids[3]]
    # Step 1 re-applied the suspect to confirm; the end put it back reverted, now cleared.
    assert out["record"]["steps"][0]["applied"] == ids
    entry = bench.run("show", ids[3], "--json").json()
    assert entry["display_state"] == "cleared" and out["id"] in entry["clear_why"]
    assert "persists with all 8 selected entries reverted" in entry["clear_why"]
    assert bench.env_file.read_bytes() == start[0]
    r = bench.run("restore", "--perf-only")
    assert r.exit_code == 0 and f"restored {ids[3]}" in r.stdout


def test_cannot_reproduce_changes_nothing(bench):
    start, commits = bench.snapshot(), bench.commits()
    out = bench.bisect("--class", "perf", "--check", bench.check("plain", "NOPE"))
    assert out["record"]["conclusion"]["kind"] == "cannot-reproduce"
    assert out["commit"] is None and len(out["record"]["steps"]) == 1
    assert bench.snapshot() == start and bench.commits() == commits
    assert not (bench.root / "bisect").exists()


def test_a_flaky_culprit_is_found_with_runs_and_a_confidence(bench):
    out = bench.bisect("--class", "perf", "--runs", "3",
                       "--check", bench.check("flaky", "K1"))
    c = out["record"]["conclusion"]
    assert c["kind"] == "culprit" and c["entries"] == [bench.ids[1]]
    conf = c["confidence"]
    assert conf["failure_rate"] == pytest.approx(1 / 3)
    assert 0 < conf["value"] < 0.95 and conf["runs_for_95"] > 3
    assert conf["flaky_steps"] and all(len(s["runs"]) == 3 for s in out["record"]["steps"])


def test_a_hanging_check_times_out_as_bad_and_its_children_die(bench, tmp_path):
    pidfile = tmp_path / "child.pid"
    hang = tmp_path / "hang.py"
    hang.write_text(f"""\
import subprocess, sys, time
vals = open({str(bench.env_file)!r}).read()
if "K4=1" in vals:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open({str(pidfile)!r}, "w").write(str(child.pid))
    time.sleep(60)
""")
    t0 = time.monotonic()
    out = bench.bisect("--class", "perf", "--timeout", "1", "--check",
                       f"{sys.executable} {hang}")
    assert time.monotonic() - t0 < 40
    c = out["record"]["conclusion"]
    assert c["kind"] == "culprit" and c["entries"] == [bench.ids[4]]
    first = out["record"]["steps"][0]["runs"][0]
    assert first["timed_out"] and first["exit"] is None
    assert not alive(int(pidfile.read_text()))


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that never comes in a container is dead)."""
    for _ in range(20):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


def test_the_check_is_an_argv_not_a_shell_line(bench):
    start = bench.snapshot()
    r = bench.run("bisect", "--class", "perf", "--check", "exit 1")
    assert r.exit_code == 1 and "cannot run the check" in r.stderr
    assert bench.snapshot() == start and not (bench.root / ".ledger" / "bisect.json").exists()
    out = bench.bisect("--class", "perf", "--shell", "--check",
                       f"{bench.check('plain', 'K7')} | cat; exit $(grep -c K7=1 {bench.env_file})")
    assert out["record"]["conclusion"]["entries"] == [bench.ids[7]]


def test_drift_a_lock_or_a_restart_without_support_refuse_to_start(bench):
    check = bench.check("plain", "K1")
    text = bench.env_file.read_text()
    bench.env_file.write_text(text.replace("K2=1", "K2=7"))
    r = bench.run("bisect", "--class", "perf", "--check", check)
    assert r.exit_code == 1 and "K2 expected '1', found '7'" in r.stderr
    bench.env_file.write_text(text)
    with WriterLock(Workspace(bench.root), "someone else"):
        r = bench.run("bisect", "--class", "perf", "--check", check)
    assert r.exit_code == 1 and "another ledger command" in r.stderr
    r = bench.run("bisect", "--class", "perf", "--check", check, "--restart")
    assert r.exit_code == 1 and "target app (no restart and no health)" in r.stderr
    assert not bench.counter.exists()  # the check never ran
    r = bench.run("bisect", "--check", check)
    assert r.exit_code == 2 and "exactly one" in r.stderr


SERVICE = """\
import shutil, sys
action, env_file, live_file, log = sys.argv[1:5]
if action == "restart":          # the "service" starts on what the file says now
    shutil.copyfile(env_file, live_file)
    with open(log, "a") as f:
        f.write("restart\\n")
    sys.exit(0)
vals = dict(l.strip().split("=", 1) for l in open(live_file) if "=" in l)
sys.exit(1 if vals.get(sys.argv[5]) == "1" else 0)   # health: down with this knob on
"""


def with_service(bench, breaks: str = "NONE") -> tuple[Path, Path]:
    """A restart hook copying the env file to a "live" file, a health check that fails
    while knob ``breaks`` is on in it; the service started on the current file."""
    service, live, log = bench.tmp / "service.py", bench.tmp / "live.env", bench.tmp / "log"
    service.write_text(SERVICE)
    args = [sys.executable, str(service)]
    files = [str(bench.env_file), str(live), str(log)]
    r = bench.run("target", "set", "app",
                  "--restart", " ".join([*args, "restart", *files]),
                  "--health-command", " ".join([*args, "health", *files, breaks]),
                  "--health-timeout", "5")
    assert r.exit_code == 0, r.stderr
    subprocess.run([*args, "restart", *files], check=True)
    log.write_text("")
    return live, log


def test_restart_makes_each_configuration_live_before_the_check(bench):
    live, log = with_service(bench)
    start = bench.snapshot()
    # The check reads what the service runs, not the file: only restarts make toggles seen.
    check = bench.check("plain", "K5").replace(str(bench.env_file), str(live))
    out = bench.bisect("--class", "perf", "--check", check, "--restart")
    record = out["record"]
    assert record["conclusion"]["kind"] == "culprit"
    assert record["conclusion"]["entries"] == [bench.ids[5]]
    toggles = [st for st in record["steps"] if st["commit"]]
    assert toggles and all(st["restart"]["ok"] for st in toggles)
    assert all(st["restart"]["steps"][0]["health"]["ok"] for st in toggles)
    # One restart per toggle, then one more on the starting configuration.
    assert log.read_text().count("restart") == len(toggles) + 1
    assert out["final_restart"]["ok"] and bench.snapshot() == start
    assert live.read_bytes() == bench.env_file.read_bytes()


def test_a_configuration_whose_service_is_not_healthy_is_bad_without_the_check(bench):
    live, log = with_service(bench, breaks="K2")
    # The check fails on K4 (a later entry); the service does not even come up with K2:
    # the search meets K2 first and ends on it, failing "alone" by its health check.
    check = bench.check("plain", "K4").replace(str(bench.env_file), str(live))
    out = bench.bisect("--class", "perf", "--check", check, "--restart")
    record = out["record"]
    assert record["conclusion"]["entries"] == [bench.ids[2]]
    down = [st for st in record["steps"] if st.get("restart_failed")]
    assert down and all(st["verdict"] == "bad" and st["runs"] == [] for st in down)
    assert all(bench.ids[2] in st["applied"] for st in down)
    assert "health" in down[0]["restart_failed"]
    # The start has K2 on: back on it, the service is as unhealthy as it was, and says so.
    assert not out["final_restart"]["ok"]
    r = bench.run("bisect", "show", out["id"])
    assert r.exit_code == 0 and "restart failed" in r.stdout


def test_dry_run_changes_and_runs_nothing(bench):
    start, commits = bench.snapshot(), bench.commits()
    r = bench.run("bisect", "--class", "perf", "--check", bench.check("plain", "K1"), "--dry-run")
    assert r.exit_code == 0 and "would bisect over 8 entries" in r.stdout
    assert bench.snapshot() == start and bench.commits() == commits
    assert not bench.counter.exists()


def test_keep_result_ends_with_the_culprit_reverted_as_a_recorded_command(bench):
    out = bench.bisect("--class", "perf", "--check", bench.check("plain", "K0"), "--keep-result")
    assert out["kept"] == [bench.ids[0]]
    entry = bench.run("show", bench.ids[0], "--json").json()
    assert entry["state"] == "reverted" and entry["history"][-1]["action"] == "revert"
    assert out["id"] in entry["history"][-1]["why"]
    assert "K0=1" not in bench.env_file.read_text()


def _ledger_argv(bench, *args) -> list[str]:
    return [sys.executable, "-m", "ledger.cli", "-C", str(bench.root), *args]


KILLER = """\
import os, signal, sys
if os.environ.get("LEDGER_BISECT_STEP") == "3":
    os.kill(os.getppid(), getattr(signal, sys.argv[1]))
    import time; time.sleep(30)
sys.exit(1 if "K6=1" in open(sys.argv[2]).read() else 0)
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_bisect_killed_mid_search_is_rolled_back(bench, tmp_path, how):
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    start = bench.snapshot()
    proc = subprocess.run(_ledger_argv(bench, "bisect", "--class", "perf", "--check",
                                       f"{sys.executable} {killer} {how} {bench.env_file}"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    if how == "SIGKILL":
        # Killed after step 2's toggle: the configuration is a probe's, with its record.
        assert bench.snapshot() != start
        marker = json.loads((bench.root / ".ledger" / "bisect.json").read_text())
        head = bench.commits()[0]
        assert head.startswith(f"bisect {marker['id']} step 3")
        r = bench.run("status")
        assert "had been interrupted: restored the configuration it started from" in r.stderr
    bid = next((bench.root / "bisect").iterdir()).name
    assert bench.snapshot() == start
    assert not (bench.root / ".ledger" / "bisect.json").exists()
    record = json.loads((bench.root / "bisect" / bid / "record.json").read_text())
    assert record["status"] == "interrupted" and len(record["steps"]) == 3
    assert record["steps"][1]["verdict"] == "good"


def killed_bisect(bench, tmp_path) -> tuple[bytes, bytes]:
    """A bisect SIGKILLed at its third check; the snapshot of where it started."""
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    start = bench.snapshot()
    subprocess.run(_ledger_argv(bench, "bisect", "--class", "perf", "--check",
                                f"{sys.executable} {killer} SIGKILL {bench.env_file}"),
                   capture_output=True, timeout=120)
    assert bench.snapshot() != start
    return start


def test_bisect_reset_restores_a_killed_bisect(bench, tmp_path):
    start = killed_bisect(bench, tmp_path)
    r = bench.run("bisect", "--class", "perf", "--check", "true")
    assert "had been interrupted" in r.stderr  # any command finishes it first...
    assert bench.snapshot() == start
    killed_bisect(bench, tmp_path)
    r = bench.run("bisect", "reset")            # ... and `bisect reset` says what it did
    assert r.exit_code == 0 and "restored the configuration it started from" in r.stdout
    assert bench.snapshot() == start
    assert "nothing to reset" in bench.run("bisect", "reset").stdout
    shown = bench.run("bisect", "show").stdout
    lines = [line for line in shown.splitlines() if "  interrupted  no conclusion" in line]
    assert len(lines) == 2, shown


def test_render_shows_the_timeline(bench, tmp_path):
    out = bench.bisect("--class", "perf", "--check", bench.check("plain", "K3"))
    assert bench.run("render", "--out", tmp_path / "docs").exit_code == 0
    page = (tmp_path / "docs" / "entries" / f"{bench.ids[3]}.md").read_text()
    assert f"### Bisect `{out['id']}`" in page and "This entry: culprit." in page
    assert "| 1 | confirm | applied | 8 of 8 | **bad** |" in page
    html = (tmp_path / "docs" / "index.html").read_text()
    assert f'id="bisect-{out["id"]}"' in html and "step 2 · baseline" in html


def test_a_culprit_patch_among_knobs_and_patches_and_the_engine_tree_follows(tmp_path, ledger):
    from ledger.commands.demo import prepare
    from tests.cli.test_patch_story import git
    from tests.cli.test_patch_story import record_all

    d = prepare(tmp_path / "demo")
    a = ["-C", str(d.workspace)]
    script = d.root / "deploy" / "serve_decode.sh"
    assert ledger(*a, "target", "add", "decode", script, "--format", "bash").exit_code == 0
    ids = record_all(ledger, d, a)
    repo = d.root / "engine-repo"
    head, serve = git(repo, "rev-parse", "HEAD"), script.read_bytes()
    attention = repo / "engine" / "model" / "attention_ops.py"
    check = tmp_path / "check.py"
    check.write_text(f"import sys\nsys.exit('MIN_SPLIT_TOKENS = 64' in open({str(attention)!r}).read())\n")
    r = ledger(*a, "bisect", "--all-applied", "--check", f"{sys.executable} {check}", "--json")
    assert r.exit_code == 0, r.stderr
    record = r.json()["record"]
    assert record["conclusion"]["entries"] == [ids["perf_patch"]]
    # The probes really toggled the patch: the baseline ran without it.
    assert ids["perf_patch"] not in record["steps"][1]["applied"]
    assert record["steps"][1]["verdict"] == "good"
    assert git(repo, "rev-parse", "HEAD") == head and not git(repo, "status", "--porcelain")
    assert script.read_bytes() == serve


def test_doctor_names_a_killed_bisect_and_repair_puts_its_start_back(bench, tmp_path):
    start = killed_bisect(bench, tmp_path)
    r = bench.run("doctor")
    assert r.exit_code == 1
    assert "bisect" in r.stdout and "interrupted mid-search" in r.stdout
    assert "expected" not in r.stdout  # mid-bisect files are no drift: checked after it
    r = bench.run("doctor", "--repair")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert bench.snapshot() == start
    assert not (bench.root / ".ledger" / "bisect.json").exists()


def test_doctor_names_a_killed_restart_and_repair_rolls_it_back(bench):
    with_service(bench)
    start = bench.snapshot()
    proc = subprocess.run(_ledger_argv(bench, "record", "knob", "app", "K9=1", "--class",
                                       "perf", "--title", "k9", "--restart"),
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LEDGER_CRASH_AT": "before-restart"})
    assert proc.returncode == -9 and "K9=1" in bench.env_file.read_text()
    r = bench.run("doctor")
    assert r.exit_code == 1 and "interrupted before its health check passed" in r.stdout
    r = bench.run("doctor", "--repair")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert bench.env_file.read_bytes() == start[0]
    assert not (bench.root / ".ledger" / "restart.json").exists()
    (entry,) = [e for e in bench.run("list", "--json").json() if e["title"] == "k9"]
    assert entry["state"] == "reverted"
