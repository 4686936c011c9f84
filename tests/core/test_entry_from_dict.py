"""``Entry.from_dict``'s fast path (``__dict__`` filled at once) builds exactly what the
constructor builds, every field reading the same, and validates like it; the instance
holds only the values that differ from the defaults (``ledger.core.frozen.built``)."""

from __future__ import annotations

import pickle
from dataclasses import MISSING
from dataclasses import fields
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.core.action import Action
from ledger.core.changes import CHANGES
from ledger.core.identifiers import slugify
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


def _same_fields(built, made) -> None:
    """Every field of ``built`` reads what the constructor's ``made`` holds, and
    ``built`` itself holds exactly the fields that are not at their default."""
    assert type(built) is type(made)
    for f in fields(made):
        assert getattr(built, f.name) == getattr(made, f.name), f.name
    held = {f.name for f in fields(made)
            if f.default is MISSING or type(getattr(made, f.name)) is not type(f.default)
            or getattr(made, f.name) != f.default}
    assert set(vars(built)) == held


@pytest.mark.parametrize("entry", [KNOB, PATCH], ids=["knob", "patch"])
def test_from_dict_builds_what_the_constructor_builds(entry):
    again = Entry.from_dict(entry.to_dict())
    assert again == entry
    _same_fields(again, entry)
    for a, b in zip(again.history, entry.history):
        _same_fields(a, b)
    assert hash(again.history) == hash(entry.history)
    assert pickle.loads(pickle.dumps(again)) == entry
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
    _same_fields(after, replace(KNOB, state="applied", suspicion=None,
                                history=KNOB.history + (action,)))
    assert "suspicion" not in vars(after) and "state" not in vars(after)  # back at defaults
    with pytest.raises(InvalidValue, match="unknown state"):
        KNOB.with_action(action, state="gone")
    with pytest.raises(TypeError, match="colour"):
        KNOB.with_action(action, colour="red")
    with pytest.raises(TypeError, match="history"):
        KNOB.with_action(action, history=())


def _reference_from_dict(d):
    """The constructor path from_dict took before its fast path: what it must equal.
    A field of another kind's change (a ``commit`` in a knob entry's object) is not the
    entry's: it is not read, as it was never written back."""
    def opt(key):
        v = d.get(key)
        return None if v is None else str(v)

    def own(**change):
        kind = CHANGES.get(str(d["kind"]))
        names = {f.name for f in fields(kind)} if kind else set()
        return {k: v() for k, v in change.items() if k in names}

    return Entry(
        id=str(d["id"]), seq=int(d["seq"]), kind=str(d["kind"]), cls=str(d["class"]),
        title=str(d["title"]), slug=str(d.get("slug") or slugify(str(d["title"]))),
        recorded=str(d["recorded"]), state=str(d.get("state", "applied")),
        why=str(d.get("why") or ""), suspicion=opt("suspicion"),
        suspect_why=str(d.get("suspect_why") or ""), clear_why=str(d.get("clear_why") or ""),
        **own(target=lambda: opt("target"), knob=lambda: opt("knob"),
              before=lambda: opt("before"), after=lambda: opt("after"),
              anchor=lambda: d.get("anchor") if isinstance(d.get("anchor"), dict) else None,
              places=lambda: dict(d["places"]) if isinstance(d.get("places"), dict) else None,
              at=lambda: opt("at"), before_source=lambda: opt("before_source"),
              after_source=lambda: opt("after_source"), before_lines=lambda: opt("before_lines"),
              after_lines=lambda: opt("after_lines"), patch=lambda: opt("patch"),
              sha256=lambda: opt("sha256"),
              files=lambda: tuple(str(f) for f in d.get("files") or ()),
              commit=lambda: opt("commit"),
              plan=lambda: d.get("plan") if isinstance(d.get("plan"), dict) else None,
              body=lambda: str(d.get("body") or "")),
        history=tuple(Action(at=str(a["at"]), action=str(a["action"]),
                             why=str(a.get("why") or ""), command=str(a.get("command") or ""))
                      for a in d.get("history") or ()),
    )


def _outcome(build, d):
    try:
        return build(d)
    except Exception as e:  # the same failure, whichever path
        return type(e)


SCALARS = st.one_of(st.none(), st.text(max_size=4), st.integers(-2, 600), st.booleans(),
                    st.just("x"), st.just(""), st.just("SGLANG_Q"), st.just("applied"))


@settings(max_examples=300, deadline=None)
@given(base=st.sampled_from([KNOB.to_dict(), PATCH.to_dict()]),
       changes=st.dictionaries(st.sampled_from(sorted({*KNOB.to_dict(), *PATCH.to_dict(), "at",
                                                       "places"})), SCALARS, max_size=4),
       history_why=SCALARS)
def test_from_dict_equals_the_constructor_path_on_any_values(base, changes, history_why):
    d = {**base, **changes}
    if isinstance(d.get("history"), list):
        d["history"] = [{**a, "why": history_why} for a in d["history"]]
    assert _outcome(Entry.from_dict, d) == _outcome(_reference_from_dict, d)


def test_equal_history_actions_are_built_once_across_the_ledger():
    """A bulk revert writes one action into thousands of histories: read back, those are
    one object (so the cached ledger holds it once), equal to what was written, and an
    action that differs in any field is its own."""
    from ledger.store.entries_file import entries_bytes
    from ledger.store.entries_file import parse_entries

    revert = Action("2026-12-03T00:00:00Z", "revert", "suspect", "revert --perf-only")
    other = Action("2026-12-03T00:00:00Z", "revert", "suspect!", "revert --perf-only")
    entries = [Entry(id=f"e{i:04d}", seq=i, kind="knob", cls="perf", title=f"t{i}", slug=f"t{i}",
                     recorded="2026-12-01T00:00:00Z", target="decode", knob=f"SGLANG_K{i}",
                     before="1", after="2", state="reverted",
                     history=(Action(f"2026-12-01T00:00:0{i}Z", "record"),
                              other if i == 3 else revert))
               for i in range(1, 6)]
    back = parse_entries(entries_bytes(entries).decode(), "entries.jsonl")
    assert back == entries
    reverts = [e.history[1] for e in back]
    assert len({id(a) for a in reverts}) == 2  # `revert` once, `other` once
    assert reverts[0] is reverts[1] is reverts[3] and reverts[2] is not reverts[0]
    assert len({id(e.history[0]) for e in back}) == 5  # records at their own times
