"""An entry's stored form does not change with its typed change records.

The fixtures were written by the code before ``Entry`` held a typed change
(:mod:`ledger.core.changes`): ``entries_from_the_cli.jsonl`` by the real CLI (bash, k8s and
dotenv targets; ``--at``, ``--all``, several targets at once, ``--unset``; revert, suspect,
clear, restore), ``entries_of_every_kind.jsonl`` by that code's constructor (patch,
adopted patch, upgrade with its plan, an adopted flag at a launch place).  Reading them and
writing them back gives the same bytes; any entry, of any kind, reads back as itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.core.action import Action
from ledger.core.changes import KnobChange
from ledger.core.changes import PatchChange
from ledger.core.changes import UpgradeChange
from ledger.core.model import Entry
from ledger.store.entries_file import entries_bytes
from ledger.store.entries_file import parse_entries

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("entries_*.jsonl"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_stored_entries_read_and_write_back_byte_for_byte(path):
    raw = path.read_bytes()
    entries = parse_entries(raw.decode("utf-8"), str(path))
    assert entries_bytes(entries) == raw
    for line, e in zip(raw.decode("utf-8").split("\n"), entries):  # not at U+2028
        assert e.to_dict() == json.loads(line)
        assert list(e.to_dict()) == list(json.loads(line))  # the keys' order too


def test_the_fixtures_hold_every_kind_and_every_part_of_a_knob_change():
    entries = [e for p in FIXTURES for e in parse_entries(p.read_text("utf-8"), str(p))]
    assert {type(e.change) for e in entries} == {KnobChange, PatchChange, UpgradeChange}
    knobs = [e for e in entries if e.kind == "knob"]
    for part in ("anchor", "places", "also", "before_source", "after_lines"):
        assert any(getattr(e, part) is not None for e in knobs), part


def test_the_change_reads_through_the_entry_and_other_kinds_read_empty():
    (patch, _, upgrade, knob) = parse_entries(FIXTURES[1].read_text("utf-8"), "kinds")
    assert patch.files == patch.change.files and patch.target is None and patch.body == ""
    assert upgrade.plan is upgrade.change.plan and upgrade.files == () and upgrade.patch is None
    assert knob.anchor == knob.change.anchor and knob.sha256 is None


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6)
VALUE = st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_.,:/-]{1,8}", fullmatch=True))
KNOB = st.sampled_from(["SGLANG_X", "NCCL_DEBUG", "--tp", "mem-fraction-static"])
ACTIONS = st.lists(st.builds(Action, at=st.just("2026-12-01T00:00:00Z"),
                             action=st.sampled_from(["record", "revert", "restore"]), why=TEXT,
                             command=st.just("x")), min_size=1, max_size=3).map(tuple)
COMMON = dict(id=st.from_regex(r"[a-z0-9]{8}", fullmatch=True), seq=st.integers(1, 10**6),
              cls=st.sampled_from(["perf", "bugfix"]), title=TEXT.filter(str.strip),
              slug=st.just("s"), recorded=st.just("2026-12-01T00:00:00Z"),
              state=st.sampled_from(["applied", "reverted"]), why=TEXT, history=ACTIONS,
              origin=st.one_of(st.none(), TEXT), revert_why=st.sampled_from(["", "proxy"]))


@st.composite
def knob_entries(draw):
    after = draw(VALUE.filter(lambda v: v is not None))
    before = draw(VALUE.filter(lambda v: v != after))  # a change changes something
    parts = dict(
        anchor=draw(st.one_of(st.none(), st.fixed_dictionaries({"knob": st.just("SGLANG_Y")}),
                              st.fixed_dictionaries({"lines": st.lists(TEXT, max_size=2)}))),
        before_source=draw(st.one_of(st.none(), TEXT)),
        after_lines=draw(st.one_of(st.none(), TEXT)))
    shape = draw(st.sampled_from(["whole", "places", "also"]))
    if shape == "places":
        parts.update(places={"launch 3": {"line": 3, "before": before, "raw": "x"}}, at="3")
    elif shape == "also":
        parts.update(also={"prefill": {"before": before, "anchor": None}})
    return draw(st.builds(Entry, kind=st.just("knob"), target=st.just("decode"),
                          knob=KNOB, before=st.just(before), after=st.just(after),
                          **{k: st.just(v) for k, v in parts.items()}, **COMMON))


PATCHES = st.builds(Entry, kind=st.just("patch"), patch=st.just("patches/x.patch"),
                    sha256=st.just("ab" * 32), files=st.lists(TEXT, max_size=2).map(tuple),
                    commit=st.one_of(st.none(), st.just("c" * 40)), **COMMON)
UPGRADES = st.builds(Entry, kind=st.just("upgrade"), target=st.just("decode"),
                     knob=st.just("engine release"), before=st.just("vllm==0.30.0"),
                     after=st.just("vllm==0.34.0"), body=TEXT,
                     plan=st.one_of(st.none(), st.just({"rows": [{"change": "release"}]})),
                     **COMMON)


@settings(max_examples=150, deadline=None)
@given(entry=st.one_of(knob_entries(), PATCHES, UPGRADES))
def test_any_entry_reads_back_as_itself_and_writes_the_same_bytes(entry):
    again = Entry.from_dict(json.loads(json.dumps(entry.to_dict())))
    assert again == entry
    assert entries_bytes([again]) == entries_bytes([entry])


def test_a_field_of_another_kind_is_refused_when_given():
    with pytest.raises(TypeError, match="patch entry has no target"):
        Entry(id="p1", seq=1, kind="patch", cls="perf", title="t", slug="t", recorded="r",
              patch="p", sha256="s", target="decode")
