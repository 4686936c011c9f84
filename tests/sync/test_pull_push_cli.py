"""`ledger pull` / `ledger push` through the real CLI, on three clones of one bare repo.

The "done when" of issue 15: two operators record different perf knobs at the same time,
both push (one after a pull), a third clone pulls — the same ledger everywhere; the same
knob recorded on both sides is refused, both entries named.  Plus: a plain `git pull`
merges entries.jsonl through the registered driver exactly as `ledger pull` does.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.store.kit import assert_refused
from tests.store.kit import run_cli
from tests.store.kit import tree
from tests.sync.kit import git
from tests.sync.kit import make_team

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
QUEUE = "SGLANG_DISAGGREGATION_QUEUE_SIZE"


@pytest.fixture
def team(tmp_path):
    return make_team(tmp_path)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stdout


def record(clone, assignment: str, title: str) -> str:
    out = ok(run_cli(clone.root, "record", "knob", "serve", assignment, "--class", "perf",
                     "--title", title, "--json"))
    return json.loads(out)["id"]


def test_two_operators_two_knobs_then_a_third_pulls_the_same_ledger(team):
    op1, op2, op3 = team
    a = record(op1, f"{CTAS}=512", "Raise CTAS to 512")
    b = record(op2, f"{QUEUE}=8", "Deeper disaggregation queue")
    assert "pushed" in ok(run_cli(op1.root, "push"))
    assert_refused(run_cli(op2.root, "push"), "rejected", "ledger pull origin")
    out = ok(run_cli(op2.root, "pull"))
    assert f"remote   {a}" in out and f"replayed {b}" in out and "(seq 1 -> 2)" in out
    assert "pushed" in ok(run_cli(op2.root, "push"))
    ok(run_cli(op3.root, "pull"))
    ok(run_cli(op1.root, "pull"))
    ledgers = {(c.root / "entries.jsonl").read_bytes() for c in team}
    assert len(ledgers) == 1
    assert [(e.id, e.seq) for e in op3.entries()] == [(a, 1), (b, 2)]
    scripts = {c.serve.read_bytes() for c in team}
    assert len(scripts) == 1
    text = op3.serve.read_text()
    assert f"export {CTAS}=512   # wave" in text and f"export {QUEUE}=8\n" in text
    probe = subprocess.run(["bash", "-c", f'source <(grep ^export "{op3.serve}"); '
                            f'echo ${CTAS} ${QUEUE}'], capture_output=True, text=True)
    assert probe.stdout.split() == ["512", "8"]
    for c in team:  # every clone is clean and at rest
        assert git(c.root, "status", "--porcelain") == ""
        assert "up to date" in ok(run_cli(c.root, "pull"))


def test_the_same_knob_on_both_sides_is_refused_naming_both(team):
    op1, op2, _ = team
    a = record(op1, f"{CTAS}=512", "CTAS 512")
    b = record(op2, f"{CTAS}=384", "CTAS 384")
    ok(run_cli(op1.root, "push"))
    before = tree(op2.root, op2.serve)
    head = git(op2.root, "rev-parse", "HEAD")
    r = run_cli(op2.root, "pull")
    assert_refused(r, a, "ctas-512", b, "ctas-384", "op1 <op1@example.com>", "op2",
                   f"knob {CTAS} in target serve", f"ledger pull origin --drop {b}",
                   "nothing was changed")
    assert tree(op2.root, op2.serve) == before and git(op2.root, "rev-parse", "HEAD") == head
    out = ok(run_cli(op2.root, "pull", "--drop", b))
    assert f"dropped  {b}" in out
    assert f"export {CTAS}=512" in op2.serve.read_text()
    assert [e.id for e in op2.entries()] == [a]


def test_dry_run_prints_and_changes_nothing(team):
    op1, op2, _ = team
    a = record(op1, f"{CTAS}=512", "CTAS 512")
    b = record(op2, f"{QUEUE}=8", "queue 8")
    ok(run_cli(op1.root, "push"))
    git(op2.root, "fetch", "--quiet", "origin")  # the dry run may update origin/main only
    before = tree(op2.root, op2.serve)
    out = ok(run_cli(op2.root, "pull", "--dry-run"))
    assert "would merge origin/main" in out
    assert f"-export {CTAS}=256" in out and f"+export {CTAS}=512" in out
    data = json.loads(ok(run_cli(op2.root, "pull", "--dry-run", "--json")))
    assert data["dry_run"] and data["status"] == "merged" and data["commit"] is None
    assert data["from_remote"] == [a] and data["replayed"] == [{"id": b, "seq_before": 1,
                                                               "seq": 2}]
    assert list(data["files"]) == [str(op2.serve)]
    assert tree(op2.root, op2.serve) == before


def test_drift_is_refused_and_nothing_changes(team):
    op1, op2, _ = team
    record(op1, f"{CTAS}=512", "CTAS 512")
    ok(run_cli(op1.root, "push"))
    record(op2, f"{QUEUE}=8", "queue 8")
    op2.serve.write_text(op2.serve.read_text().replace(f"{QUEUE}=8", f"{QUEUE}=16"))
    before = tree(op2.root, op2.serve)
    assert_refused(run_cli(op2.root, "pull"), str(op2.serve), QUEUE, "expected '8'",
                   "found '16'")
    assert tree(op2.root, op2.serve) == before


def test_a_plain_git_pull_merges_entries_like_ledger_pull(team):
    op1, op2, _ = team
    ok(run_cli(op2.root, "pull"))  # registers the driver in op2's .git/config
    assert "merge-driver" in git(op2.root, "config", "merge.ledger.driver")
    assert "entries.jsonl merge=ledger" in (op2.root / ".gitattributes").read_text()
    ctas = record(op1, f"{CTAS}=512", "CTAS 512")
    record(op1, "SGLANG_INIT_NEW_TOKEN_RATIO=0.5", "ratio 0.5")
    ok(run_cli(op1.root, "revert", ctas, "--why", "hang"))
    ok(run_cli(op1.root, "push"))
    record(op2, f"{QUEUE}=8", "queue 8")
    twin = op2.root.parent / "twin"
    shutil.copytree(op2.root, twin, symlinks=True)
    pulled = subprocess.run(["git", "-C", str(op2.root), "pull", "--no-rebase", "--no-edit",
                             "origin", "main"], capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr
    ok(run_cli(twin, "pull"))
    assert (op2.root / "entries.jsonl").read_bytes() == (twin / "entries.jsonl").read_bytes()
    # git moved the ledger, not the serve script: the next `ledger pull` finishes it
    assert op2.serve.read_bytes() != twin.joinpath("deploy/serve.sh").read_bytes()
    assert "finished git's merge" in ok(run_cli(op2.root, "pull"))
    assert op2.serve.read_bytes() == twin.joinpath("deploy/serve.sh").read_bytes()
    assert "up to date" in ok(run_cli(op2.root, "pull"))


def test_a_plain_git_pull_stops_on_a_conflict(team):
    op1, op2, _ = team
    ok(run_cli(op2.root, "pull"))
    a = record(op1, f"{CTAS}=512", "CTAS 512")
    ok(run_cli(op1.root, "push"))
    b = record(op2, f"{CTAS}=384", "CTAS 384")
    mine = (op2.root / "entries.jsonl").read_bytes()
    pulled = subprocess.run(["git", "-C", str(op2.root), "pull", "--no-rebase", "--no-edit",
                             "origin", "main"], capture_output=True, text=True)
    assert pulled.returncode != 0
    assert a in pulled.stderr and b in pulled.stderr and "git merge --abort" in pulled.stderr
    assert git(op2.root, "diff", "--name-only", "--diff-filter=U") == "entries.jsonl"
    assert (op2.root / "entries.jsonl").read_bytes() == mine
    assert_refused(run_cli(op2.root, "pull"), "a git merge is in progress", "git merge --abort")
    git(op2.root, "merge", "--abort")
    assert git(op2.root, "status", "--porcelain") == ""


def test_push_with_nothing_new_is_up_to_date(team):
    op1 = team[0]
    assert "up to date" in ok(run_cli(op1.root, "push"))
    for bad in ("nowhere", "--upload-pack=touch pwned"):
        r = run_cli(op1.root, "push", "--", bad) if bad.startswith("-") else \
            run_cli(op1.root, "push", bad)
        assert r.returncode == 2 and "no git remote named" in r.stderr, r.stderr
    assert not (op1.root / "pwned").exists()


def test_targets_added_on_both_sides_merge_by_name(team):
    op1, op2, op3 = team
    for clone, name in ((op1, "prefill"), (op2, "router")):
        script = clone.root / "deploy" / f"{name}.sh"
        script.write_text(f"#!/usr/bin/env bash\nexport {QUEUE}=4\nexec {name}\n")
        ok(run_cli(clone.root, "target", "add", name, str(script), "--format", "bash"))
    ok(run_cli(op1.root, "push"))
    out = ok(run_cli(op2.root, "pull"))
    assert "merged origin/main" in out
    ok(run_cli(op2.root, "push"))
    ok(run_cli(op1.root, "pull"))
    for c in (op1, op2):
        text = (c.root / "ledger.yaml").read_text()
        assert "prefill:" in text and "router:" in text and "serve:" in text
    assert (op1.root / "ledger.yaml").read_bytes() == (op2.root / "ledger.yaml").read_bytes()
    # the same name with two different files is a conflict, named
    for clone, path in ((op1, "deploy/a.sh"), (op3, "deploy/b.sh")):
        (clone.root / path).write_text(f"export {QUEUE}=4\n")
        ok(run_cli(clone.root, "target", "add", "decode", str(clone.root / path),
                   "--format", "bash"))
    ok(run_cli(op1.root, "push"))
    assert_refused(run_cli(op3.root, "pull"), "ledger.yaml target decode", "deploy/a.sh",
                   "deploy/b.sh")


def test_rendered_docs_rendered_on_both_sides_take_the_remotes_and_say_render(team):
    op1, op2, _ = team
    for c in (op1, op2):
        ok(run_cli(c.root, "pull"))
    docs = op1.root / "docs"
    docs.mkdir()
    (docs / "CHANGELOG.md").write_text("# Changelog\n\nnothing yet\n")
    git(op1.root, "add", "docs")
    git(op1.root, "commit", "--quiet", "-m", "docs")
    ok(run_cli(op1.root, "push"))
    ok(run_cli(op2.root, "pull"))
    for c, title in ((op1, "CTAS 512"), (op2, "queue 8")):
        record(c, f"{CTAS}=512" if c is op1 else f"{QUEUE}=8", title)
        (c.root / "docs" / "CHANGELOG.md").write_text(f"# Changelog\n\n- {title}\n")
        git(c.root, "commit", "--quiet", "-am", "render")
    ok(run_cli(op1.root, "push"))
    r = run_cli(op2.root, "pull")
    ok(r)
    assert "docs/CHANGELOG.md was rendered on both sides" in r.stderr
    assert "ledger render" in r.stderr
    assert (op2.root / "docs" / "CHANGELOG.md").read_text() == "# Changelog\n\n- CTAS 512\n"
    assert git(op2.root, "status", "--porcelain") == ""


def test_evidence_and_bisect_records_of_both_sides_are_all_kept(team):
    """Per-entry directories never collide: each side's files come through the merge."""
    op1, op2, _ = team
    ids = {}
    for c, assignment in ((op1, f"{CTAS}=512"), (op2, f"{QUEUE}=8")):
        ids[c.name] = record(c, assignment, c.name)
        for rel in (f"evidence/{ids[c.name]}/run1/summary.yaml", f"bisect/b-{c.name}/state.yaml"):
            (c.root / rel).parent.mkdir(parents=True)
            (c.root / rel).write_text(f"by: {c.name}\n")
        git(c.root, "add", "evidence", "bisect")
        git(c.root, "commit", "--quiet", "-m", "evidence")
    ok(run_cli(op1.root, "push"))
    r = run_cli(op2.root, "pull")
    assert ok(r) and "note:" not in r.stderr
    ok(run_cli(op2.root, "push"))
    ok(run_cli(op1.root, "pull"))
    for c in (op1, op2):
        for who in ("op1", "op2"):
            assert (c.root / f"evidence/{ids[who]}/run1/summary.yaml").read_text() == f"by: {who}\n"
            assert (c.root / f"bisect/b-{who}/state.yaml").read_text() == f"by: {who}\n"
