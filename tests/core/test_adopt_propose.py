"""The pure proposer of `ledger adopt` (ledger.core.adopt): one proposal per knob change,
a change back to an earlier value proposed as those changes reverted."""

from __future__ import annotations

from ledger.core.adopt import Version
from ledger.core.adopt import propose


def _v(n: int, **values) -> Version:
    return Version(f"v{n}", f"2026-12-0{n}T00:00:00Z",
                   {k: v for k, v in values.items() if v is not None})


def _rows(found) -> list[tuple]:
    return [(p.knob, p.before, p.after, p.when, (p.reverted or {}).get("origin"))
            for p in found.items]


def test_back_to_the_base_reverts_every_change_stacked_on_it():
    found = propose([_v(1, K="1"), _v(2, K="2"), _v(3, K="3"), _v(4, K="1")])
    assert _rows(found) == [("K", "1", "2", "2026-12-02T00:00:00Z", "v4"),
                            ("K", "2", "3", "2026-12-03T00:00:00Z", "v4")]


def test_back_one_step_reverts_only_the_last_change():
    found = propose([_v(1), _v(2, K="2"), _v(3, K="3"), _v(4, K="2"), _v(5, K="2")])
    assert _rows(found) == [("K", None, "2", "2026-12-02T00:00:00Z", None),
                            ("K", "2", "3", "2026-12-03T00:00:00Z", "v4")]
    assert found.items[0].held_in == 4  # its lines are read from the last version holding it


def test_a_new_value_after_a_revert_is_a_new_change_and_knobs_interleave_by_date():
    found = propose([_v(1, A="x"), _v(2, A="y", B="1"), _v(3, A="x", B="1"),
                     _v(4, A="z", B=None)])
    assert _rows(found) == [("A", "x", "y", "2026-12-02T00:00:00Z", "v3"),
                            ("B", None, "1", "2026-12-02T00:00:00Z", "v4"),
                            ("A", "x", "z", "2026-12-04T00:00:00Z", None)]


def test_a_knob_without_one_value_is_named_only_where_its_text_changed():
    same = [Version("v1", "", {}, {"M": '"${M:-a}"'}), Version("v2", "", {}, {"M": '"${M:-a}"'})]
    assert propose(same).items == [] and propose(same).unclear == []
    moved = [Version("v1", "", {"M": "1"}), Version("v2", "", {}, {"M": "$(nproc)"})]
    found = propose(moved)
    assert found.items == [] and found.unclear == ["M: cannot be read in v2 ($(nproc)): not proposed"]
