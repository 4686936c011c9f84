"""The ledger merge, alone: order, renumbering, slugs, histories, conflicts."""

from __future__ import annotations

import pytest

from ledger.core.action import Action
from ledger.core.layers import expected_knobs
from ledger.core.merge import hunk_ranges
from ledger.core.merge import merge_entries
from ledger.core.model import Entry
from ledger.errors import MergeConflict
from ledger.errors import UsageError


def knob(i: str, seq: int, k: str, after: str, before: str | None = "1", *, slug=None,
         at="2026-12-01T10:00:00Z", target="serve", places=None) -> Entry:
    return Entry(id=i, seq=seq, kind="knob", cls="perf", title=f"{k} {after}",
                 slug=slug or f"s-{i}", recorded=at, target=target, knob=k, before=before,
                 after=after, places=places,
                 history=(Action(at=at, action="record", command="record knob"),))


def act(e: Entry, action: str, at: str, why: str = "", **fields) -> Entry:
    return e.with_action(Action(at=at, action=action, why=why or action, command=action),
                         **fields)


PATCH_A = """\
diff --git a/engine/x.py b/engine/x.py
--- a/engine/x.py
+++ b/engine/x.py
@@ -10,3 +10,3 @@ def f():
 a
-b
+B
 c
"""


def patch(i: str, seq: int, text: str, at="2026-12-01T10:00:00Z") -> Entry:
    return Entry(id=i, seq=seq, kind="patch", cls="bugfix", title=f"patch {i}", slug=f"p-{i}",
                 recorded=at, patch=f"patches/{i}.patch", sha256="0" * 64, files=("engine/x.py",),
                 history=(Action(at=at, action="record"),))


BASE = [knob("base0001", 1, "K_A", "2")]


def test_remote_entries_first_and_local_ones_replayed_after_them():
    ours = BASE + [knob("ours0001", 2, "K_B", "5"), knob("ours0002", 3, "K_C", "6")]
    theirs = BASE + [knob("thrs0001", 2, "K_D", "7")]
    m = merge_entries(BASE, ours, theirs)
    assert [(e.id, e.seq) for e in m.entries] == [
        ("base0001", 1), ("thrs0001", 2), ("ours0001", 3), ("ours0002", 4)]
    assert m.from_remote == ("thrs0001",)
    assert m.replayed == (("ours0001", 2, 3), ("ours0002", 3, 4))


def test_a_fast_forward_is_the_remote_ledger_exactly():
    theirs = [act(BASE[0], "revert", "2026-12-01T11:00:00Z", state="reverted"),
              knob("thrs0001", 2, "K_D", "7")]
    assert list(merge_entries(BASE, BASE, theirs).entries) == theirs
    # and the other way round: nothing new on the remote leaves the local ledger as is
    assert list(merge_entries(BASE, theirs, BASE).entries) == theirs


def test_replayed_slugs_stay_unique():
    ours = BASE + [knob("ours0001", 2, "K_B", "5", slug="raise-queue")]
    theirs = BASE + [knob("thrs0001", 2, "K_D", "7", slug="raise-queue")]
    m = merge_entries(BASE, ours, theirs)
    assert [e.slug for e in m.entries] == ["s-base0001", "raise-queue", "raise-queue-2"]
    assert m.renamed == (("ours0001", "raise-queue", "raise-queue-2"),)


def test_concurrent_actions_merge_histories_and_the_latest_decides():
    e = BASE[0]
    theirs = [act(e, "suspect", "2026-12-01T12:00:00Z", "hang", state="reverted",
                  suspicion="suspected", suspect_why="hang")]
    ours = [act(e, "revert", "2026-12-01T11:00:00Z", state="reverted")]
    m = merge_entries(BASE, ours, theirs)
    (got,) = m.entries
    assert [a.action for a in got.history] == ["record", "revert", "suspect"]
    assert (got.state, got.suspicion, got.suspect_why) == ("reverted", "suspected", "hang")
    assert m.histories == ("base0001",)
    # later local action wins
    ours = [act(e, "restore", "2026-12-01T13:00:00Z")]
    (got,) = merge_entries(BASE, ours, theirs).entries
    assert [a.action for a in got.history] == ["record", "suspect", "restore"]
    assert got.state == "applied"


def test_an_action_both_sides_made_is_kept_once():
    same = act(BASE[0], "revert", "2026-12-01T11:00:00Z", state="reverted")
    (got,) = merge_entries(BASE, [same], [same]).entries
    assert [a.action for a in got.history] == ["record", "revert"]


def test_a_suspicion_survives_a_later_plain_revert_on_the_other_side():
    e = BASE[0]
    theirs = [act(e, "suspect", "2026-12-01T11:00:00Z", "hang", state="reverted",
                  suspicion="suspected", suspect_why="hang")]
    ours = [act(e, "revert", "2026-12-01T12:00:00Z", state="reverted")]
    (got,) = merge_entries(BASE, ours, theirs).entries
    assert (got.state, got.suspicion, got.suspect_why) == ("reverted", "suspected", "hang")
    # and a clear after it on this side exonerates it
    ours = [act(e, "restore", "2026-12-01T13:00:00Z")]
    theirs = [act(theirs[0], "clear", "2026-12-01T12:00:00Z", "proxy", suspicion="cleared",
                  clear_why="proxy")]
    (got,) = merge_entries(BASE, ours, theirs).entries
    assert (got.state, got.suspicion, got.clear_why) == ("applied", "cleared", "proxy")


def test_equal_times_keep_each_sides_order_remote_first():
    t = "2026-12-01T11:00:00Z"
    theirs = [act(act(BASE[0], "revert", t, state="reverted"), "restore", t)]
    ours = [act(BASE[0], "suspect", t, state="reverted", suspicion="suspected")]
    (got,) = merge_entries(BASE, ours, theirs).entries
    assert [a.action for a in got.history] == ["record", "revert", "restore", "suspect"]
    assert got.suspicion == "suspected"


def test_two_new_entries_on_one_knob_conflict_naming_both():
    ours = BASE + [knob("ours0001", 2, "K_B", "5")]
    theirs = BASE + [knob("thrs0001", 2, "K_B", "7")]
    with pytest.raises(MergeConflict) as err:
        merge_entries(BASE, ours, theirs, recorded_by={"thrs0001": "alice in commit abc"})
    text = str(err.value)
    assert "ours0001 (s-ours0001)" in text and "thrs0001 (s-thrs0001)" in text
    assert "by alice in commit abc" in text and "knob K_B in target serve" in text
    assert err.value.local_ids == ["ours0001"]


def test_a_place_of_a_knob_conflicts_with_the_knob():
    place = {"launch 2": {"line": 9, "before": "1", "raw": "K_B=1", "anchor": None}}
    ours = BASE + [knob("ours0001", 2, "K_B", "5", places=place)]
    theirs = BASE + [knob("thrs0001", 2, "K_B", "7")]
    with pytest.raises(MergeConflict):
        merge_entries(BASE, ours, theirs)
    # the same knob in another target is no conflict
    theirs = BASE + [knob("thrs0001", 2, "K_B", "7", target="prefill")]
    assert len(merge_entries(BASE, ours, theirs).entries) == 3


def test_an_old_entry_on_the_knob_is_no_conflict():
    """A knob both sides layered before (in the base) takes a new entry from one side and
    an action from the other: merged, the new entry on top."""
    ours = [act(BASE[0], "revert", "2026-12-01T11:00:00Z", state="reverted")]
    theirs = BASE + [knob("thrs0001", 2, "K_A", "9", before="2")]
    m = merge_entries(BASE, ours, theirs)
    assert expected_knobs(m.entries) == {("serve", "K_A"): "9"}
    assert m.entries[0].state == "reverted"


def test_patches_conflict_only_on_overlapping_lines():
    other_lines = PATCH_A.replace("@@ -10,3 +10,3 @@", "@@ -40,3 +40,3 @@")
    ours, theirs = [patch("ours0001", 1, "")], [patch("thrs0001", 1, "")]
    texts = {"ours0001": PATCH_A, "thrs0001": other_lines}
    assert len(merge_entries([], ours, theirs, patch_texts=texts).entries) == 2
    texts["thrs0001"] = PATCH_A.replace("+B", "+BB")
    with pytest.raises(MergeConflict, match="engine lines engine/x.py lines 10-12"):
        merge_entries([], ours, theirs, patch_texts=texts)
    with pytest.raises(MergeConflict, match="patch texts unavailable"):
        merge_entries([], ours, theirs)


def test_hunk_ranges():
    assert hunk_ranges(PATCH_A) == {"engine/x.py": [(10, 13)]}


def test_drop_takes_a_local_entry_out_and_only_a_local_one():
    ours = BASE + [knob("ours0001", 2, "K_B", "5")]
    theirs = BASE + [knob("thrs0001", 2, "K_B", "7")]
    m = merge_entries(BASE, ours, theirs, drop=["ours0001"])
    assert [e.id for e in m.entries] == ["base0001", "thrs0001"]
    assert m.dropped == ("ours0001",)
    with pytest.raises(UsageError):
        merge_entries(BASE, ours, theirs, drop=["thrs0001"])


def test_no_entry_or_action_is_lost():
    e = BASE[0]
    ours = [act(e, "revert", "2026-12-01T11:00:00Z", state="reverted"),
            knob("ours0001", 2, "K_B", "5")]
    theirs = [act(e, "suspect", "2026-12-01T10:30:00Z", state="reverted", suspicion="suspected"),
              knob("thrs0001", 2, "K_C", "7")]
    m = merge_entries(BASE, ours, theirs)
    ids = {x.id for x in m.entries}
    assert ids == {"base0001", "ours0001", "thrs0001"}
    actions = {a for x in m.entries for a in x.history}
    assert actions == {a for x in ours + theirs for a in x.history}
    assert len({x.seq for x in m.entries}) == 3


def test_an_amended_reason_survives_a_merge_with_the_other_sides_actions():
    """`ledger amend` on one clone while the other acted on the same entry: the amended
    text is the merged entry's (the amend is in the history, so is its field)."""
    e = act(BASE[0], "suspect", "2026-12-01T11:00:00Z", "hangz", state="reverted",
            suspicion="suspected", suspect_why="hangz")
    ours = [act(e, "amend", "2026-12-01T12:00:00Z", "suspect reason amended; it was: 'hangz'",
                suspect_why="hangs")]
    theirs = [act(e, "clear", "2026-12-01T13:00:00Z", "proxy", suspicion="cleared",
                  clear_why="proxy")]
    (got,) = merge_entries([e], ours, theirs).entries
    assert [a.action for a in got.history] == ["record", "suspect", "amend", "clear"]
    assert (got.suspect_why, got.suspicion, got.clear_why) == ("hangs", "cleared", "proxy")
    # The record's why and a revert's reason too, whichever side amended them.
    r = act(BASE[0], "revert", "2026-12-01T11:00:00Z", "incidnet", state="reverted")
    theirs = [act(r, "amend", "2026-12-01T12:00:00Z", "revert reason amended; it was: "
                  "'incidnet'", revert_why="incident")]
    ours = [r.with_action(Action(at="2026-12-01T12:30:00Z", action="amend",
                                 why="record reason added", command="amend"), why="wave dip")]
    (got,) = merge_entries([r], ours, theirs).entries
    assert (got.why, got.revert_why) == ("wave dip", "incident")
