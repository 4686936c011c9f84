"""SIGKILL inside git's own writes and at random instants of real commands (issue 12).

Deterministic kills inside git: the reflog git appends while it holds ``HEAD.lock`` and
the branch's ref lock is replaced by a FIFO, so git blocks right there, locks held, and
is killed with its ledger parent.  Random kills: see tests/store/killkit.py; the long
run is ``pytest -m soak`` or ``python benchmarks/kill_soak.py``.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.store.killkit import check_clean
from tests.store.killkit import in_process
from tests.store.killkit import kill_when
from tests.store.killkit import make_rig
from tests.store.killkit import ok
from tests.store.killkit import random_kills
from tests.store.killkit import trial
from tests.store.kit import git_locks
from tests.store.kit import ledger_temps
from tests.store.kit import run_cli
from tests.store.kit import start_cli

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    return make_rig(tmp_path_factory.mktemp("kills"))


class BlockedReflog:
    """``repo``'s HEAD reflog as a FIFO: a git updating HEAD blocks with its locks held."""

    def __init__(self, repo) -> None:
        self.log = repo / ".git" / "logs" / "HEAD"

    def __enter__(self):
        self.saved = self.log.read_bytes()
        self.log.unlink()
        os.mkfifo(self.log)
        return self

    def __exit__(self, *exc) -> None:
        self.log.unlink()
        self.log.write_bytes(self.saved)


def ref_locks(repo) -> list[str]:
    return [p for p in git_locks(repo) if p.endswith(("HEAD.lock", "/main.lock"))]


def test_kill_inside_the_workspace_commit_ref_update(story, ledger):
    assert ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                              "--title", "ctas")).exit_code == 0
    before = story.script.read_bytes()
    with BlockedReflog(story.root):
        proc = start_cli(story.root, "revert", "--perf-only")
        assert kill_when(proc, lambda: len(ref_locks(story.root)) >= 2)
        left = git_locks(story.root)
    assert any(p.endswith("HEAD.lock") for p in left) and any(p.endswith("main.lock") for p in left)
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "rolled back" in r.stderr and "stale git lock" in r.stderr
    assert git_locks(story.root) == [] and story.script.read_bytes() == before
    assert ledger_temps(story.root, story.script.parent) == []
    r = run_cli(story.root, "revert", "--perf-only")  # later writes succeed
    assert r.returncode == 0, r.stderr
    assert f"{CTAS}=256" in story.script.read_text()


def test_kill_inside_the_engine_repo_ref_update(rig):
    before = rig.files()
    with BlockedReflog(rig.engine):
        proc = start_cli(rig.workspace, "revert", rig.ids["perf_patch"], "--why", "x")
        assert kill_when(proc, lambda: len(ref_locks(rig.engine)) >= 1)
    assert ref_locks(rig.engine)
    check_clean(rig)
    assert rig.files() == before
    ok(in_process(rig.workspace, "revert", rig.ids["perf_patch"]))
    ok(in_process(rig.workspace, "restore", rig.ids["perf_patch"]))
    check_clean(rig)


def test_roll_forward_clears_the_locks_the_killed_command_left(story, ledger):
    assert ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                              "--title", "ctas")).exit_code == 0
    r = run_cli(story.root, "revert", "--perf-only", env={"LEDGER_CRASH_AT": "after-commit"})
    assert r.returncode == -9
    older = story.root / ".git" / "packed-refs.lock"
    older.write_text("")  # taken before the command: not provably its own
    os.utime(older, (time.time() - 3600, time.time() - 3600))
    for name in ("HEAD.lock", "index.lock", "refs/heads/main.lock"):
        (story.root / ".git" / name).write_text("")  # as the killed git left them
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "had completed" in r.stderr
    assert git_locks(story.root) == [str(older)]
    older.unlink()
    assert run_cli(story.root, "restore", "--perf-only").returncode == 0


@pytest.mark.parametrize("point", ["after-intent", "after-backup", "after-targets",
                                   "after-ledger-files"])
def test_temporaries_of_a_killed_command_are_removed(story, ledger, point):
    """Temporaries made by the transaction's own writers (named after its op id), next
    to the target and in the workspace, are removed by the rollback."""
    import json

    assert ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                              "--title", "ctas")).exit_code == 0
    r = run_cli(story.root, "revert", "--perf-only", env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9
    intent = json.loads((story.root / ".ledger" / "intent.json").read_text())
    assert {os.path.dirname(t) for t in intent["temps"]} == {str(story.root),
                                                             str(story.script.parent)}
    for t in intent["temps"]:  # as a kill mid-write leaves them
        open(t, "w").close()
    (story.root / ".ledger" / f".ledger-tmp-{intent['op']}-intent.json").write_text("{")
    r = run_cli(story.root, "status")
    assert r.returncode == 0 and "rolled back" in r.stderr
    assert ledger_temps(story.root, story.script.parent) == []


def test_kill_while_git_holds_the_index_lock(rig):
    """Polled: SIGKILL the moment index.lock exists (inside `git add` / `git commit`)."""
    landed = 0
    for attempt in range(6):
        index_lock = rig.workspace / ".git" / "index.lock"
        for command in (["revert", "--perf-only"], ["restore", "--perf-only"]):
            outcome = trial(rig, command, lambda p: kill_when(p, index_lock.exists))
            landed += outcome != "done"
        if landed >= 2:
            break
    assert landed >= 1, "no kill landed while git held the index lock"


def test_random_instant_kills_of_mixed_commands(rig):
    counts = random_kills(rig, n=int(os.environ.get("LEDGER_KILL_TRIALS", "20")))
    assert counts["back"] >= 3, counts  # kills did land inside transactions


@pytest.mark.soak
def test_random_instant_kills_soak(rig):
    counts = random_kills(rig, n=int(os.environ.get("LEDGER_SOAK_TRIALS", "70")), seed=99)
    assert counts["back"] + counts["forward"] >= 30, counts
