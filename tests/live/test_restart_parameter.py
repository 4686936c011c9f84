"""``restart`` is a parameter of the library's mutations (record, revert, restore, suspect):
one call does the change and what --restart adds, and the result carries the outcome."""

from __future__ import annotations

import pytest

from ledger.commands import revert as ops
from ledger.commands.record import record_knob
from ledger.commands.session import open_session
from ledger.errors import Refused

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def record(story, **kw):
    s = open_session(str(story.root), "record knob")
    return record_knob(s, target="decode", knob=KNOB, value="512", cls="perf", title="ctas",
                       **kw)


def test_a_mutation_without_restart_reports_its_live_outcome(story):
    r = record(story)
    assert r.live is not None and r.live.applied is r.applied
    assert not r.live.failed and r.live.planned == [] and r.live.restart is None
    applied = ops.revert(open_session(str(story.root), "revert"), refs=[r.entry.id], why="x")
    assert applied.live.applied is applied and [e.id for e in applied.changed] == [r.entry.id]
    assert f"{KNOB}=256" in story.script.read_text()


def test_restart_without_hooks_is_refused_by_the_library_before_any_change(story):
    r = record(story)
    before = story.script.read_bytes()
    s = open_session(str(story.root), "suspect")
    with pytest.raises(Refused, match="target decode .no restart and no health."):
        ops.suspect(s, r.entry.id, "hang", restart=True)
    with pytest.raises(Refused, match="no restart"):
        ops.revert(s, perf_only=True, why="x", restart=True, dry_run=True)
    assert story.script.read_bytes() == before
    assert [e.state for e in open_session(str(story.root), "list").ws.entries()] == ["applied"]


def test_a_dry_run_with_restart_plans_the_restart(story, ledger):
    r = ledger(*story.args("target", "set", "decode", "--restart", "true",
                           "--health-command", "true"))
    assert r.exit_code == 0, r.stderr
    planned = record(story, dry_run=True, restart=True).live.planned
    assert [(p.target, p.argv) for p in planned] == [("decode", ["true"])]
    assert f"{KNOB}=256" in story.script.read_text()
