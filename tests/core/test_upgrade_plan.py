"""The pure upgrade planner (ledger.core.upgrade) and the upgrade entry's model."""

from __future__ import annotations

import pytest

from envknobs.release_diff import NameChange
from envknobs.release_diff import ReleaseChanges
from envknobs.release_diff import translated_value
from ledger.core import planner
from ledger.core.action import Action
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.model import Entry
from ledger.core.upgrade import Setting
from ledger.core.upgrade import markdown
from ledger.core.upgrade import moved_defaults
from ledger.core.upgrade import plan_target
from ledger.core.upgrade import same_value
from ledger.errors import InvalidValue

CHANGES = ReleaseChanges("sglang", "0.4.0", "0.4.6", {
    "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": NameChange(
        "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "renamed",
        "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", inverts=True),
    "--enable-ep-moe": NameChange("--enable-ep-moe", "removed", "--ep-size"),
    "SGLANG_INIT_NEW_TOKEN_RATIO": NameChange("SGLANG_INIT_NEW_TOKEN_RATIO", "default",
                                              old_default=0.7, new_default=0.5),
    "SGLANG_RETRACT_DECODE_STEPS": NameChange("SGLANG_RETRACT_DECODE_STEPS", "default",
                                              old_default=20, new_default=40),
    "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION": NameChange(
        "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", "default", old_default=4096, new_default=8192),
})


def _translate(value, inverts):
    return translated_value(value, inverts)


def _plan(settings):
    return plan_target("decode", "/srv/serve.sh", settings, (3,), "sglang==0.4.0",
                       "sglang==0.4.6", "detected", CHANGES, translate=_translate)


def test_rows_of_a_target():
    plan = _plan([Setting("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "true", 5),
                  Setting("--enable-ep-moe", "true", 9),
                  Setting("SGLANG_RETRACT_DECODE_STEPS", "40", 6),
                  Setting("SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", "2048", 7)])
    rows = {r.change: r for r in plan.rows}
    assert [r.change for r in plan.rows] == ["release", "removed", "renamed", "redundant",
                                             "default"]
    renamed = rows["renamed"]
    assert (renamed.new_value, renamed.inverts, renamed.line) == ("false", True, 5)
    assert renamed.command.endswith("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false --class "
                                    "bugfix --title 'SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK is "
                                    "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK from 0.4.6'")
    assert rows["removed"].command == ("ledger record flag decode --enable-ep-moe --unset "
                                       "--class bugfix --title '--enable-ep-moe: removed in "
                                       "0.4.6'")
    assert rows["redundant"].name == "SGLANG_RETRACT_DECODE_STEPS"  # set to the new default
    # set to another value: the file decides, whatever the default: no row
    assert rows["default"].name == "SGLANG_INIT_NEW_TOKEN_RATIO"  # unset: moved under it
    assert rows["default"].line == 3
    assert "SGLANG_INIT_NEW_TOKEN_RATIO=0.7" in rows["default"].command
    d = plan.to_dict()
    assert moved_defaults(d) == [("SGLANG_INIT_NEW_TOKEN_RATIO", 0.7, 0.5)]
    assert d["rows"][0]["where"] == "/srv/serve.sh:3"


def test_a_value_that_cannot_be_translated_has_no_command():
    plan = _plan([Setting("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "maybe", 5)])
    (renamed,) = [r for r in plan.rows if r.change == "renamed"]
    assert renamed.command == "" and "translate it by hand" in renamed.note


def test_markdown_escapes_what_a_file_holds():
    plan = plan_target("d", "/srv/a|b.sh", [Setting("--enable-ep-moe", "<b>x</b>|`", 2)], (),
                       "sglang==0.4.0", "sglang==0.4.6", "declared", CHANGES,
                       translate=_translate).to_dict()
    md = markdown([plan])
    assert "<b>" not in md and "&lt;b&gt;" in md
    assert "/srv/a\\|b.sh" in md and "| /srv/a\\|b.sh |" in md  # a declared release: no line


@pytest.mark.parametrize("value,default,same", [("0", False, True), ("false", False, True),
                                                ("1", False, False), ("0.50", 0.5, True),
                                                ("40", 40, True), ("rust", "rust", True),
                                                ("x", None, False)])
def test_same_value(value, default, same):
    assert same_value(value, default) is same


def _upgrade(**changes) -> Entry:
    fields = dict(id="a1", seq=1, kind="upgrade", cls="perf", title="up", slug="up",
                  recorded="2026-12-01T00:00:00Z", target="decode", knob=RELEASE_KNOB,
                  before="vllm==0.30.0", after="vllm==0.34.0",
                  history=(Action(at="2026-12-01T00:00:00Z", action="record"),))
    return Entry(**{**fields, **changes})


def test_an_upgrade_entry_layers_like_a_knob_and_round_trips():
    e = _upgrade(plan={"rows": []}, body="## x\n")
    assert Entry.from_dict(e.to_dict()) == e
    plan = planner.plan_record(e)
    assert plan.knob_edits == {("decode", RELEASE_KNOB): ("vllm==0.30.0", "vllm==0.34.0")}
    reverted = planner.plan_revert([e], [e], why="w", at="t", command="c")
    assert reverted.knob_edits == {("decode", RELEASE_KNOB): ("vllm==0.34.0", "vllm==0.30.0")}


@pytest.mark.parametrize("changes,message", [
    ({"before": "0.30.0"}, "sglang==X or vllm==X"),
    ({"before": "sglang==0.5.20"}, "same engine"),
    ({"after": "vllm==0.30.0"}, "same engine"),
    ({"knob": "VLLM_X"}, "an upgrade entry needs a target"),
])
def test_an_upgrade_entry_is_checked(changes, message):
    with pytest.raises(InvalidValue, match=message):
        _upgrade(**changes)


def test_a_name_the_file_cannot_hold_keeps_its_row_without_a_command():
    plan = plan_target("cfg", "/srv/cfg.yaml", [], (1,), "sglang==0.4.0", "sglang==0.4.6",
                       "detected", CHANGES, translate=_translate,
                       spelling=lambda name: None if not name.startswith("-") else name)
    moved = [r for r in plan.rows if r.change == "default"]
    assert {r.name for r in moved} == {"SGLANG_INIT_NEW_TOKEN_RATIO",
                                       "SGLANG_RETRACT_DECODE_STEPS",
                                       "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION"}
    assert all(r.command == "" for r in moved)


def test_a_config_file_key_is_planned_as_its_flag_and_written_as_its_key():
    plan = _plan([Setting("--enable-ep-moe", "true", 4, key="enable-ep-moe")])
    (removed,) = [r for r in plan.rows if r.change == "removed"]
    assert removed.command.startswith("ledger record knob decode enable-ep-moe --unset")


def test_the_release_it_runs_already_is_said_without_a_command():
    plan = plan_target("d", "/srv/s.sh", [], (2,), "vllm==0.34.0", "vllm==0.34.0", "detected",
                       None, translate=_translate)
    assert [r.command for r in plan.rows] == [""]
    assert plan.warnings == ("d already runs vllm==0.34.0",)
