"""`ledger adopt` (issue 27 item 3): entries proposed from the backup copies an operator
has, or from a deploy repo's commits, written as a plan the operator edits, then applied
all or none, with real dates and origins, nothing written to a target."""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from tests.cli.deploy_history import adopt_git
from tests.cli.deploy_history import commit_steps
from tests.cli.after_the_incident import BEFORE_TUNING
from tests.cli.after_the_incident import CTAS
from tests.cli.after_the_incident import NOW
from tests.cli.after_the_incident import TUNED
from tests.cli.after_the_incident import TUNED_LINE
from tests.cli.after_the_incident import git
from tests.cli.after_the_incident import make_story
from tests.cli.after_the_incident import mtime
from tests.cli.test_story import live_value

WAITING = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
# A copy of another file that happens to carry the decode script's name: the prefill
# server's Kubernetes manifest, as a colleague saved it next to the script.
STRANGER = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: glm-prefill
spec:
  template:
    spec:
      containers:
        - name: prefill
          image: lmsysorg/sglang:v0.5.3
          env:
            - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
              value: "8"
"""
# A bash script saved under the decode script's name: the bench driver of the session.
BENCH = """\
#!/usr/bin/env bash
# A/B bench of the decode server: 5 runs at concurrency 64.
for i in 1 2 3 4 5; do
  python -m sglang.bench_serving --backend sglang --dataset-name random \\
      --random-input-len 1024 --random-output-len 256 --num-prompts 512 \\
      --max-concurrency 64 --output-file "bench_$i.jsonl"
done
"""


def _plan(path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def _flat(plan: dict) -> list[dict]:
    """Each change of the plan with its proposal's fields and machine data merged in."""
    out = []
    for g in plan["proposals"]:
        for i, c in enumerate(g["changes"], 1):
            out.append({**{k: v for k, v in g.items() if k != "changes"}, **c,
                        **(plan.get("data") or {}).get(f"{g['n']}.{i}", {}),
                        "when": c.get("when", g["when"])})
    return out


def _at(plan: dict, knob: str, nth: int = 0) -> tuple[dict, dict]:
    """(proposal, change) of the nth change of ``knob``: edits of the plan go there."""
    found = [(g, c) for g in plan["proposals"] for c in g["changes"] if c["knob"] == knob]
    return found[nth]


def _rows(plan: dict) -> list[tuple]:
    return [(p["knob"], p["before"], p["after"], p["when"], p["class"],
             (p.get("reverted") or {}).get("when")) for p in _flat(plan)]


def _commits(repo) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


@pytest.fixture
def pile(tmp_path, ledger):
    """The story's deploy directory with more of what hand edits leave: an ``.orig`` from
    before the queue size was raised, an editor's ``~`` after the sed, a stranger and a
    vim swap file; a workspace managing the script."""
    st = make_story(tmp_path)
    deploy = st.script.parent
    orig = deploy / "serve_decode.sh.orig"
    orig.write_text(BEFORE_TUNING.replace("--tp-size 4", "--tp-size 8"))
    mtime(orig, "2026-11-28T09:30:00+00:00")
    tilde = deploy / "serve_decode.sh~"
    tilde.write_text(TUNED.replace(TUNED_LINE, ""))
    # vim renamed the sed's result to ~ (it keeps that time), then wrote the watchdog edit
    mtime(tilde, "2026-12-02T14:20:00+00:00")
    mtime(st.script, "2026-12-02T15:05:00+00:00")
    (deploy / "serve_decode.sh.bak.20261130").write_text(STRANGER)
    (deploy / "serve_decode.sh.bak.20261201-1440").write_text(BENCH)
    (deploy / "serve_decode.sh.swp").write_bytes(b"b0VIM 9.0\x00\xff\xfe" * 40)
    (deploy / "serve_prefill.sh").write_text(BEFORE_TUNING)  # not a copy: not looked at
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    assert ledger("-C", ws, "target", "add", "decode", st.script, "--format",
                  "bash").exit_code == 0
    return st, ws


def test_adopt_backups_proposes_one_entry_per_change_with_real_dates(pile, ledger, tmp_path):
    st, ws = pile
    plan_path = tmp_path / "plan.yaml"
    r = ledger("-C", ws, "adopt", "decode", st.script.parent, "--out", plan_path)
    assert r.exit_code == 0, r.stderr
    plan = _plan(plan_path)
    assert _rows(plan) == [
        ("--tp-size", "8", "4", "2026-11-28T09:30:00Z", "perf", None),
        (CTAS, None, "512", "2026-12-01T14:02:00Z", "perf", "2026-12-02T14:14:00Z"),
        (WAITING, None, "30", "2026-12-02T15:05:00Z", "bugfix", None),
    ]
    ctas = _flat(plan)[1]
    assert ctas["origin"] == "serve_decode.sh.bak.20261201-1402 -> serve_decode.sh.bak.20261202-1414"
    assert ctas["reverted"]["origin"] == "serve_decode.sh.bak.20261202-1414 -> serve_decode.sh~"
    assert ctas["lines"] == TUNED_LINE  # its line as the operator wrote it
    assert ctas["dated_by"] == "name of serve_decode.sh.bak.20261201-1402"
    assert _flat(plan)[2]["dated_by"] == (
        "mtime of serve_decode.sh (live), the newer file of the pair (serve_decode.sh~ kept "
        "the old file's time)")
    skipped = "\n".join(plan["skipped"])
    assert "serve_decode.sh.bak.20261130: not readable as a bash target" in skipped
    assert "serve_decode.sh.bak.20261201-1440: not a version of decode: it shares" in skipped
    assert "serve_decode.sh.swp: not UTF-8 text" in skipped
    assert "serve_prefill.sh" not in skipped and "serve_prefill.sh" not in r.stdout
    assert "skipped serve_decode.sh.bak.20261201-1440: not a version of decode" in r.stdout
    assert st.script.read_text() == NOW  # nothing written to the target
    r = ledger("-C", ws, "adopt", "decode", st.script.parent, "--out", plan_path)
    assert r.exit_code == 1 and "exists (it may hold your edits)" in r.stderr


def test_adopt_apply_records_the_kept_proposals_off_the_table(pile, ledger, tmp_path):
    st, ws = pile
    plan_path = tmp_path / "plan.yaml"
    assert ledger("-C", ws, "adopt", "decode", st.script.parent, "--out",
                  plan_path).exit_code == 0
    plan = _plan(plan_path)
    group, change = _at(plan, CTAS)
    group.update(title="TARGET_CTAS 512 for decode", why="wave quantisation")
    change["reverted"].update(suspected=True, why="prime suspect of the hang")
    YAML().dump(plan, plan_path)
    before = _commits(ws)
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 0, r.stderr
    assert "nothing written to a target" in r.stdout and st.script.read_text() == NOW
    assert _commits(ws) == before + 1  # one command, one commit
    rows = ledger("-C", ws, "list", "--json").json()
    assert [(e["knob"], e["state"], e["suspicion"]) for e in rows] == [
        ("--tp-size", "applied", None), (CTAS, "reverted", "suspected"),
        (WAITING, "applied", None)]
    assert rows[1]["origin"].startswith("serve_decode.sh.bak.20261201-1402")
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0  # the file agrees
    show = ledger("-C", ws, "show", rows[1]["id"]).stdout
    assert "origin    serve_decode.sh.bak.20261201-1402" in show
    assert show.index("2026-12-01T14:02:00Z  adopt") < show.index("2026-12-02T14:14:00Z  suspect")
    diff = ledger("-C", ws, "diff").stdout
    assert "off the table: 1 reverted entry" in diff and "TARGET_CTAS 512 for decode" in diff
    assert ledger("-C", ws, "clear", rows[1]["id"], "--why", "the proxy").exit_code == 0
    r = ledger("-C", ws, "restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert TUNED_LINE in st.script.read_text()  # the line back, its comment too
    assert live_value(st.script, WAITING) == "30"
    # run again, the knobs the ledger now manages start kept out, their entries named
    r = ledger("-C", ws, "adopt", "decode", st.script.parent, "--out", tmp_path / "again.yaml")
    assert r.exit_code == 0, r.stderr
    again = _flat(_plan(tmp_path / "again.yaml"))
    assert again and not any(p.get("keep", True) for p in again)
    assert f"the ledger already has {CTAS}: {rows[1]['id']}" in [p.get("note") for p in again]


def test_adopt_git_history_of_five_commits(tmp_path, ledger):
    repo = tmp_path / "deploy"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    script = repo / "serve_decode.sh"
    commits = [
        ("2026-11-20T09:00:00+00:00", "decode: serve script", BEFORE_TUNING),
        ("2026-12-01T14:48:00+00:00", "decode: CTAS 512 (+12.8% @c64)", TUNED),
        ("2026-12-01T16:00:00+00:00", "decode: comment", TUNED.replace("# Decode", "# The decode")),
        ("2026-12-02T14:14:00+00:00", "Revert CTAS: prime suspect of the hang",
         BEFORE_TUNING.replace("# Decode", "# The decode")),
        ("2026-12-02T15:05:00+00:00", "decode: watchdog timeout, tp 8",
         NOW.replace("# Decode", "# The decode").replace("--tp-size 4", "--tp-size 8")),
    ]
    for date, subject, text in commits:
        script.write_text(text)
        git(repo, "add", "serve_decode.sh")
        git(repo, "commit", "-q", "-m", subject, date=date)
    shas = git(repo, "log", "--reverse", "--format=%H").split()
    (repo / "README.md").write_text("not the script\n")  # a commit that does not touch it
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "readme", date="2026-12-03T10:00:00+00:00")
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    assert ledger("-C", ws, "target", "add", "decode", script, "--format", "bash").exit_code == 0
    plan_path = tmp_path / "plan.yaml"
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "serve_decode.sh",
               "--out", plan_path)
    assert r.exit_code == 0, r.stderr
    plan = _plan(plan_path)
    assert _rows(plan) == [
        (CTAS, None, "512", "2026-12-01T14:48:00Z", "perf", "2026-12-02T14:14:00Z"),
        ("--tp-size", "4", "8", "2026-12-02T15:05:00Z", None, None),
        (WAITING, None, "30", "2026-12-02T15:05:00Z", None, None),
    ]
    # one proposal per commit: the last commit's two changes together, its class left to
    # the operator since the catalog's hints differ
    assert [len(g["changes"]) for g in plan["proposals"]] == [1, 2]
    assert plan["proposals"][1]["class_from"] == (
        f"the catalog's hints differ (--tp-size: perf, {WAITING}: bugfix): choose, or adopt "
        "again with --per-knob")
    ctas = _flat(plan)[0]
    assert ctas["title"] == "decode: CTAS 512 (+12.8% @c64)"
    assert ctas["origin"] == f"commit {shas[1][:12]} (serve_decode.sh) by op <op@example.com>: " \
                             "decode: CTAS 512 (+12.8% @c64)"
    assert ctas["reverted"]["origin"].startswith(f"commit {shas[3][:12]} (serve_decode.sh) by op")
    assert ctas["reverted"]["why"] == \
        f"Revert CTAS: prime suspect of the hang (commit {shas[3][:12]} (serve_decode.sh))"
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 1 and "proposal 2 (--tp-size): class must be perf or bugfix" in r.stderr
    assert "1 problem; nothing recorded" in r.stderr  # a proposal's class named once
    plan["proposals"][1]["class"] = "bugfix"
    YAML().dump(plan, plan_path)
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 0, r.stderr
    log = ledger("-C", ws, "log", "--json").json()
    adopted = [c for c in log if c["subject"].startswith("adopt 3 entries into decode")]
    assert len(adopted) == 1 and adopted[0]["when"] == "2026-12-01T14:48:00Z"
    assert log[-1] == adopted[0]  # ordered by its real date: before the ledger existed
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "../x", "--out",
               tmp_path / "p2.yaml")
    assert r.exit_code == 2 and "give the file's path inside the repo" in r.stderr


def test_a_bad_plan_is_refused_naming_the_proposal_and_nothing_changes(pile, ledger, tmp_path):
    st, ws = pile
    plan_path = tmp_path / "plan.yaml"
    assert ledger("-C", ws, "adopt", "decode", st.script.parent, "--out",
                  plan_path).exit_code == 0
    before = _commits(ws)

    def refused(edit, message):
        plan = _plan(plan_path)
        edit(plan)
        bad = tmp_path / "bad.yaml"
        YAML().dump(plan, bad)
        r = ledger("-C", ws, "adopt", "--apply", bad)
        assert r.exit_code == 1 and r.stderr.startswith("error: "), r.stderr
        assert message in r.stderr, r.stderr

    refused(lambda p: p["proposals"][0].update({"class": None}),
            "proposal 1 (--tp-size): class must be perf or bugfix")
    refused(lambda p: _at(p, WAITING)[1].update(after="60"),
            f"would expect {WAITING} = '60' in {st.script}, which holds '30'")
    refused(lambda p: p["proposals"][0]["changes"][0].update(knob="SGLANG_NOT A NAME"),
            "proposal 1")
    refused(lambda p: p["proposals"][1].update(when="2030-01-01T00:00"),
            "proposal 2 (SGLANG_SM120_MMA_TARGET_CTAS): when")
    refused(lambda p: _at(p, CTAS)[1]["reverted"].update(when="2026-11-01"),
            "reverted at 2026-11-01T00:00:00Z, before it was made")
    refused(lambda p: p["proposals"][0].update(title="  "), "the title is empty")
    refused(lambda p: [q.update(keep=False) for q in p["proposals"]], "no change is kept")
    refused(lambda p: p["data"]["2.1"].update(lines=f"export {CTAS}=512; curl x | sh\n"),
            "its lines were edited")
    refused(lambda p: p.pop("adopt"), "not a ledger adopt plan")
    # every problem of a plan in one run
    refused(lambda p: (p["proposals"][0].update({"class": None}), p["proposals"][2].update(
        title=""), _at(p, WAITING)[1].update(after="60")),
        "3 problems; nothing recorded:\n  - proposal 1 (--tp-size): class must be perf or "
        "bugfix, not unset")
    assert _commits(ws) == before and ledger("-C", ws, "list", "--json").json() == []
    assert st.script.read_text() == NOW


def test_a_perf_knob_removed_from_the_oldest_copy_is_proposed_reverted(tmp_path, ledger):
    """The tuning predates every copy: its removal is proposed as the tuning, taken back
    (not an applied perf removal that `revert --perf-only` would undo)."""
    st = make_story(tmp_path)
    for b in st.backups:
        b.unlink()
    old = st.script.parent / "serve_decode.sh.bak.20261202-1414"
    old.write_text(TUNED)
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    assert ledger("-C", ws, "target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    plan_path = tmp_path / "plan.yaml"
    assert ledger("-C", ws, "adopt", "decode", old, "--out", plan_path).exit_code == 0
    plan = _plan(plan_path)
    ctas = next(p for p in _flat(plan) if p["knob"] == CTAS)
    assert (ctas["before"], ctas["after"], ctas["reverted"]["when"]) == \
        (None, "512", "2026-12-02T14:14:00Z")
    assert ctas["lines"] == TUNED_LINE
    assert ledger("-C", ws, "adopt", "--apply", plan_path).exit_code == 0
    assert "off the table: 1 reverted entry" in ledger("-C", ws, "diff").stdout
    # written as the plain removal it looks like, the trap is refused naming the way out
    _, ctas = _at(plan, CTAS)
    ctas.update(before="512", after=None)
    ctas.pop("reverted")
    YAML().dump(plan, plan_path)
    ws2 = tmp_path / "ws2"
    assert ledger("init", ws2, "--root", f"ops={tmp_path}").exit_code == 0
    assert ledger("-C", ws2, "target", "add", "decode", st.script, "--format",
                  "bash").exit_code == 0
    r = ledger("-C", ws2, "adopt", "--apply", plan_path)
    assert r.exit_code == 1 and "this perf change is a revert" in r.stderr
    assert "not_a_revert: true" in r.stderr
    ctas["not_a_revert"] = True
    YAML().dump(plan, plan_path)
    assert ledger("-C", ws2, "adopt", "--apply", plan_path).exit_code == 0


def test_adopt_needs_a_source_and_names_what_it_cannot_read(pile, ledger, tmp_path):
    st, ws = pile
    r = ledger("-C", ws, "adopt", "decode")
    assert r.exit_code == 2 and "give backup files or directories, or --git" in r.stderr
    r = ledger("-C", ws, "adopt", "decode", tmp_path / "nope")
    assert r.exit_code == 2 and "no such backup file or directory" in r.stderr
    r = ledger("-C", ws, "adopt", "decode", st.script.parent / "serve_decode.sh.swp",
               "--out", tmp_path / "p.yaml")
    assert r.exit_code == 1 and "no version of" in r.stderr and "not UTF-8 text" in r.stderr
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("point", ["after-intent", "after-backup", "after-ledger-files",
                                   "after-commit"])
def test_adopt_apply_killed_at_any_point_is_all_or_nothing(pile, tmp_path, point):
    """SIGKILL inside --apply's transaction (LEDGER_CRASH_AT, as tests/store/test_kills.py):
    the next command rolls it back (no entry) or forward (every entry), says so, and the
    target is never touched."""
    from ledger.store.entries_file import parse_entries
    from tests.store.kit import git_status
    from tests.store.kit import ledger_temps
    from tests.store.kit import run_cli

    st, ws = pile
    plan_path = tmp_path / "plan.yaml"
    assert run_cli(ws, "adopt", "decode", st.script.parent, "--out", plan_path).returncode == 0
    head = git(ws, "rev-parse", "HEAD")
    r = run_cli(ws, "adopt", "--apply", plan_path, env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9, (r.stdout, r.stderr)
    r = run_cli(ws, "status", "--json")
    assert r.returncode == 0, r.stderr
    entries = parse_entries((ws / "entries.jsonl").read_text(), "entries.jsonl") \
        if (ws / "entries.jsonl").exists() else []
    if point == "after-commit":
        assert "had completed" in r.stderr and len(entries) == 3
        assert git(ws, "rev-parse", "HEAD") != head
    else:
        assert "rolled back" in r.stderr and entries == []
        assert git(ws, "rev-parse", "HEAD") == head
        r = run_cli(ws, "adopt", "--apply", plan_path)  # it succeeds when run again
        assert r.returncode == 0, r.stderr
    assert len(parse_entries((ws / "entries.jsonl").read_text(), "entries.jsonl")) == 3
    assert st.script.read_text() == NOW
    assert git_status(ws) == "" and ledger_temps(ws, st.script.parent) == []
    assert not (ws / ".ledger" / "intent.json").exists()


def test_adopt_apply_killed_while_git_holds_the_index_lock(pile, tmp_path):
    """Polled: SIGKILL the moment the workspace's index.lock exists (inside git's own
    write of the commit); the next command leaves no entry or all of them."""
    from ledger.store.entries_file import parse_entries
    from tests.store.killkit import kill_when
    from tests.store.kit import git_locks
    from tests.store.kit import run_cli
    from tests.store.kit import start_cli

    st, ws = pile
    plan_path = tmp_path / "plan.yaml"
    assert run_cli(ws, "adopt", "decode", st.script.parent, "--out", plan_path).returncode == 0
    index_lock = ws / ".git" / "index.lock"
    proc = start_cli(ws, "adopt", "--apply", plan_path)
    killed = kill_when(proc, index_lock.exists)
    assert run_cli(ws, "status").returncode == 0
    path = ws / "entries.jsonl"
    n = len(parse_entries(path.read_text(), "entries.jsonl")) if path.exists() else 0
    assert n in (0, 3) and (killed or n == 3)
    assert git_locks(ws) == [] and st.script.read_text() == NOW


def test_a_sed_i_bak_revert_is_dated_by_the_live_file_not_the_bak(tmp_path, ledger):
    """Issue 53 item 3: real ``sed -i.bak`` renames the original to the .bak (its old
    mtime, 13:55) and writes the revert as the live file (14:14): the revert is dated
    14:14, and the plan says which timestamp it used."""
    import os
    import subprocess
    from datetime import datetime

    st = make_story(tmp_path)
    for b in st.backups:
        b.unlink()
    st.script.write_text(TUNED)
    mtime(st.script, "2026-12-02T13:55:00+00:00")
    subprocess.run(["sed", "-i.bak", f"/{CTAS}/d", str(st.script)], check=True)
    bak = st.script.with_name("serve_decode.sh.bak")
    assert bak.read_text() == TUNED and CTAS not in st.script.read_text()
    # the oracle: sed kept the old file's time on the .bak
    assert os.stat(bak).st_mtime == datetime.fromisoformat("2026-12-02T13:55:00+00:00").timestamp()
    mtime(st.script, "2026-12-02T14:14:00+00:00")  # the clock of the sed, as it was
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    assert ledger("-C", ws, "target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    plan_path = tmp_path / "plan.yaml"
    r = ledger("-C", ws, "adopt", "decode", bak, "--out", plan_path)
    assert r.exit_code == 0, r.stderr
    ctas = next(p for p in _flat(_plan(plan_path)) if p["knob"] == CTAS)
    assert ctas["reverted"]["when"] == "2026-12-02T14:14:00Z"
    assert ctas["reverted"]["dated_by"] == ("mtime of serve_decode.sh (live), the newer file "
                                            "of the pair (serve_decode.sh.bak kept the old "
                                            "file's time)")
    assert "reverted 2026-12-02T14:14:00Z, dated by the mtime of serve_decode.sh (live)" \
        in r.stdout


def test_adopt_git_follows_renames_and_an_old_path_stops_at_its_deletion(tmp_path, ledger):
    """Issue 51 item 1: the file was moved twice; each version is read at the path it had
    and the origin names it.  Given an old path, the move reads as a deletion: the plan
    says where the file went, and the last old version is not compared with today's."""
    repo = tmp_path / "deploy"
    steps = [
        ("2026-11-20T09:00:00+00:00", "serve script", "serve.sh", BEFORE_TUNING),
        ("2026-11-25T09:00:00+00:00", "tp 8", "serve.sh", BEFORE_TUNING.replace("--tp-size 4", "--tp-size 8")),
        ("2026-11-26T09:00:00+00:00", "move to scripts/", "scripts/serve_decode.sh", None),
        ("2026-12-01T14:48:00+00:00", "CTAS 512", "scripts/serve_decode.sh", TUNED.replace("--tp-size 4", "--tp-size 8")),
        ("2026-12-02T09:00:00+00:00", "move to decode/", "decode/serve.sh", None),
        ("2026-12-02T15:05:00+00:00", "watchdog", "decode/serve.sh", NOW.replace("--tp-size 4", "--tp-size 8")),
    ]
    shas = commit_steps(repo, steps)
    ws, plan_path, r = adopt_git(ledger, tmp_path, repo, "decode/serve.sh")
    assert r.exit_code == 0, r.stderr
    plan = _plan(plan_path)
    assert [(p["knob"], p["before"], p["after"], p["when"]) for p in _flat(plan)] == [
        ("--tp-size", "4", "8", "2026-11-25T09:00:00Z"),
        (CTAS, None, "512", "2026-12-01T14:48:00Z"),
        (WAITING, None, "30", "2026-12-02T15:05:00Z"),
        (CTAS, "512", None, "2026-12-02T15:05:00Z"),
    ]
    # "watchdog" dropped the CTAS line: no revert commit, so a change of its own, and the
    # plan asks whether it takes proposal 2 back
    removal = _flat(plan)[3]
    assert removal["revert_of"] is None and "write revert_of: 2 if it takes" in removal["note"]
    assert _flat(plan)[0]["origin"].startswith(f"commit {shas[1][:12]} (serve.sh) by")
    assert _flat(plan)[1]["origin"].startswith(
        f"commit {shas[3][:12]} (scripts/serve_decode.sh) by")
    assert plan["history"] == [
        f"commit {shas[2][:12]}: renamed from serve.sh to scripts/serve_decode.sh (move to scripts/)",
        f"commit {shas[4][:12]}: renamed from scripts/serve_decode.sh to decode/serve.sh "
        "(move to decode/)"]
    assert f"history: commit {shas[2][:12]}: renamed from serve.sh" in r.stdout
    # the old path: its history ends where it moved away
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "serve.sh",
               "--out", tmp_path / "old.yaml")
    assert r.exit_code == 0, r.stderr
    old = _plan(tmp_path / "old.yaml")
    assert [(p["knob"], p["after"]) for p in _flat(old)] == [("--tp-size", "8")]
    assert old["history"] == [
        f"commit {shas[2][:12]}: serve.sh deleted (move to scripts/); it lives on as "
        "scripts/serve_decode.sh: give --path scripts/serve_decode.sh to follow it to today; "
        "the last version is not compared with the live file"]
    assert "(live)" not in (tmp_path / "old.yaml").read_text()


def test_what_adopt_cannot_read_is_named_with_commit_and_line(tmp_path, ledger):
    """Issue 51's must-hold: a change the tool cannot read is named in ``unclear:`` with
    the commit and the line, never dropped: branches written on one line, and a commit
    whose script bash itself would refuse."""
    repo = tmp_path / "deploy"
    one_line = 'if [[ $GPU == h200 ]]; then export SGLANG_K=1; else export SGLANG_K=2; fi\n'
    head = "set -euo pipefail\n"
    texts = [
        ("base", BEFORE_TUNING.replace(head, head + one_line)),
        ("k 3", BEFORE_TUNING.replace(head, head + one_line.replace("SGLANG_K=1", "SGLANG_K=3"))),
        ("broken", BEFORE_TUNING.replace("--tp-size 4", "--tp-size 8") + "fi\n"),
        ("fixed", BEFORE_TUNING.replace("--tp-size 4", "--tp-size 8")),
    ]
    shas = commit_steps(repo, [(f"2026-11-2{i}T09:00:00+00:00", subject, "serve.sh", text)
                               for i, (subject, text) in enumerate(texts)])
    _, plan_path, r = adopt_git(ledger, tmp_path, repo, "serve.sh")
    assert r.exit_code == 0, r.stderr
    plan = _plan(plan_path)
    c = [s[:12] for s in shas]
    assert plan["unclear"][0] == (
        f"SGLANG_K at 1: cannot be read in commit {c[0]} (serve.sh) (line 4: export "
        f"SGLANG_K=1), commit {c[1]} (serve.sh) (line 4: export SGLANG_K=3): not proposed")
    assert plan["unclear"][-1] == (
        f"commit {c[2]} (serve.sh): not readable as a bash target: {repo / 'serve.sh'} at "
        f"commit {c[2]}: line 11: expected a command, found 'fi': the changes it made are "
        "not proposed")
    assert f"not proposed SGLANG_K at 1: cannot be read in commit {c[0]}" in r.stdout
    assert [(p["knob"], p["after"]) for p in _flat(plan)] == [("--tp-size", "8")]


def test_a_history_that_begins_with_a_move_git_cannot_follow_says_so(tmp_path, ledger):
    """Moved and rewritten in one commit (too unlike for git's rename detection): the
    plan says where the followed history begins and which file that commit deleted."""
    repo = tmp_path / "deploy"
    commit_steps(repo, [("2026-11-20T09:00:00+00:00", "serve", "old_serve.sh", BEFORE_TUNING)])
    git(repo, "rm", "-q", "old_serve.sh")
    (repo / "serve.sh").write_text("#!/bin/bash\nexport SGLANG_DISAGGREGATION_QUEUE_SIZE=8\n"
                                   "vllm serve /models/glm --tensor-parallel-size 4\n")
    git(repo, "add", "serve.sh")
    git(repo, "commit", "-q", "-m", "rewrite for vllm", date="2026-11-21T09:00:00+00:00")
    sha = git(repo, "rev-parse", "HEAD")[:12]
    _, plan_path, r = adopt_git(ledger, tmp_path, repo, "serve.sh")
    assert r.exit_code == 0, r.stderr
    assert _plan(plan_path)["history"] == [
        f"the history git follows begins at commit {sha}, which added serve.sh and deleted "
        "old_serve.sh (rewrite for vllm): if that was this file under another name, too "
        "changed for git to follow, give --path with that name to read its older versions"]


def test_a_merged_branch_is_one_change_never_compared_across_two_lines_of_work(tmp_path, ledger):
    """main raised the queue while a branch set the watchdog: compared in date order the
    two would seem to take each other back.  The file's line of work (first parents) sees
    the merge as the one change that brought the branch's commit in, and names it."""
    repo = tmp_path / "deploy"
    shas = commit_steps(repo, [("2026-11-20T09:00:00+00:00", "serve", "serve.sh", BEFORE_TUNING)])
    git(repo, "checkout", "-q", "-b", "watchdog")
    (repo / "serve.sh").write_text(BEFORE_TUNING.replace(
        "export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n",
        f"export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\nexport {WAITING}=30\n"))
    git(repo, "commit", "-q", "-am", "watchdog 30", date="2026-11-21T09:00:00+00:00")
    branch = git(repo, "rev-parse", "--short=7", "HEAD")
    git(repo, "checkout", "-q", "main")
    (repo / "serve.sh").write_text(BEFORE_TUNING.replace("QUEUE_SIZE=4", "QUEUE_SIZE=8"))
    git(repo, "commit", "-q", "-am", "queue 8", date="2026-11-22T09:00:00+00:00")
    git(repo, "merge", "-q", "--no-edit", "watchdog", date="2026-11-23T09:00:00+00:00")
    assert f"{WAITING}=30" in (repo / "serve.sh").read_text() and "QUEUE_SIZE=8" in \
        (repo / "serve.sh").read_text()
    _, plan_path, r = adopt_git(ledger, tmp_path, repo, "serve.sh")
    assert r.exit_code == 0, r.stderr
    plan = _plan(plan_path)
    assert [(p["knob"], p["before"], p["after"]) for p in _flat(plan)] == [
        ("SGLANG_DISAGGREGATION_QUEUE_SIZE", "4", "8"), (WAITING, None, "30")]
    assert plan["proposals"][1]["title"] == \
        f"Merge branch 'watchdog' (brings in {branch} watchdog 30)"
    assert len(shas) == 1
