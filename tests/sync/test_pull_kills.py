"""A `ledger pull` SIGKILLed at every crash point of its transaction is recovered by the
next command like any other: rolled back (targets, ledger files, HEAD as before) or,
once its merge commit exists, forward; the pull then goes through and ends exactly where
an uninterrupted pull of the same clone ends."""

from __future__ import annotations

import shutil

import pytest

from ledger.store.txn import CRASH_POINTS
from tests.store.kit import git_locks
from tests.store.kit import ledger_temps
from tests.store.kit import run_cli
from tests.sync.kit import git
from tests.sync.kit import make_team

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
QUEUE = "SGLANG_DISAGGREGATION_QUEUE_SIZE"


def picture(root):
    return ((root / "entries.jsonl").read_bytes(), (root / "deploy" / "serve.sh").read_bytes(),
            git(root, "rev-parse", "HEAD"))


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_killed_pull_is_recovered_by_the_next_command(tmp_path, point):
    op1, op2 = make_team(tmp_path, n=2)
    op1.record(CTAS, "512", "CTAS 512")
    op1.push()
    op2.record(QUEUE, "8", "queue 8")
    twin = tmp_path / "twin"
    shutil.copytree(op2.root, twin, symlinks=True)
    assert run_cli(twin, "pull").returncode == 0
    before = picture(op2.root)

    killed = run_cli(op2.root, "pull", env={"LEDGER_CRASH_AT": point})
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    assert (op2.root / ".ledger" / "intent.json").exists()

    r = run_cli(op2.root, "list")
    assert r.returncode == 0, r.stderr
    after = picture(op2.root)
    if point == "after-commit":
        assert "had completed" in r.stderr
        assert after[:2] == picture(twin)[:2]
    else:
        assert "rolled back an interrupted `ledger pull`" in r.stderr
        assert after == before
    assert not (op2.root / ".ledger" / "intent.json").exists()
    assert git_locks(op2.root) == [] and ledger_temps(op2.root) == []
    assert git(op2.root, "status", "--porcelain") == ""

    r = run_cli(op2.root, "pull")
    assert r.returncode == 0, r.stderr
    assert picture(op2.root)[:2] == picture(twin)[:2]


def test_a_killed_pull_writing_a_target_the_remote_added_is_rolled_back(tmp_path):
    """The target is named only in the remote's ledger.yaml until the pull's ledger files
    are written: recovery still knows it (the record names the remote commit)."""
    op1, op2 = make_team(tmp_path, n=2)
    base = f"#!/usr/bin/env bash\nexport {QUEUE}=4\nexec prefill\n"
    for c in (op1, op2):
        (c.root / "deploy" / "prefill.sh").write_text(base)
    assert run_cli(op1.root, "target", "add", "prefill", op1.root / "deploy/prefill.sh",
                   "--format", "bash").returncode == 0
    assert run_cli(op1.root, "record", "knob", "prefill", f"{QUEUE}=16", "--class", "perf",
                   "--title", "prefill queue").returncode == 0
    op1.push()
    killed = run_cli(op2.root, "pull", env={"LEDGER_CRASH_AT": "after-targets"})
    assert killed.returncode == -9
    assert f"{QUEUE}=16" in (op2.root / "deploy" / "prefill.sh").read_text()
    r = run_cli(op2.root, "list")
    assert r.returncode == 0 and "rolled back" in r.stderr, r.stderr
    assert (op2.root / "deploy" / "prefill.sh").read_text() == base
    assert run_cli(op2.root, "pull").returncode == 0
    assert f"{QUEUE}=16" in (op2.root / "deploy" / "prefill.sh").read_text()
