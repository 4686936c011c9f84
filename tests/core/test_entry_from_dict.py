"""``Entry.from_dict``'s fast path (``__dict__`` filled at once) builds exactly what the
constructor builds, every field included, and validates like it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from ledger.core.model import Action
from ledger.core.model import Entry
from ledger.errors import InvalidValue

KNOB = Entry(id="e0001", seq=1, kind="knob", cls="perf", title="ctas 512", slug="ctas-512",
             recorded="2026-12-01T00:00:00Z", target="decode", knob="SGLANG_X", before="256",
             after="512", anchor={"knob": "SGLANG_Y"}, before_source="'256'",
             history=(Action("2026-12-01T00:00:00Z", "record", "why", "record knob"),
                      Action("2026-12-02T00:00:00Z", "revert", "", "revert")),
             state="reverted", suspicion="suspected", suspect_why="hang")
PATCH = Entry(id="e0002", seq=2, kind="patch", cls="bugfix", title="pin", slug="pin",
              recorded="2026-12-01T00:00:00Z", patch="patches/e0002.patch", sha256="ab" * 32,
              files=("engine/a.py", "engine/b.py"), commit="c" * 40)


@pytest.mark.parametrize("entry", [KNOB, PATCH], ids=["knob", "patch"])
def test_from_dict_builds_what_the_constructor_builds(entry):
    again = Entry.from_dict(entry.to_dict())
    assert again == entry
    assert set(vars(again)) == {f.name for f in fields(Entry)}
    assert all(set(vars(a)) == {f.name for f in fields(Action)} for a in again.history)
    assert hash(again.history) == hash(entry.history)
    with pytest.raises(AttributeError):
        again.title = "changed"  # still frozen


@pytest.mark.parametrize("change, message", [
    ({"class": "speed"}, "class"),
    ({"state": "gone"}, "unknown state"),
    ({"title": "  "}, "title is empty"),
    ({"after": "256"}, "before and after are the same"),
    ({"history": [{"at": "x", "action": "teleport"}]}, "unknown history action"),
])
def test_from_dict_still_validates(change, message):
    with pytest.raises(InvalidValue, match=message):
        Entry.from_dict({**KNOB.to_dict(), **change})


def test_with_action_appends_and_changes_like_replace():
    action = Action("2026-12-03T00:00:00Z", "restore", "claw back", "restore")
    after = KNOB.with_action(action, state="applied", suspicion=None)
    assert after.history == KNOB.history + (action,)
    assert (after.state, after.suspicion, after.after) == ("applied", None, KNOB.after)
    assert set(vars(after)) == {f.name for f in fields(Entry)}
    with pytest.raises(InvalidValue, match="unknown state"):
        KNOB.with_action(action, state="gone")
    with pytest.raises(TypeError, match="colour"):
        KNOB.with_action(action, colour="red")
    with pytest.raises(TypeError, match="history"):
        KNOB.with_action(action, history=())
