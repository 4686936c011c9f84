"""Issue 30, item 1: clones whose serve scripts diverged with the same ledger.

The cause: a knob the script lacks is re-added at its anchor, and two such knobs
recorded on two clones (each right below the same line, neither knowing the other) both
claim that place.  Whichever came back first was pushed down by the other, so the line
order followed the order of the commands — a clone that reverted and restored one of
them wrote ``X Y`` where a clone that only pulled kept ``Y X``, and no later pull moves
a line whose value does not change.  Now knobs that claim one place stand in record
order (:mod:`ledger.core.layout`), so a set of present knobs has one layout.

The shrunk sequences, in-process (the property's kit), and the issue's own sequence of
20 operations through the real CLI, with the team's knob choices that diverged.
"""

from __future__ import annotations

import json
import re

import pytest

from ledger.errors import MergeConflict
from tests.store.kit import run_cli
from tests.sync.kit import make_team
from tests.sync.test_sync_property import assert_converged

RECV = "SGLANG_SCHEDULER_MAX_RECV_PER_POLL"  # neither is in the script
BOOT = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"
QUEUE = "SGLANG_DISAGGREGATION_QUEUE_SIZE"


def exports(clone) -> list[str]:
    return [line.split("=")[0][7:] for line in clone.serve.read_text().splitlines()
            if line.startswith("export ")]


def settle(team) -> None:
    for who in team:
        who.pull()
        who.push()
    for who in team:
        who.pull()


def test_a_clone_that_only_pulls_gets_the_layout_of_one_that_reverted_and_restored(tmp_path):
    """A: revert X, restore X, push.  C pulls that: no value changed, so nothing is
    written; C's lines must already be where A's restore put them."""
    a, b, c = make_team(tmp_path)
    x = c.record(RECV, "8", "poll 8")
    a.record(BOOT, "30", "bootstrap 30")
    c.push()
    a.pull()
    a.push()
    c.pull()
    assert exports(a) == exports(c)
    a.revert(x.id)
    a.restore(x.id)
    a.push()
    c.pull()
    b.pull()
    assert exports(a)[-2:] == [RECV, BOOT]  # record order: RECV was pushed first
    assert a.serve.read_bytes() == b.serve.read_bytes() == c.serve.read_bytes()


def test_knobs_added_on_two_clones_stand_as_one_operator_would_record_them(tmp_path):
    """Hypothesis' shrunk example: one clone adds a knob, another adds a second one and
    changes a third; after everyone pulled, the script is the solo operator's."""
    team = make_team(tmp_path / "team", n=4)
    team[2].record(BOOT, "1001", "bootstrap")
    team[0].record(RECV, "1002", "poll")
    team[0].record(QUEUE, "1003", "queue")
    for who in team[:3]:
        try:
            who.pull()
        except MergeConflict:  # pragma: no cover - different knobs never conflict
            raise
        who.push()
    for who in team:
        who.pull()
    assert_converged(tmp_path, team)


# The issue's operations, in its order; a record names its knob and value (the team's
# choices that diverged), an action acts on the clone's entry of that knob, or on none
# (the clone has no entry yet: the tester's command found nothing to do).
SEQUENCE = [
    ("A", "clear", QUEUE), ("C", "push", None), ("C", "record", f"{BOOT}=8"),
    ("B", "restore", None), ("B", "pull", None), ("A", "record", f"{RECV}=512"),
    ("B", "revert", None), ("B", "restore", None), ("C", "suspect", BOOT),
    ("A", "restore", RECV), ("B", "record", f"{QUEUE}=512"), ("B", "pull", None),
    ("B", "push", None), ("B", "revert", QUEUE), ("A", "push-rejected", None),
    ("A", "push", None), ("B", "revert", QUEUE), ("B", "clear", QUEUE), ("B", "pull", None),
    ("B", "record", f"{BOOT}=16"), ("A", "restore", RECV),
]
CLI = {"clear": ["clear", "--why", "proxy"], "suspect": ["suspect", "--why", "hang"],
       "revert": ["revert", "--why", "test"], "restore": ["restore", "--include-suspects"]}


def cli(clone, *args):
    r = run_cli(clone.root, *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def entry_of(clone, knob: str | None) -> str | None:
    rows = json.loads(cli(clone, "list", "--json").stdout)
    ids = [e["id"] for e in rows if knob is not None and e.get("knob") == knob]
    return ids[-1] if ids else None


def cli_pull(clone) -> None:
    """``ledger pull``; on a conflict, what its error says: ``--drop`` the local entry."""
    r = cli(clone, "pull")
    if r.returncode != 0:
        drops = re.findall(r"--drop ([0-9a-f]{8})\b", r.stderr)
        assert "conflict" in r.stderr and drops, r.stderr
        r = cli(clone, "pull", *[a for d in drops for a in ("--drop", d)])
    assert r.returncode == 0, r.stderr


def cli_step(clone, op: str, arg: str | None) -> None:
    if op == "record":
        r = cli(clone, "record", "knob", "serve", arg, "--class", "perf", "--title", arg,
                "--no-validate")
        assert r.returncode == 0, r.stderr
    elif op == "pull":
        cli_pull(clone)
    elif op in ("push", "push-rejected"):
        r = cli(clone, "push")
        assert r.returncode == 0 or "ledger pull" in r.stderr, r.stderr
    else:
        ref = entry_of(clone, arg)
        if ref is not None:  # refused (nothing to clear, already reverted) or done
            r = cli(clone, *CLI[op][:1], ref, *CLI[op][1:])
            assert r.returncode == 0 or r.stderr.startswith("error:"), r.stderr


@pytest.mark.slow
def test_the_issues_twenty_operations_through_the_cli(tmp_path):
    team = make_team(tmp_path / "team")
    who = dict(zip("ABC", team))
    for name, op, arg in SEQUENCE:
        cli_step(who[name], op, arg)
    for clone in team:  # afterwards everyone pulled (and pushed what they had)
        cli_pull(clone)
        cli_step(clone, "push", None)
    for clone in team:
        cli_pull(clone)
    ledgers = {(c.root / "entries.jsonl").read_bytes() for c in team}
    assert len(ledgers) == 1
    scripts = [c.serve.read_bytes() for c in team]
    assert scripts[0] == scripts[1] == scripts[2], [exports(c) for c in team]
    for clone in team:  # each script is what its ledger says
        status = json.loads(cli(clone, "status", "--json").stdout)
        assert status["drift"] == [] and status["clean"], status


def test_a_dropped_entry_does_not_reorder_the_lines_of_the_clone_that_dropped_it(tmp_path):
    """The second cause (the issue's sequence, shrunk): C's unpushed BOOT entry conflicts
    with B's and C pulls with ``--drop``.  The dropped entry (local seq 1) sorted among
    the remote's entries, so on C alone BOOT's layer came before RECV's in record order
    and C laid the two lines out the other way round."""
    a, b, c = make_team(tmp_path)
    b.record(QUEUE, "8", "queue 8")
    b.push()
    mine = c.record(BOOT, "8", "bootstrap 8")
    a.pull()
    a.record(RECV, "512", "poll 512")
    a.push()
    b.pull()
    b.record(BOOT, "16", "bootstrap 16")
    b.push()
    with pytest.raises(MergeConflict):
        c.pull()
    c.pull(drop=[mine.id])
    a.pull()
    assert mine.id not in {e.id for e in c.entries()}
    assert exports(c)[-2:] == [RECV, BOOT]
    assert a.serve.read_bytes() == b.serve.read_bytes() == c.serve.read_bytes()
