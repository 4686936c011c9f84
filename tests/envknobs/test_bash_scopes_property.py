"""Random serve scripts of branches, loops, lists, functions, arrays and launch lines.

For every knob, on every path real bash takes: the value the format reports is the one
bash gives the launch, or the format says ``conditional`` (and bash's value is still one
of the places it names).  Edits at every place (``at=ALL``) and at one place reach
exactly the paths they should, pass ``bash -n``, and revert byte for byte.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import HealthCheck
from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import FormatError
from envknobs.formats.common.places import ALL
from envknobs.formats.common.places import AmbiguousKnob
from envknobs.formats.common.places import PlaceEdit
from tests.envknobs.knob_oracles import bash_launch_grid
from tests.envknobs.knob_oracles import bash_syntax_ok
from tests.envknobs.scope_oracle import BASH
from tests.envknobs.scope_oracle import check_reading
from tests.envknobs.scope_oracle import observed

GRID = [
    {"C1": c1, "C2": c2, "M": m, "LOOP": loop}
    for c1, c2, m, loop in itertools.product("01", "01", "abc", ["", "1 2"])
]
PROPERTY = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
KNOBS = ["K", "L"]
VALUES = ["1", "2", "a b", "x'y", "3"]
FLAGS = [
    ("--mem-fraction-static", ("0.5", "0.8")),
    ("--chunked-prefill-size", ("512", "1024")),
    ("--disable-radix-cache", (None,)),
]

values = st.sampled_from(VALUES)


def _q(value: str) -> str:
    from envknobs.formats.common.shellwords import quote_value

    return quote_value(value)


@st.composite
def flag_words(draw) -> str:
    words = []
    for name, choices in draw(st.lists(st.sampled_from(FLAGS), max_size=2, unique=True)):
        value = draw(st.sampled_from(choices))
        if value is None:
            words.append(name)
        else:
            words.append(f"{name}={value}" if draw(st.booleans()) else f"{name} {value}")
    return " ".join(words)


@st.composite
def leaf(draw) -> list[str]:
    kind = draw(st.sampled_from(["export", "assign", "unset", "launch", "array", "append"]))
    knob = draw(st.sampled_from(KNOBS))
    if kind == "export":
        return [f"export {knob}={_q(draw(values))}"]
    if kind == "assign":
        return [f"{knob}={_q(draw(values))}"]
    if kind == "unset":
        return [f"unset {knob}"]
    if kind in ("array", "append"):
        op = "=" if kind == "array" else "+="
        return [f"args{op}( {draw(flag_words())} )"]
    prefix = "".join(f"{k}={_q(draw(values))} " for k in draw(st.lists(st.sampled_from(KNOBS), max_size=2, unique=True)))
    arrays = ' "${args[@]}"' if draw(st.booleans()) else ""
    flags = draw(flag_words())
    return [f"{prefix}python3 -m sglang.launch_server{arrays} {flags} &".replace("  ", " ")]


def block(draw, depth: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        lines += statement(draw, depth)
    return lines


def indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def statement(draw, depth: int) -> list[str]:
    kind = draw(st.sampled_from(["leaf", "leaf", "if", "case", "loop", "list", "subshell", "exit"]))
    if depth == 0 or kind == "leaf":
        return draw(leaf())
    if kind == "if":
        out = ['if [ "$C1" = 1 ]; then', *indent(block(draw, depth - 1))]
        if draw(st.booleans()):
            out += ['elif [ "$C2" = 1 ]; then', *indent(block(draw, depth - 1))]
        if draw(st.booleans()):
            out += ["else", *indent(block(draw, depth - 1))]
        return out + ["fi"]
    if kind == "case":
        out = ['case "$M" in']
        for pattern in ["a", "b"] + (["*"] if draw(st.booleans()) else []):
            out += [f"  {pattern})", *indent(block(draw, depth - 1)), "    ;;"]
        return out + ["esac"]
    if kind == "loop":
        return ["for i in $LOOP; do", *indent(block(draw, depth - 1)), "done"]
    if kind == "list":
        (line,) = draw(leaf()) or [":"]
        return [f'[ "$C2" = 1 ] && {line.rstrip(" &")}' + (" &" if line.endswith("&") else "")]
    if kind == "subshell":
        return ["(", *indent(block(draw, depth - 1)), ")"]
    return ['if [ "$M" = c ] && [ "$C1" = 0 ]; then', "    exit 0", "fi"]


@st.composite
def scripts(draw) -> str:
    lines = ["#!/bin/bash"]
    for _ in range(draw(st.integers(1, 4))):
        lines += statement(draw, 2)
    lines += draw(leaf()) if draw(st.booleans()) else ["python3 -m sglang.launch_server --port 1 &"]
    lines.append("wait")
    return "\n".join(lines) + "\n"


def _readable(text: str) -> bool:
    """The format reads it, or refuses it as too intricate (a FormatError, never a guess)."""
    try:
        BASH.summary(text)
    except FormatError as e:
        assert "too many possible contents" in str(e) or "too intricate" in str(e), e
        return False
    return True


def _run(tmp_path: Path, text: str, names: list[str]) -> list:
    path = tmp_path / "gen.sh"
    path.write_text(text)
    return bash_launch_grid(path, names, GRID)


@PROPERTY
@given(scripts())
def test_reported_values_are_what_bash_sees_on_every_path(tmp_path: Path, text: str) -> None:
    assume(bash_syntax_ok(text) and _readable(text))
    check_reading(text, tmp_path / "gen.sh", GRID)
    # ...and nothing bash passes to a launch is missed.
    summary = BASH.summary(text)
    known = {k.knob for k in summary.knobs}
    for runs in _run(tmp_path, text, KNOBS):
        for record in runs:
            for knob in KNOBS:
                if record.values[knob] is not None:
                    assert knob in known, (knob, record)
            for name, _ in FLAGS:
                if name in " ".join(record.argv):
                    assert name in known, (name, record)


def _observe_all(tmp_path: Path, text: str, knob) -> list[list[str | None]]:
    summary = BASH.summary(text)
    out = []
    for runs in _run(tmp_path, text, [knob.knob] if not knob.is_flag else []):
        out.append([(r.line, observed(r, knob, False, "sglang")) for r in runs])
    assert summary is not None
    return out


@PROPERTY
@given(scripts(), st.data())
def test_edits_reach_exactly_the_selected_places_and_revert(tmp_path: Path, text: str, data) -> None:
    assume(bash_syntax_ok(text) and _readable(text))
    summary = BASH.summary(text)
    editable = [k for k in summary.knobs if k.places and not k.computed and k.knob in KNOBS + [f for f, _ in FLAGS[:2]]]
    assume(editable)
    knob = data.draw(st.sampled_from(editable))
    new = "Z9" if not knob.is_flag else "0.25"
    if knob.needs_selection:
        try:
            BASH.set(text, knob.knob, new)
        except AmbiguousKnob as e:
            assert {p.line for p in e.places} == set(knob.lines)
        else:
            raise AssertionError("an edit of a knob with several places picked one")
    before = _observe_all(tmp_path, text, knob)
    try:
        out = BASH.set(text, knob.knob, new, at=ALL)
    except FormatError:
        return  # refused (e.g. a statement shared with other assignments): nothing to check
    assert bash_syntax_ok(out), out
    after = _observe_all(tmp_path, out, knob)
    for old_run, new_run in zip(before, after):
        # Background launches report in any order: compare per launch line, as counts.
        # A path that saw a place sees the new value; one that saw none may too, when the
        # place it passed was an `unset K` (a place, which --all sets as well).
        for line in {line for line, _ in old_run}:
            old = [v for n, v in old_run if n == line]
            got = [v for n, v in new_run if n == line]
            assert len(got) == len(old) and set(got) <= {None, new}
            assert got.count(new) >= sum(v is not None for v in old), (line, old, got)
    edits = [PlaceEdit(p.key, p.value, raw=p.raw, anchor=p.anchor) for p in knob.places]
    assert BASH.edit_places(out, knob.knob, edits) == text
    # one place only: the others keep their values
    place = data.draw(st.sampled_from(knob.places))
    try:
        one = BASH.set(text, knob.knob, new, at=place.line)
    except FormatError:
        return
    assert bash_syntax_ok(one)
    others = {p.key: p.value for p in knob.places if p.key != place.key}
    now = BASH.knob(one, knob.knob)
    assert {p.key: p.value for p in now.places if p.key != place.key} == others
    assert next(p for p in now.places if p.key == place.key).value == new
    assert BASH.edit_places(one, knob.knob, [PlaceEdit(place.key, place.value, raw=place.raw)]) == text
