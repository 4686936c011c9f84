"""``status``'s one-step row of a plain knob entry (``_plain_knob_row``, the path of
10,000-entry ledgers) is exactly the row the general path makes (``_status_row``), in
every live state, and its keys come in the order JSON output sorts them into."""

from __future__ import annotations

import itertools

import pytest

from ledger.commands.report import _plain_knob_row
from ledger.commands.report import _status_row
from ledger.core.action import Action
from ledger.core.model import Entry

AT = "2026-12-06T00:00:00Z"


def _entry(state: str, before: str | None, after: str | None, suspicion=None) -> Entry:
    history = (Action(AT, "record", "", "record knob"),)
    if state == "reverted":
        history += (Action(AT, "revert", "suspect", "revert --perf-only"),)
    return Entry(id="e0001", seq=1, kind="knob", cls="perf", title="ctas 512", slug="ctas-512",
                 recorded=AT, target="decode", knob="SGLANG_X", before=before, after=after,
                 state=state, suspicion=suspicion, history=history)


KEY = ("decode", "SGLANG_X")
ENTRIES = [_entry(state, before, after, suspicion)
           for state, (before, after), suspicion in itertools.product(
               ("applied", "reverted"), (("256", "512"), (None, "512"), ("256", None)),
               (None, "suspected", "cleared"))]
LIVES = {"ok": lambda want: {KEY: want}, "drift": lambda want: {KEY: "7"},
         "unreadable": lambda want: {}}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.state}-{e.before}-{e.after}-{e.suspicion}")
@pytest.mark.parametrize("live", sorted(LIVES))
@pytest.mark.parametrize("default", [None, 256, "fa3"])
def test_the_plain_row_is_the_general_row(entry, live, default):
    want = entry.after if entry.applied else entry.before
    expected, live_of = {KEY: want}, LIVES[live](want)
    fast = _plain_knob_row(entry, default, expected, live_of, {})
    general = _status_row(entry, default, expected, live_of, {}, {})
    assert fast == general
    assert fast["live_state"] == live
    assert list(fast) == sorted(fast)


def test_other_entries_take_the_general_path():
    plain = ENTRIES[0]
    ambiguous = {KEY: object()}
    assert _plain_knob_row(plain, None, {KEY: "512"}, {KEY: "512"}, ambiguous) is None
    placed = Entry(**{**{f: getattr(plain, f) for f in ("id", "seq", "kind", "cls", "title",
                                                       "slug", "recorded", "target", "knob",
                                                       "before", "after", "history")},
                      "places": {"launch 1": {"line": 3, "before": "256"}}, "at": "3"})
    assert _plain_knob_row(placed, None, {KEY: "512"}, {KEY: "512"}, {}) is None
