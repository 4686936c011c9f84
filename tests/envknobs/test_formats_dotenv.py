"""The dotenv target format against real python-dotenv and real bash."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.common.text import holds_flags
from envknobs.formats.dotenv import render_value
from envknobs.registry import KnobError
from tests.envknobs.knob_oracles import bash_source_values
from tests.envknobs.knob_oracles import dotenv_read
from tests.envknobs.knob_oracles import knob_names
from tests.envknobs.knob_oracles import plain_values
from tests.envknobs.knob_oracles import values

DOTENV = get_format("dotenv")
ORACLE = settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ENV_FILE = """\
# /etc/sglang/decode.env -- EnvironmentFile= of sglang-decode.service
SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30   # bugfix: inflight watchdog
export SGLANG_SM120_MMA_TARGET_CTAS=512
MODEL_PATH='/models/glm 4.6'
EXTRA_ARGS="--tp 4 --log-level \\"info\\""
EMPTY=
COMMENTED= # nothing here

PEM="-----BEGIN-----
abc
-----END-----"
"""


def representable(value: str) -> bool:
    try:
        render_value(value)
    except FormatError:
        return False
    return True


def test_a_value_that_makes_a_string_of_flags_is_refused_naming_the_knob() -> None:
    for knob in ("SGLANG_SM120_MMA_TARGET_CTAS", "NEW_ARGS"):  # a value replaced, a new line
        with pytest.raises(FormatError, match=f"^{knob}: the new value is a string of launch "
                           "flags.*ledger record flag"):
            DOTENV.set(ENV_FILE, knob, "--max-num-seqs 256")


def test_parse_agrees_with_python_dotenv() -> None:
    parsed = DOTENV.parse(ENV_FILE)
    assert parsed == {k: v for k, v in dotenv_read(ENV_FILE).items() if v is not None}
    assert parsed["EXTRA_ARGS"] == '--tp 4 --log-level "info"'
    assert parsed["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] == "30"


def test_set_existing_keeps_comment_export_and_other_lines() -> None:
    out = DOTENV.set(ENV_FILE, "SGLANG_SM120_MMA_TARGET_CTAS", "256")
    assert out == ENV_FILE.replace("CTAS=512", "CTAS=256")
    out = DOTENV.set(ENV_FILE, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "60 s")
    assert "SGLANG_DISAGGREGATION_WAITING_TIMEOUT='60 s'   # bugfix: inflight watchdog\n" in out
    assert DOTENV.set(ENV_FILE, "COMMENTED", "x").count("COMMENTED=x # nothing here\n") == 1


def test_quote_style_is_kept_when_it_fits() -> None:
    out = DOTENV.set(ENV_FILE, "MODEL_PATH", "/models/kimi")
    assert "MODEL_PATH='/models/kimi'\n" in out
    # (a quoted word inside: bash, systemd and Python split it differently, so the
    # value stays one env knob rather than a string of flags: test_arg_strings)
    out = DOTENV.set(ENV_FILE, "EXTRA_ARGS", '--tp 8 --log-level "debug"')
    assert 'EXTRA_ARGS="--tp 8 --log-level \\"debug\\""\n' in out


def test_new_knob_is_appended_without_export() -> None:
    out = DOTENV.set(ENV_FILE, "NEW_KNOB", "$(touch /tmp/pwned)")
    assert out == ENV_FILE + "NEW_KNOB='$(touch /tmp/pwned)'\n"
    assert DOTENV.unset(out, "NEW_KNOB") == ENV_FILE


def test_no_op_set_and_unset_are_byte_identical() -> None:
    for knob, value in DOTENV.parse(ENV_FILE).items():
        if "\n" not in value:
            assert DOTENV.set(ENV_FILE, knob, value) == ENV_FILE
    assert DOTENV.unset(ENV_FILE, "ABSENT") == ENV_FILE


def test_crlf_and_no_final_newline() -> None:
    text = "A=1\r\nB=2"
    assert DOTENV.set(text, "C", "3") == "A=1\r\nB=2\r\nC=3"
    assert DOTENV.unset(DOTENV.set(text, "C", "3"), "C") == text
    assert DOTENV.unset(text, "B") == "A=1"
    assert DOTENV.set(text, "A", "x y") == "A='x y'\r\nB=2"


def test_unset_removes_every_line_and_multiline_values() -> None:
    text = "K=1\nA=2\nK=3\n"
    assert DOTENV.unset(text, "K") == "A=2\n"
    assert DOTENV.unset(ENV_FILE, "PEM") == ENV_FILE.split("PEM=")[0]


def test_interpolated_values_are_left_out_and_refused() -> None:
    text = "A=1\nB=${A}/x\n"
    assert DOTENV.parse(text) == {"A": "1"}
    with pytest.raises(FormatError, match="line 2: B interpolates"):
        DOTENV.set(text, "B", "2")


@pytest.mark.parametrize("value", ["${HOME}", "it's $HOME", "a\\\\b$c", "'`"])
def test_values_no_quoting_can_carry_are_refused(value: str) -> None:
    with pytest.raises(FormatError, match="K: value"):
        DOTENV.set(ENV_FILE, "K", value)


@pytest.mark.parametrize("name", ["A;rm", "1X", "A B"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(KnobError):
        DOTENV.set(ENV_FILE, name, "1")


def test_bad_values_are_refused() -> None:
    with pytest.raises(KnobError):
        DOTENV.set(ENV_FILE, "K", "a\nb")


def test_written_hostile_value_is_data_in_bash(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    value = f'$(touch {marker}) `touch {marker}` "x"'
    path = tmp_path / "x.env"
    path.write_text(DOTENV.set("", "K", value))
    assert bash_source_values(path, ["K"], prelude="set -a; ") == {"K": value}
    assert dotenv_read(path.read_text())["K"] == value
    assert not marker.exists()


@ORACLE
@given(st.dictionaries(knob_names, plain_values.filter(representable), min_size=1, max_size=4))
def test_written_values_read_back_through_python_dotenv_and_bash(
    tmp_path: Path, assignments: dict[str, str]
) -> None:
    text = "# generated\nKEEP=1\n"
    for knob, value in assignments.items():
        text = DOTENV.set(text, knob, value)
    assert DOTENV.parse(text) == {"KEEP": "1", **assignments}
    read = dotenv_read(text)
    assert {k: read[k] for k in assignments} == assignments
    path = tmp_path / "gen.env"
    path.write_text(text, encoding="utf-8")
    assert bash_source_values(path, list(assignments), prelude="set -a; ") == assignments


@settings(max_examples=100, derandomize=True, deadline=None)
@given(values)
def test_every_value_is_either_written_exactly_or_refused(value: str) -> None:
    try:
        out = DOTENV.set(ENV_FILE, "SGLANG_SM120_MMA_TARGET_CTAS", value)
    except FormatError as e:
        if holds_flags(value):  # its flags would be read as knobs of their own
            assert "string of launch flags" in str(e) or not representable(value), str(e)
        else:
            assert not representable(value)
        return
    assert dotenv_read(out)["SGLANG_SM120_MMA_TARGET_CTAS"] == value
    changed = [b for a, b in zip(ENV_FILE.split("\n"), out.split("\n")) if a != b]
    assert len(changed) == (value != "512")
    assert all(line.startswith("export SGLANG_SM120_MMA_TARGET_CTAS=") for line in changed)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(knob_names, plain_values.filter(representable))
def test_set_then_unset_of_an_absent_knob_restores_the_file(knob: str, value: str) -> None:
    if knob in ENV_FILE:
        return
    for text in (ENV_FILE, ENV_FILE.replace("\n", "\r\n"), ENV_FILE.rstrip("\n")):
        out = DOTENV.set(text, knob, value)
        assert DOTENV.parse(out)[knob] == value
        assert DOTENV.unset(out, knob) == text


line_shapes = st.sampled_from(["{k}={v}", "export {k}={v}", "{k}='{v}'", '{k}="{v}"',
                               "{k}={v}   # tuned", "# about {k}", "", "{k}"])


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.tuples(line_shapes, knob_names, st.sampled_from(["1", "2", "a b", ""])),
                min_size=1, max_size=12),
       st.sampled_from(["\n", "\r\n"]), st.booleans(), st.data())
def test_edit_many_is_the_edits_one_at_a_time(lines, eol, final_newline, data):
    text = eol.join(shape.format(k=k, v=v) for shape, k, v in lines) + (eol if final_newline
                                                                       else "")
    present = DOTENV.parse(text)
    if not present:
        return
    knobs = data.draw(st.lists(st.sampled_from(sorted(present)), unique=True, min_size=1))
    edits = {k: data.draw(st.sampled_from([None, "1", "new value", present[k]])) for k in knobs}
    one_at_a_time = text
    for k, v in edits.items():
        one_at_a_time = DOTENV.unset(one_at_a_time, k) if v is None else \
            DOTENV.set(one_at_a_time, k, v)
    assert DOTENV.edit_many(text, edits) == one_at_a_time
    expected = {k: v for k, v in present.items() if edits.get(k, v) is not None}
    expected.update({k: v for k, v in edits.items() if v is not None})
    assert DOTENV.parse(one_at_a_time) == expected


def test_edit_many_refuses_an_absent_knob_and_an_interpolated_one():
    with pytest.raises(FormatError, match="not set in the file"):
        DOTENV.edit_many("A=1\n", {"B": "2"})
    with pytest.raises(FormatError, match="line 2: B interpolates"):
        DOTENV.edit_many("A=1\nB=${A}\n", {"A": None, "B": "2"})
