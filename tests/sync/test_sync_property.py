"""Property: three operators record, revert, restore, suspect, clear, pull and push in any
interleaving; after everyone has pulled, the clones hold the same ledger (same entries,
same order, same histories) and byte-identical serve scripts, which are what one
operator gets doing the merged sequence alone.  A pull is refused exactly when both
sides have a new entry on one knob (the oracle reads the two ledgers from git itself).

``LEDGER_SYNC_EXAMPLES`` sets how many runs (15 by default, about a minute on 2 cores; raise it
for a longer search).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck
from hypothesis import event
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.errors import MergeConflict
from ledger.errors import Refused
from ledger.store.workspace import parse_entries
from tests.sync.kit import SERVE
from tests.sync.kit import git
from tests.sync.kit import ledger_view
from tests.sync.kit import make_team

KNOBS = ("SGLANG_DISAGGREGATION_QUEUE_SIZE", "SGLANG_SM120_MMA_TARGET_CTAS",
         "SGLANG_INIT_NEW_TOKEN_RATIO", "SGLANG_SCHEDULER_MAX_RECV_PER_POLL")
ACTIONS = ("revert", "restore", "suspect", "clear")

record = st.tuples(st.just("record"), st.integers(0, 2), st.sampled_from(KNOBS), st.booleans())
action = st.tuples(st.sampled_from(ACTIONS), st.integers(0, 2), st.integers(0, 7))
share = st.tuples(st.sampled_from(("pull", "push")), st.integers(0, 2))
# Two operators, in sync, act on one entry before either pushes: their histories merge.
race = st.tuples(st.just("race"), st.integers(0, 2), st.integers(0, 2),
                 st.sampled_from(ACTIONS), st.sampled_from(ACTIONS), st.integers(0, 7))
# Sharing as often as changing, so that most runs merge, replay and conflict.
op = st.one_of(record, action, share, share, race)
EXAMPLES = int(os.environ.get("LEDGER_SYNC_EXAMPLES", "15"))


def _entries_at(root: Path, rev: str):
    text = git(root, "show", f"{rev}:entries.jsonl", check=False)
    return parse_entries(text + "\n" if text else "", rev)


def expected_conflict(clone) -> bool:
    """Oracle: a new entry on each side on one (target, knob) since the merge base."""
    git(clone.root, "fetch", "--quiet", "origin")
    theirs = git(clone.root, "rev-parse", "origin/main")
    base = git(clone.root, "merge-base", "HEAD", theirs)
    b = {e.id for e in _entries_at(clone.root, base)}
    o = {e.id: e for e in _entries_at(clone.root, "HEAD")}
    t = {e.id: e for e in _entries_at(clone.root, theirs)}
    ours = {(e.target, e.knob) for i, e in o.items() if i not in b and i not in t}
    new_t = {(e.target, e.knob) for i, e in t.items() if i not in b and i not in o}
    return bool(ours & new_t)


def pull_checked(clone) -> None:
    conflict = expected_conflict(clone)
    try:
        done = clone.pull()
    except MergeConflict as e:
        assert conflict, f"unexpected conflict: {e}"
        event("a conflict, resolved with --drop")
        clone.pull(drop=e.local_ids)
        return
    if done.merged is not None and done.merged.replayed:
        event("local entries replayed after the remote's")
    if done.merged is not None and done.merged.histories:
        event("histories of both sides merged")
    assert not conflict, "two new entries on one knob were merged without a conflict"


def push_checked(clone) -> None:
    git(clone.root, "fetch", "--quiet", "origin")
    remote_in_head = git(clone.root, "rev-list", "--count", "HEAD..origin/main") == "0"
    try:
        clone.push()
    except Refused as e:
        assert not remote_in_head, f"push refused though the remote is behind: {e}"
        assert "ledger pull" in str(e)
        return
    assert remote_in_head, "push of a branch behind the remote was accepted"


def run_op(team, step, values) -> None:
    kind, who = step[0], team[step[1]]
    if kind == "record":
        _, _, knob, unset = step
        value = None if unset and knob == KNOBS[-1] else str(next(values))
        try:
            who.record(knob, value, f"{knob.lower()} {value}")
        except Refused:
            pass  # e.g. unsetting a knob the file does not have
    elif kind == "race":
        _, i, j, first, second, k = step
        for who in (team[i], team[j]):  # both in sync with the remote, nothing unpushed
            pull_checked(who)
            push_checked(who)
        pull_checked(team[i])
        run_op(team, (first, i, k), values)
        run_op(team, (second, j, k), values)
    elif kind == "pull":
        pull_checked(who)
    elif kind == "push":
        push_checked(who)
    else:
        entries = who.entries()
        if not entries:
            return
        e = entries[step[2] % len(entries)]
        try:
            getattr(who, kind)(e.id)
        except Refused:
            pass  # clearing what is not suspected: refused, and fine


def settle(team) -> None:
    """Everyone pulls and pushes until the remote holds everything; then everyone pulls."""
    for who in team:
        pull_checked(who)
        push_checked(who)
    for who in team:
        pull_checked(who)


def solo(tmp: Path, merged) -> bytes:
    """One operator recording the merged entries in order, each left in its final state."""
    (alone,) = make_team(tmp, n=1, serve=SERVE)
    for e in merged:
        mine = alone.record(e.knob, e.after, e.title, e.cls)
        if e.suspicion is not None:
            alone.suspect(mine.id)
            if e.suspicion == "cleared":
                alone.clear(mine.id)
        if e.applied and e.suspicion is not None:
            alone.restore(mine.id)
        elif not e.applied and e.suspicion is None:
            alone.revert(mine.id)
    got = [(x.knob, x.after, x.state, x.suspicion) for x in alone.entries()]
    assert got == [(x.knob, x.after, x.state, x.suspicion) for x in merged]
    return alone.serve.read_bytes()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(op, min_size=4, max_size=18))
def test_clones_converge_to_the_solo_ledger(steps):
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        team = make_team(tmp / "team")
        values = itertools.count(1001)
        for step in steps:
            run_op(team, step, values)
        settle(team)
        views = [ledger_view(c.entries()) for c in team]
        assert views[0] == views[1] == views[2]
        scripts = [c.serve.read_bytes() for c in team]
        assert scripts[0] == scripts[1] == scripts[2]
        assert solo(tmp / "solo", team[0].entries()) == scripts[0]
        if any(e.knob == KNOBS[-1] for e in team[0].entries()):
            event("a knob added to (or removed from) the script")
