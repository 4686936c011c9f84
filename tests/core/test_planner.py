"""The planner alone: no files, no git, no clock."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.core import layers
from ledger.core import planner
from ledger.core.action import Action
from ledger.core.model import Entry
from ledger.errors import Refused

AT = "2026-12-02T00:00:00Z"


def knob(seq, cls, before, after, target="decode", name="K", state="applied", **kw) -> Entry:
    return Entry(
        id=f"e{seq:07d}", seq=seq, kind="knob", cls=cls, title=f"entry {seq}", slug=f"entry-{seq}",
        recorded=AT, state=state, target=target, knob=name, before=before, after=after,
        history=(Action(AT, "record"),), **kw,
    )


def patch(seq, cls, state="applied") -> Entry:
    return Entry(id=f"p{seq:07d}", seq=seq, kind="patch", cls=cls, title=f"patch {seq}",
                 slug=f"patch-{seq}", recorded=AT, state=state, patch=f"patches/p{seq}.patch",
                 sha256="0" * 64, files=("engine/x.py",))


def apply_all(entries, plan):
    return plan.new_entries(entries)


def test_live_value_is_after_of_last_applied_else_base():
    layer = [knob(1, "perf", "256", "512"), knob(2, "bugfix", "512", "384")]
    assert layers.layer_value(layer) == "384"
    assert layers.layer_value(layer, {layer[1].id: False}) == "512"
    assert layers.layer_value(layer, {layer[0].id: False}) == "384"
    assert layers.layer_value(layer, {layer[0].id: False, layer[1].id: False}) == "256"


def test_unset_before_and_after():
    layer = [knob(1, "perf", None, "1"), knob(2, "perf", "1", None)]
    assert layers.layer_value(layer) is None
    assert layers.layer_value(layer, {layer[1].id: False}) == "1"
    assert layers.layer_value(layer, {layer[0].id: False, layer[1].id: False}) is None


def _run(entries, ops):
    """Apply a sequence of (op, entry index) commands through the planner."""
    for op, i in ops:
        e = entries[i]
        if op == "revert":
            plan = planner.plan_revert(entries, [e], why="", at=AT, command="t")
        else:
            plan = planner.plan_restore(entries, [e], why="", at=AT, command="t", explicit=True)
        entries = apply_all(entries, plan)
    return entries


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.sampled_from(["1", "2", "3", None]), min_size=2, max_size=6),
    ops=st.lists(st.tuples(st.sampled_from(["revert", "restore"]), st.integers(0, 4)), max_size=12),
)
def test_any_command_order_reaching_a_subset_gives_one_value(values, ops):
    # A chain of entries on one knob, then any sequence of reverts/restores.
    chain = []
    for i, (before, after) in enumerate(zip(values, values[1:]), start=1):
        if before == after:
            continue
        chain.append(knob(i, "perf" if i % 2 else "bugfix", before, after))
    if not chain:
        return
    ops = [(op, i % len(chain)) for op, i in ops]
    final = _run(chain, ops)
    applied = [e for e in final if e.applied]
    expected = applied[-1].after if applied else chain[0].before
    assert layers.expected_knobs(final)[("decode", "K")] == expected


def test_revert_perf_only_touches_no_bugfix():
    entries = [
        knob(1, "perf", "256", "512", name="CTAS"),
        knob(2, "bugfix", None, "30", name="TIMEOUT"),
        patch(3, "perf"),
        patch(4, "bugfix"),
    ]
    chosen = planner.select(entries, cls="perf", state="applied")
    plan = planner.plan_revert(entries, chosen, why="hang", at=AT, command="revert --perf-only")
    assert {new.id for _, new in plan.changes} == {entries[0].id, entries[2].id}
    assert plan.knob_edits == {("decode", "CTAS"): ("512", "256")}
    assert [e.id for e in plan.patch_flips] == [entries[2].id]
    after = plan.new_entries(entries)
    assert [e.state for e in after] == ["reverted", "applied", "reverted", "applied"]
    assert after[0].history[-1].why == "hang"


def test_restore_holds_back_suspects_until_cleared():
    e = knob(1, "perf", "256", "512")
    entries = [e]
    entries = apply_all(entries, planner.plan_revert(entries, [e], why="hangs", at=AT,
                                                      command="suspect", suspect=True))
    assert entries[0].suspected and not entries[0].applied
    plan = planner.plan_restore(entries, planner.select(entries, cls="perf", state="reverted"),
                                why="", at=AT, command="restore", explicit=False)
    assert plan.empty and "suspicion" in plan.skipped[0].reason
    with pytest.raises(Refused, match="suspicion"):
        planner.plan_restore(entries, entries, why="", at=AT, command="r", explicit=True)
    included = planner.plan_restore(entries, entries, why="", at=AT, command="r", explicit=False,
                                    include_suspects=True)
    assert len(included.changes) == 1
    entries = apply_all(entries, planner.plan_clear(entries[0], why="proxy", at=AT, command="c"))
    assert entries[0].suspicion == "cleared" and not entries[0].applied
    plan = planner.plan_restore(entries, entries, why="", at=AT, command="r", explicit=False)
    assert plan.knob_edits == {("decode", "K"): ("256", "512")}


def test_regression_needs_force_and_require_evidence_needs_gain():
    e = knob(1, "perf", "1", "2", state="reverted")
    for verdict, flags, allowed in [
        ("regression", {}, False),
        ("regression", {"force": True}, True),
        (None, {"require_evidence": True}, False),
        ("neutral", {"require_evidence": True}, False),
        ("gain", {"require_evidence": True}, True),
        (None, {}, True),
    ]:
        plan = planner.plan_restore([e], [e], why="", at=AT, command="r", explicit=False,
                                    verdicts={e.id: verdict}, **flags)
        assert (not plan.empty) == allowed, (verdict, flags)


def test_clear_requires_a_suspect():
    with pytest.raises(Refused, match="not under suspicion"):
        planner.plan_clear(knob(1, "perf", "1", "2"), why="x", at=AT, command="c")


def test_drift_names_path_knob_expected_found():
    entries = [knob(1, "perf", "256", "512")]
    drifts = layers.find_drift(entries, {("decode", "K"): "999"}, {"decode": "/srv/decode.sh"})
    assert [d.describe() for d in drifts] == ["/srv/decode.sh: K expected '512', found '999'"]
    assert layers.find_drift(entries, {("decode", "K"): "512"}, {}) == []


def test_every_subset_of_three_layers():
    chain = [knob(1, "perf", "a", "b"), knob(2, "bugfix", "b", "c"), knob(3, "perf", "c", "d")]
    for mask in itertools.product([True, False], repeat=3):
        states = {e.id: m for e, m in zip(chain, mask)}
        applied = [e for e, m in zip(chain, mask) if m]
        want = applied[-1].after if applied else "a"
        assert layers.layer_value(chain, states) == want


def test_plan_record_moves_the_knob_from_before_to_after_and_adds_the_entry():
    old = [knob(1, "bugfix", "256", "384")]
    new = knob(2, "perf", "384", "512")
    plan = planner.plan_record(new)
    assert plan.op == "record" and not plan.empty and plan.changes == ()
    assert plan.knob_edits == {("decode", "K"): ("384", "512")} and plan.patch_flips == ()
    assert plan.new_entries(old) == [*old, new]
    assert layers.expected_knobs(plan.new_entries(old)) == {("decode", "K"): "512"}


def test_plan_record_of_selected_places_moves_each_place_from_its_own_value():
    places = {"at 1": {"line": 3, "before": "1"}, "launch 2": {"line": 9, "before": None}}
    e = knob(1, "perf", "1", "8", places=places, at="all")
    assert planner.plan_record(e).knob_edits == {
        ("decode", "K@at 1"): ("1", "8"), ("decode", "K@launch 2"): (None, "8"),
    }


def test_plan_record_of_an_adopted_change_edits_nothing():
    plan = planner.plan_record(knob(1, "perf", "256", "512"), adopt=True)
    assert plan.op == "adopt" and plan.knob_edits == {} and not plan.empty
    adopted = planner.plan_record(patch(2, "perf"), adopt=True)
    assert adopted.patch_flips == () and [e.id for e in adopted.added] == ["p0000002"]


def test_plan_record_of_a_patch_puts_it_on_top_of_the_stack():
    p = patch(3, "bugfix")
    plan = planner.plan_record(p)
    assert plan.patch_flips == (p,) and plan.knob_edits == {}
    assert [e.id for e in plan.new_entries([patch(1, "perf")])] == ["p0000001", "p0000003"]


def test_knob_layers_remembered_per_list_of_entries_never_shared():
    """The layers of the last entries grouped are remembered: each caller still gets its
    own lists, and another list (a new entry, a changed state) gets its own layers."""
    a = [knob(1, "perf", "1", "2"), knob(2, "perf", "2", "3"), knob(3, "perf", None, "x", name="J")]
    first = layers.knob_layers(a)
    first[("decode", "K")].append("mine")  # a caller changing its copy
    again = layers.knob_layers(list(a))
    assert [e.id for e in again[("decode", "K")]] == ["e0000001", "e0000002"]
    b = [a[0], a[1].with_action(Action(AT, "revert"), state="reverted"), a[2]]
    assert layers.expected_knobs(b)[("decode", "K")] == "2"
    assert layers.expected_knobs(a)[("decode", "K")] == "3"
    c = [*a, knob(4, "perf", "3", "4")]
    assert layers.expected_knobs(c)[("decode", "K")] == "4"
    assert layers.expected_knobs(a[:2])[("decode", "K")] == "3"
    assert ("decode", "J") not in layers.knob_layers(a[:2])


def test_one_command_writes_one_action_into_every_history_it_changes():
    entries = [knob(i, "perf", str(i), str(i + 1), name=f"K{i}") for i in range(1, 4)]
    plan = planner.plan_revert(entries, entries, why="incident", at=AT, command="revert --perf-only")
    actions = [new.history[-1] for _, new in plan.changes]
    assert actions[0] is actions[1] is actions[2] and actions[0].action == "revert"
    back = plan.new_entries(entries)
    plan = planner.plan_restore(back, back, why="", at=AT, command="restore", explicit=False)
    actions = [new.history[-1] for _, new in plan.changes]
    assert actions[0] is actions[1] is actions[2] and actions[0].action == "restore"
