"""The pure judge of `ledger check` (ledger.core.check), alone: no files, no git."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from ledger.core.action import Action
from ledger.core.check import check_range
from ledger.core.check import history_findings
from ledger.core.check import parse_checks
from ledger.core.check import record_command
from ledger.core.findings import EvidenceView
from ledger.core.findings import Layout
from ledger.core.findings import Side
from ledger.core.findings import TargetReading
from ledger.core.model import Entry
from ledger.errors import ConfigError

T0 = "2026-12-01T00:00:00Z"


def entry(i: int, knob: str = "SGLANG_X", before: str | None = "4", after: str | None = "8",
          cls: str = "perf", state: str = "applied", target: str = "decode") -> Entry:
    return Entry(id=f"e{i:07d}", seq=i, kind="knob", cls=cls, title=f"t{i}", slug=f"t{i}",
                 recorded=T0, state=state, target=target, knob=knob, before=before,
                 after=after, history=(Action(T0, "record"),))


def reading(base: dict, head: dict, lines: dict | None = None) -> TargetReading:
    return TargetReading("decode", "serve.sh", True, Side(base), Side(head, lines=lines or {}))


def judge(readings, base, head, views=None, **severities):
    return check_range(base="b" * 40, head="c" * 40, readings=readings, base_entries=base,
                       head_entries=head, evidence=views or {}, severities=severities)


def test_parse_checks_defaults_aliases_and_refusals():
    assert parse_checks(None, "ledger.yaml")["unledgered"] == "error"
    got = parse_checks({"evidence": "required", "release": False, "state": "warning"}, "l")
    assert (got["evidence"], got["release"], got["state"]) == ("error", "off", "warn")
    with pytest.raises(ConfigError, match="unknown rule 'unledgerd'"):
        parse_checks({"unledgerd": "off"}, "l")
    with pytest.raises(ConfigError, match="always an error"):
        parse_checks({"unreadable": "off"}, "l")
    with pytest.raises(ConfigError, match="no severity"):
        parse_checks({"history": "loud"}, "l")


def test_an_unexplained_change_fails_and_an_entry_of_the_range_explains_it():
    r = reading({"SGLANG_X": "4"}, {"SGLANG_X": "8"}, {"SGLANG_X": 3})
    report = judge([r], [], [])
    (f,) = report.findings
    assert (f.rule, f.where, f.change) == ("unledgered", "serve.sh:3", "SGLANG_X: 4 -> 8")
    bugfix = entry(1, cls="bugfix")
    assert judge([r], [], [bugfix]).findings == []
    # an entry recorded before the range does not explain a change made in it
    assert [f.rule for f in judge([r], [bugfix], [bugfix]).findings] == ["unledgered"]


def test_perf_entries_need_evidence_that_is_no_regression():
    r = reading({"SGLANG_X": "4"}, {"SGLANG_X": "8"})
    perf = entry(1)
    assert [f.rule for f in judge([r], [], [perf]).findings] == ["evidence"]
    report = judge([r], [], [perf], {perf.id: EvidenceView("gain", "gain +12.8%")})
    assert report.findings == [] and report.needs_ab == []
    bad = judge([r], [], [perf], {perf.id: EvidenceView("regression", "regression -9%")})
    assert "regression -9%" in bad.findings[0].message
    assert judge([r], [], [perf], evidence="warn").findings[0].severity == "warn"
    assert judge([r], [], [perf], evidence="off").findings == []
    stale = judge([r], [], [perf], {perf.id: EvidenceView("gain", "g", ("A 1 → 2",))})
    assert [(f.rule, f.severity) for f in stale.findings] == [("stale-evidence", "warn")]
    # a perf entry restored in the range needs it too; one recorded already reverted does not
    reverted = replace(perf, state="reverted")
    assert [f.rule for f in judge([], [reverted], [perf]).findings] == ["evidence"]
    assert judge([], [], [reverted]).findings == []


def test_history_is_append_only_but_actions_may_interleave():
    old = entry(1)
    later = old.with_action(Action("2026-12-02T00:00:00Z", "revert", why="incident"),
                            state="reverted")
    assert history_findings([old], [later]) == []
    merged = replace(later, history=(Action("2026-11-30T00:00:00Z", "amend"),
                                     *later.history))
    assert history_findings([later], [merged]) == []
    assert "rewritten" in history_findings([old], [replace(old, after="16")])[0]
    lost = replace(later, history=later.history[1:])
    assert "history was rewritten" in history_findings([later], [lost])[0]
    assert "was removed" in history_findings([old], [])[0]


def test_the_record_command_quotes_every_value_as_data():
    hostile = "$(touch /tmp/pwned); `id` 'x'"
    r = TargetReading("decode", "serve.sh", True)
    cmd = record_command(r, "SGLANG_X", None, hostile, 3, None, Layout())
    words = shlex.split(cmd)
    assert words[:5] == ["ledger", "record", "knob", "decode", f"SGLANG_X={hostile}"]
    assert "--before-unset" in words and words[words.index("--class") + 1] == "perf"
    removed = shlex.split(record_command(r, "SGLANG_X", "4", None, 3, "bugfix", Layout()))
    assert removed[4:9] == ["SGLANG_X", "--unset", "--adopt", "--before", "4"]


def test_state_and_release_and_unreadable():
    e = entry(1, cls="bugfix")
    r = reading({"SGLANG_X": "4"}, {"SGLANG_X": "16"})
    assert [f.rule for f in judge([r], [], [e]).findings] == ["state"]
    tag = TargetReading("decode", "k.yaml", True, Side({}, releases=(("sglang==0.5.20", 9),)),
                        Side({}, releases=(("sglang==0.5.23", 9),)))
    (f,) = judge([tag], [], []).findings
    assert (f.rule, f.line, f.change) == ("release", 9,
                                          "engine release: sglang==0.5.20 -> sglang==0.5.23")
    named = replace(e, title="upgrade to 0.5.23", knob="SGLANG_Y", before=None)
    with_knob = replace(tag, base=replace(tag.base, values={}),
                        head=replace(tag.head, values={"SGLANG_Y": "8"}))
    assert [f.rule for f in judge([with_knob], [], [named]).findings] == []
    broken = TargetReading("decode", "k.yaml", True, error="k.yaml at head cannot be read")
    assert [(f.rule, f.severity) for f in judge([broken], [], [], unledgered="off").findings] \
        == [("unreadable", "error")]
