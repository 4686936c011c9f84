"""`record`'s planner alone (ledger.core.recording): no files, no git, no clock, no catalogs.

A target file here is a :class:`TargetFile` built from text; the one edit a command makes
is an :class:`Edited` written by hand, as the format would give it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core import recording
from ledger.core.action import Action
from ledger.core.model import Entry
from ledger.core.managed_file import Target
from ledger.core.recording import Asked
from ledger.core.recording import NewEntry
from ledger.core.recording import Past
from ledger.core.recording import RecordOptions
from ledger.core.target_file import Edited
from ledger.core.target_file import TargetFile
from ledger.errors import Drift
from ledger.errors import DriftError
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.errors import UsageError

AT = "2026-12-02T00:00:00Z"
K = "SGLANG_SM120_MMA_TARGET_CTAS"
SCRIPT = f"#!/bin/bash\nexport {K}=256\nexec python -m sglang.launch_server\n"
TARGETS = {"decode": Target("decode", "decode.sh", "bash"),
           "prefill": Target("prefill", "prefill.sh", "bash"),
           "cfg": Target("cfg", "cfg.yaml", "yaml-map")}


def tf(text: str = SCRIPT, name: str = "decode", **values) -> TargetFile:
    return TargetFile(TARGETS[name], Path(f"/srv/{name}.sh"), text.encode(), values)


def opts(value: str | None = "512", **kw) -> RecordOptions:
    return RecordOptions.of(**{"target": "decode", "knob": K, "value": value, "cls": "perf",
                               "title": "ctas", **kw})


def entry(seq: int, before, after, state="applied", target="decode") -> Entry:
    return Entry(id=f"e{seq:07d}", seq=seq, kind="knob", cls="perf", title=f"e{seq}",
                 slug=f"e{seq}", recorded=AT, state=state, target=target, knob=K,
                 before=before, after=after, history=(Action(AT, "record"),))


NEW = NewEntry(id="e0000009", seq=9, slug="ctas", now=AT, command="ledger record knob")


# -- options -------------------------------------------------------------------------


def test_options_are_checked_together_before_anything_is_read():
    checked = opts(past=Past(when="2026-12-01T10:00")).checked(AT, TARGETS.__getitem__)
    assert checked.past.when.startswith("2026-12-01T10:00")
    cases = [
        (opts(at=3, targets=["decode", "prefill"], target=None), "name one target"),
        (opts(at=3, target="cfg"), "select places in a bash script"),
        (opts(at="all", adopt=True, before_given=True), "--adopt records a whole knob"),
        (opts(before="1", before_given=True), "only go with --adopt"),
        (opts(adopt=True), "--adopt needs --before"),
        (opts(string=True), "--string is for YAML targets"),
        (opts(past=Past(suspected=True)), "go with --already-reverted"),
    ]
    for o, message in cases:
        with pytest.raises(UsageError, match=message):
            o.checked(AT, TARGETS.__getitem__)


def test_options_name_their_targets_once():
    assert opts().targets == ("decode",) and not opts().several
    many = RecordOptions.of(targets=["decode", "prefill"], knob=K, value="1", cls="perf",
                            title="t")
    assert many.target == "decode" and many.several


# -- the before value ------------------------------------------------------------------


def test_before_is_the_ledgers_value_which_the_file_must_hold():
    assert recording.before_value(tf(**{K: "256"}), [], opts(), K, []) == "256"
    layer = [entry(1, "128", "256")]
    assert recording.before_value(tf(**{K: "256"}), layer, opts(), K, []) == "256"
    with pytest.raises(DriftError):  # the file says 300, the ledger 256
        recording.before_value(tf(**{K: "300"}), layer, opts(), K, [])
    drift = Drift("/srv/decode.sh", K, "256", "300", "decode")
    forced = opts(force=True)
    assert recording.before_value(tf(**{K: "300"}), layer, forced, K, [drift]) == "300"


def test_a_change_that_changes_nothing_is_refused_with_the_files_close_names():
    with pytest.raises(Refused, match="already '512': nothing to record"):
        recording.before_value(tf(**{K: "512"}), [], opts(), K, [])
    hint = " (did you mean SGLANG_X (line 2)?)"
    with pytest.raises(Refused, match=r"already unset \(did you mean SGLANG_X"):
        recording.before_value(tf(), [], opts(None), K, [], Asked(hint=hint))
    several = opts(targets=["decode", "prefill"], target=None)
    with pytest.raises(Refused, match="leave that target out"):
        recording.before_value(tf(**{K: "512"}), [], several, K, [])


def test_an_adopted_change_must_be_in_the_file_and_agree_with_the_ledger():
    adopted = opts(adopt=True, before="256", before_given=True)
    assert recording.before_value(tf(**{K: "512"}), [], adopted, K, []) == "256"
    with pytest.raises(Refused, match="make it first"):
        recording.before_value(tf(**{K: "256"}), [], adopted, K, [])
    with pytest.raises(Refused, match="the ledger expects '128'"):
        recording.before_value(tf(**{K: "512"}), [entry(1, "64", "128")], adopted, K, [])


def test_the_inversion_trap_and_its_way_out():
    taken_back = opts("128")  # entry 1 made it 256 from 128: recording 128 is its revert
    with pytest.raises(Refused, match="perf entry"):
        recording.before_value(tf(**{K: "256"}), [entry(1, "128", "256")], taken_back, K, [])
    fine = opts("128", past=Past(not_a_revert=True))
    assert recording.before_value(tf(**{K: "256"}), [entry(1, "128", "256")], fine, K,
                                  []) == "256"
    adopted_to_default = opts("64", adopt=True, before="512", before_given=True)
    with pytest.raises(Refused, match="perf entry"):
        recording.before_value(tf(**{K: "64"}), [], adopted_to_default, K, [],
                               Asked(default="64"))


def test_already_reverted_of_the_value_the_file_holds_is_an_adopt():
    o = opts(past=Past(already_reverted=True))
    with pytest.raises(Refused, match="it is not reverted; record it with --adopt"):
        recording.before_value(tf(**{K: "512"}), [], o, K, [])


# -- places ----------------------------------------------------------------------------


class Place:
    def __init__(self, key, line, raw):
        self.key, self.line, self.raw, self.anchor = key, line, raw, {"line": line}


def test_selected_places_keep_their_own_old_value_and_skip_those_already_there():
    places = {f"{K}@launch 2": "256", f"{K}@launch 5": "512"}
    f = TargetFile(TARGETS["decode"], Path("/srv/decode.sh"), b"", {}, None, places)
    chosen = [Place("launch 2", 2, f"{K}=256"), Place("launch 5", 5, f"{K}=512")]
    got = recording.selected_places(f, [], K, "512", chosen, force=False)
    assert got == {"launch 2": {"line": 2, "before": "256", "raw": f"{K}=256",
                                "anchor": {"line": 2}}}
    with pytest.raises(Refused, match="at line 5: nothing to record"):
        recording.selected_places(f, [], K, "512", chosen[1:], force=False)
    assert recording.selected_places(f, [], K, "512", [], force=False) is None


# -- exact texts and the plan ----------------------------------------------------------


def test_a_new_knob_keeps_the_lines_it_adds_and_a_removal_the_lines_it_takes():
    without = "#!/bin/bash\nexec python -m sglang.launch_server\n"
    added = Edited(SCRIPT.encode(), anchor={"lines": ["#!/bin/bash"]}, after_source="256")
    texts = recording.exact_texts(tf(without), added, None, "256", adopt=False)
    assert texts["after_lines"] == f"export {K}=256\n" and texts["before_lines"] is None
    assert texts["anchor"] == {"lines": ["#!/bin/bash"]} and texts["before_source"] is None
    removed = Edited(without.encode(), anchor={"lines": ["#!/bin/bash"]}, before_source="256")
    texts = recording.exact_texts(tf(SCRIPT), removed, "256", None, adopt=False)
    assert texts["before_lines"] == f"export {K}=256\n" and texts["after_source"] is None
    assert texts["before_source"] == "256"


def test_an_adopted_hand_added_knob_keeps_its_lines_as_written():
    hand = SCRIPT.replace("=256", "=512   # +12.8% see PLAN.md")
    without = "#!/bin/bash\nexec python -m sglang.launch_server\n"
    done = Edited(hand.encode(), after_source="512", without=without)
    adopted = opts(adopt=True, before=None, before_given=True)
    assert recording.wants_without(tf(hand, **{K: "512"}), adopted, K, None)
    texts = recording.exact_texts(tf(hand), done, None, "512", adopt=True)
    assert texts["after_lines"] == f"export {K}=512   # +12.8% see PLAN.md\n"
    assert "before_source" not in texts


def test_one_change_across_targets_is_one_entry_each_target_its_own_before():
    o = RecordOptions.of(targets=["decode", "prefill"], knob=K, value="512", cls="perf",
                         title="ctas", why="c64")
    files = {"decode": tf(**{K: "256"}), "prefill": tf(name="prefill")}
    edits = {"decode": Edited(SCRIPT.replace("256", "512").encode(), after_source="512"),
             "prefill": Edited(b"", after_source="512")}
    plan, message = recording.plan_knob(NEW, o, K, files, {"decode": "256", "prefill": None},
                                        edits)
    (e,) = plan.added
    assert (e.id, e.target, e.before, e.after) == ("e0000009", "decode", "256", "512")
    assert e.also == {"prefill": {"before": None, "after_source": "512"}}
    assert plan.knob_edits == {("decode", K): ("256", "512"), ("prefill", K): (None, "512")}
    assert message.startswith(f"record perf {K}='512' in decode,prefill: ctas\n")


def test_a_change_already_reverted_by_hand_writes_nothing_and_is_reverted():
    o = opts(past=Past(already_reverted=True, when="2026-12-01T10:00",
                       reverted_why="hang", suspected=True)).checked(AT, TARGETS.__getitem__)
    edits = {"decode": Edited(SCRIPT.encode(), after_source="512")}
    plan, message = recording.plan_knob(NEW, o, K, {"decode": tf(**{K: "256"})},
                                        {"decode": "256"}, edits)
    (e,) = plan.added
    assert plan.knob_edits == {} and e.state == "reverted" and e.suspicion == "suspected"
    assert [a.action for a in e.history] == ["adopt", "suspect"]
    assert "(already reverted)" in message and "\nWhen: 2026-12-01T10:00" in message


def test_an_entry_needs_a_title():
    places = {"launch 2": {"line": 2, "before": "256", "raw": "x", "anchor": None}}
    with pytest.raises(InvalidValue, match="--title must not be empty"):
        recording.plan_places(NEW, opts(title="  ", at=2), K, places)


def test_a_change_at_places_records_each_place():
    places = {"launch 2": {"line": 2, "before": "256", "raw": "x", "anchor": None}}
    plan, message = recording.plan_places(NEW, opts(at=2), K, places)
    (e,) = plan.added
    assert e.places == places and e.at == "2" and e.before == "256"
    assert plan.knob_edits == {("decode", f"{K}@launch 2"): ("256", "512")}
    assert " at line 2: ctas" in message
