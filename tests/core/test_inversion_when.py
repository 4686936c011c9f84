"""The inversion trap and real dates, in the pure core (ledger.core.inversion, .when)."""

from __future__ import annotations

import pytest

from ledger.core.action import Action
from ledger.core.inversion import inversion
from ledger.core.inversion import knobs_added
from ledger.core.model import Entry
from ledger.core.planner import plan_record
from ledger.core.planner import plan_revert
from ledger.core.when import dated_log
from ledger.core.when import parse_when
from ledger.errors import InvalidValue

NOW = "2026-12-04T12:00:00Z"


def knob(i: str, seq: int, before, after, cls="perf", state="applied", history=()):
    return Entry(id=i, seq=seq, kind="knob", cls=cls, title=f"t{i}", slug=f"t{i}",
                 recorded=NOW, target="decode", knob="K", before=before, after=after,
                 state=state, history=history)


def trap(**kw):
    args = dict(target="decode", knob="K", cls="perf", adopt=True, title="T")
    return inversion(**{**args, **kw})


def test_adopted_removal_names_already_reverted():
    found = trap(before="512", after=None)
    assert "removes K (it was '512')" in found.what
    assert found.instead == "ledger record knob decode K=512 --class perf --title T --already-reverted"


def test_a_flag_is_named_with_record_flag():
    found = trap(knob="--cuda-graph-max-bs", before="256", after=None)
    assert found.instead.startswith("ledger record flag decode --cuda-graph-max-bs=256 ")


def test_back_to_default_and_undo_of_an_entry():
    assert "back to its default" in trap(before="512", after="256", default=256).what
    assert trap(before="512", after="300", default=256) is None
    layer = [knob("e1", 1, "256", "512")]
    found = trap(before="512", after="256", adopt=False, layer=layer)
    assert found.instead == "ledger revert e1" and "takes back e1" in found.what
    assert trap(before="512", after=None, layer=layer).instead == "ledger revert e1 --force"


def test_not_refused():
    assert trap(before="512", after=None, cls="bugfix") is None
    assert trap(before="512", after=None, adopt=False) is None  # a removal made by the ledger
    assert trap(before=None, after="512") is None
    reverted = [knob("e1", 1, "256", "512", state="reverted")]
    assert trap(before="256", after="300", adopt=False, layer=reverted) is None


def test_a_revert_that_adds_a_knob_says_so():
    e = knob("e1", 1, "512", None)
    plan = plan_revert([e], [e], why="", at=NOW, command="revert --perf-only")
    assert plan.knob_edits == {("decode", "K"): (None, "512")}
    assert knobs_added(plan.changes, plan.knob_edits) == [
        "this revert ADDS K=512 to decode (e1 te1 had removed it)"]
    other = knob("e2", 1, "1", "2")
    plan = plan_revert([other], [other], why="", at=NOW, command="revert")
    assert knobs_added(plan.changes, plan.knob_edits) == []


def test_an_entry_recorded_reverted_writes_nothing():
    e = knob("e1", 1, "256", "512", state="reverted")
    plan = plan_record(e)
    assert plan.knob_edits == {} and plan.added == (e,)


@pytest.mark.parametrize("text,value", [
    ("2026-12-02", "2026-12-02T00:00:00Z"), ("2026-12-02T14:14", "2026-12-02T14:14:00Z"),
    ("2026-12-02 14:14:05", "2026-12-02T14:14:05Z"), ("20261202-1414", "2026-12-02T14:14:00Z"),
    ("2026-12-02T15:14+01:00", "2026-12-02T14:14:00Z"), ("2026-12-02T14:14:00Z", "2026-12-02T14:14:00Z"),
])
def test_when_parses(text, value):
    assert parse_when(text, NOW) == value


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "2026-12-05"])
def test_when_refuses(text):
    with pytest.raises(InvalidValue):
        parse_when(text, NOW)


def test_history_and_log_order_by_real_dates():
    h = (Action(at=NOW, action="adopt", when="2026-12-01T14:14:00Z"),
         Action(at=NOW, action="revert", when="2026-12-02T14:14:00Z"),
         Action(at="2026-12-04T12:01:00Z", action="restore"))
    e = knob("e1", 1, "256", "512", history=(h[2], h[0], h[1]))
    assert e.timeline() == list(h)
    assert e.made == "2026-12-04T12:01:00Z"  # its first action in record order
    assert knob("e2", 1, "1", "2", history=h).made == "2026-12-01T14:14:00Z"
    commits = [{"sha": "c", "time": "2026-12-04T12:02:00+00:00", "body": ""},
               {"sha": "b", "time": "2026-12-04T12:01:00+00:00", "body": "x\n\nWhen: 2026-12-01T00:00:00Z"},
               {"sha": "a", "time": "2026-12-04T12:00:00+00:00", "body": ""}]
    assert [c["sha"] for c in dated_log(commits)] == ["c", "a", "b"]
    assert [c["when"] for c in dated_log(commits)] == ["", "", "2026-12-01T00:00:00Z"]
