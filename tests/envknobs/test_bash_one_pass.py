"""One pass over a serve script: the batch edit equals editing knob by knob, and the
analysis of a text is made once however many questions a command asks about it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.bash import analysis
from envknobs.formats.common.text import each_in_turn
from tests.envknobs.bash_fixtures import ALL
from tests.envknobs.test_formats_bash import DECODE_SCRIPT

BASH = get_format("bash")
SCRIPTS = {name: text for name, (text, _) in ALL.items()} | {"decode": DECODE_SCRIPT}


def _single_place_knobs(text: str) -> list[str]:
    return [k.knob for k in BASH.summary(text).knobs
            if len(k.places) == 1 and not k.needs_selection and not k.places[0].computed]


def _one_at_a_time(text: str, edits: dict[str, str | None]) -> str | Exception:
    """The edits one knob at a time through ``unset``/``set``, removals first, in the order
    the batch promises (:func:`~envknobs.formats.common.text.each_in_turn`: a knob refused
    only because another edit is not made yet goes after the rest; its own tests are
    test_a_batch_does_not_depend_on_the_order_of_its_edits and the one after it)."""
    try:
        text = each_in_turn(text, [k for k, v in edits.items() if v is None], BASH.unset)
        return each_in_turn(text, [k for k, v in edits.items() if v is not None],
                            lambda t, k: BASH.set(t, k, edits[k]))
    except FormatError as e:
        return e


def _batch(text: str, edits: dict[str, str | None]) -> str | Exception:
    try:
        return BASH.edit_many(text, edits)
    except FormatError as e:
        return e


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_single_place_knob_changed_at_once_equals_one_at_a_time(name):
    text = SCRIPTS[name]
    knobs = _single_place_knobs(text)
    assert knobs, name
    edits = {k: f"v{i} x" if not k.startswith("-") else str(100 + i) for i, k in enumerate(knobs)}
    one, batch = _one_at_a_time(text, edits), _batch(text, edits)
    if isinstance(one, Exception):
        assert isinstance(batch, Exception) and str(batch) == str(one)
    else:
        assert batch == one and batch != text


@settings(max_examples=60, derandomize=True, deadline=None)
@given(data=st.data())
def test_random_batches_equal_one_at_a_time(data):
    name = data.draw(st.sampled_from(sorted(SCRIPTS)))
    text = SCRIPTS[name]
    knobs = [k.knob for k in BASH.summary(text).knobs]
    chosen = data.draw(st.lists(st.sampled_from(knobs), min_size=1, max_size=6, unique=True))
    values = st.one_of(st.none(), st.sampled_from(["1", "32", "a b", "$HOME", "'q'", "0.9"]))
    edits = {k: data.draw(values) for k in chosen}
    one, batch = _one_at_a_time(text, edits), _batch(text, edits)
    if isinstance(one, Exception):
        assert isinstance(batch, Exception) and str(batch) == str(one)
    else:
        assert batch == one


def test_an_unchanged_batch_is_the_same_text():
    knobs = _single_place_knobs(DECODE_SCRIPT)
    values = BASH.parse(DECODE_SCRIPT)
    assert BASH.edit_many(DECODE_SCRIPT, {k: values[k] for k in knobs if k in values}) == DECODE_SCRIPT


class _Counting:
    """Counts the analyses made (the real ones: the class is wrapped, not replaced)."""

    def __init__(self, monkeypatch):
        self.texts: list[str] = []
        real = analysis.Analysis.__init__

        def counted(inner, text):
            self.texts.append(text)
            real(inner, text)

        monkeypatch.setattr(analysis.Analysis, "__init__", counted)
        analysis._ANALYSES.clear()


def test_one_text_is_analysed_once_whatever_is_asked(monkeypatch):
    seen = _Counting(monkeypatch)
    for _ in range(3):
        BASH.summary(DECODE_SCRIPT)
        BASH.parse(DECODE_SCRIPT)
        BASH.canonical(DECODE_SCRIPT, "--tp")
        BASH.select_places(DECODE_SCRIPT, "CUDA_VISIBLE_DEVICES", None)
    assert seen.texts == [DECODE_SCRIPT]


def test_the_cache_forgets_the_oldest_texts(monkeypatch):
    seen = _Counting(monkeypatch)
    texts = [f"export K{i}=1\n" for i in range(analysis._KEPT + 1)]
    for t in itertools.chain(texts, texts[-1:]):
        BASH.parse(t)
    assert len(seen.texts) == len(texts)  # the last one came from the cache
    BASH.parse(texts[0])  # pushed out by the newer ones: analysed again
    assert len(seen.texts) == len(texts) + 1
    assert len(analysis._ANALYSES) == analysis._KEPT


def test_a_batch_of_changes_is_read_and_verified_once(monkeypatch):
    knobs = [k for k in _single_place_knobs(DECODE_SCRIPT) if not k.startswith("-")]
    assert len(knobs) >= 5
    seen = _Counting(monkeypatch)
    out = BASH.edit_many(DECODE_SCRIPT, {k: "77" for k in knobs})
    assert seen.texts == [DECODE_SCRIPT, out]  # the script, then the edit's verification
    assert all(BASH.parse(out)[k] == "77" for k in knobs)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_knob_removed_at_once_equals_one_at_a_time(name):
    text = SCRIPTS[name]
    edits = {k.knob: None for k in BASH.summary(text).knobs}
    one, batch = _one_at_a_time(text, edits), _batch(text, edits)
    if isinstance(one, Exception):
        assert isinstance(batch, Exception) and str(batch) == str(one)
    else:
        assert batch == one


def test_removals_on_lines_of_their_own_are_read_and_verified_once(monkeypatch):
    text = "#!/bin/bash\nexport A=1\nexport B=2  # perf\nexport C=3\nexec python -m sglang.launch_server --port 1\n"
    seen = _Counting(monkeypatch)
    out = BASH.edit_many(text, {"A": None, "C": None, "D": None})
    assert out == "#!/bin/bash\nexport B=2  # perf\nexec python -m sglang.launch_server --port 1\n"
    assert seen.texts == [text, out]


def test_removals_sharing_a_statement_go_one_at_a_time_as_before():
    text = "#!/bin/bash\nexport A=1 B=2\nexec python -m sglang.launch_server --port 1\n"
    assert BASH.edit_many(text, {"A": None, "B": None}) == _one_at_a_time(text, {"A": None, "B": None})
    assert "export" not in BASH.edit_many(text, {"A": None, "B": None})


def test_removals_and_changes_together_are_read_and_verified_once(monkeypatch):
    text = ("#!/bin/bash\nexport A=1\nexport B=2  # perf\nexport C=3\n"
            "exec python -m sglang.launch_server --port 1 \\\n    --tp 2\n")
    seen = _Counting(monkeypatch)
    edits = {"A": None, "B": "20", "--tp": "4", "C": None}
    out = BASH.edit_many(text, edits)
    assert out == ("#!/bin/bash\nexport B=20  # perf\n"
                   "exec python -m sglang.launch_server --port 1 \\\n    --tp 4\n")
    assert seen.texts == [text, out]
    monkeypatch.undo()
    assert out == _one_at_a_time(text, edits)


# -- absent knobs added together (a restore putting back knobs the revert took out) ----

# Shapes where a new knob's place is decided differently: no export yet (before the first
# command), exports only after a function, no trailing newline, CRLF, indented exports,
# nothing but assignments, an `unset` of a knob being added, a docker launch (`-e`).
ADD_SHAPES = {
    "exports": "#!/bin/bash\nexport A=1\nexport B=2  # perf\nexec python -m sglang.launch_server --port 1\n",
    "no export": "#!/bin/bash\nset -e\nMODEL=/m\npython -m sglang.launch_server --model $MODEL\n",
    "no newline": "export A=1\nexec python -m sglang.launch_server --port 1",
    "only assignments": "# env only\nFOO=1\nBAR=2",
    "crlf": "#!/bin/bash\r\nexport A=1\r\nexec python -m sglang.launch_server --port 1\r\n",
    "indented": "  export A=1\n  exec python -m sglang.launch_server --port 1\n",
    "unset": "#!/bin/bash\nexport A=1\nunset NEW_1\nexec python -m sglang.launch_server --port 1\n",
    "empty": "",
}


def _added_one_at_a_time(text: str, values: dict[str, str]) -> str | Exception:
    try:
        for knob, value in values.items():
            text = BASH.set(text, knob, value)
        return text
    except FormatError as e:
        return e


def _added_together(text: str, values: dict[str, str]) -> str | Exception:
    try:
        return BASH.add_many(text, values)
    except FormatError as e:
        return e


@settings(max_examples=80, derandomize=True, deadline=None)
@given(data=st.data())
def test_absent_knobs_added_together_equal_one_at_a_time(data):
    scripts = {**SCRIPTS, **ADD_SHAPES}
    text = scripts[data.draw(st.sampled_from(sorted(scripts)))]
    present = {k.knob for k in BASH.summary(text).knobs}
    names = [n for n in ("NEW_1", "NEW_2", "NEW_3", "SGLANG_X", "A", "MODEL_NAME") if n not in present]
    chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    values = {k: data.draw(st.sampled_from(["1", "a b", "$HOME", "'q'", "0.9", ""])) for k in chosen}
    one, together = _added_one_at_a_time(text, values), _added_together(text, values)
    if isinstance(one, Exception):
        assert isinstance(together, Exception) and str(together) == str(one)
    else:
        assert together == one


@pytest.mark.parametrize("name", sorted({**SCRIPTS, **ADD_SHAPES}))
def test_three_absent_knobs_in_every_shape_equal_one_at_a_time(name):
    text = {**SCRIPTS, **ADD_SHAPES}[name]
    values = {"NEW_1": "1", "NEW_2": "two words", "NEW_3": "3"}
    one, together = _added_one_at_a_time(text, values), _added_together(text, values)
    if isinstance(one, Exception):
        assert isinstance(together, Exception) and str(together) == str(one)
    else:
        assert together == one
        assert all(BASH.parse(together)[k] == v for k, v in values.items())


def test_absent_knobs_added_together_are_read_and_verified_once(monkeypatch):
    text = ADD_SHAPES["exports"]
    seen = _Counting(monkeypatch)
    out = BASH.add_many(text, {"C": "3", "D": "4", "E": "5"})
    assert seen.texts == [text, out]
    assert out == ("#!/bin/bash\nexport A=1\nexport B=2  # perf\nexport C=3\nexport D=4\n"
                   "export E=5\nexec python -m sglang.launch_server --port 1\n")


def test_an_unset_of_a_knob_being_added_goes_one_at_a_time(monkeypatch):
    text = ADD_SHAPES["unset"]
    seen = _Counting(monkeypatch)
    out = BASH.add_many(text, {"NEW_1": "1", "NEW_2": "2"})
    assert len(seen.texts) > 2  # not the one pass: a new line goes after the `unset`
    monkeypatch.undo()
    assert out == _added_one_at_a_time(text, {"NEW_1": "1", "NEW_2": "2"})
    assert BASH.parse(out)["NEW_1"] == "1"


def test_a_batch_does_not_depend_on_the_order_of_its_edits():
    """``--model "$MODEL"`` alone cannot go (MODEL would be read by nothing, a change of
    MODEL); with MODEL in the same batch it can, in either order."""
    text = SCRIPTS["docker_vllm"]
    with pytest.raises(FormatError, match="nothing would read MODEL, which only --model reads"):
        BASH.unset(text, "--model")
    out = BASH.edit_many(text, {"--model": None, "MODEL": None})
    assert BASH.edit_many(text, {"MODEL": None, "--model": None}) == out
    assert not {"--model", "MODEL"} & set(BASH.parse(out))
    assert out == BASH.unset(BASH.unset(text, "MODEL"), "--model")
    # With two wrapper env flags beside them the one-pass batch gives way to one edit at a
    # time, which once took them in the order given and refused --model.
    more = {"--model": None, "MODEL": None, "HUGGING_FACE_HUB_TOKEN": None,
            "VLLM_ATTENTION_BACKEND": None}
    out = BASH.edit_many(text, more)
    assert not set(more) & set(BASH.parse(out))


def test_a_refused_batch_names_the_lines_of_the_file_as_given():
    """A batch whose first edit removes a line and whose second is refused names the
    places as the file has them, not as the half-made batch had them (it said lines 5 and
    12 of a file that has them at 6 and 13)."""
    text = SCRIPTS["functions_and_loops"]
    lines = text.splitlines()
    assert lines[5] == "export SGLANG_X=1" and lines[12] == "SGLANG_X=2"
    with pytest.raises(FormatError) as refused:
        BASH.edit_many(text, {"port": None, "SGLANG_X": None})
    assert "line 6 (top level: export SGLANG_X=1); line 13 (top level: SGLANG_X=2)" in \
        str(refused.value)
