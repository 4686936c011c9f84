"""The bash target format against real bash."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.registry import KnobError
from tests.envknobs.knob_oracles import bash_launch_env
from tests.envknobs.knob_oracles import bash_source_values
from tests.envknobs.knob_oracles import knob_names
from tests.envknobs.knob_oracles import values

BASH = get_format("bash")
ORACLE = settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

DECODE_SCRIPT = """\
#!/usr/bin/env bash
# Decode server of the PD pair.  Tuned 14:14-14:48; see DSV4_DECODE_PERF_PLAN.md.
set -euo pipefail

export CUDA_VISIBLE_DEVICES=4,5,6,7
export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30   # bugfix: inflight watchdog
export MODEL="/models/glm 4.6"  LOG='a b'
PORT=30001
cat >/dev/null <<EOF
export NOT_A_KNOB=1
EOF

SGLANG_SM120_MMA_TARGET_CTAS=512 \\
  SGLANG_TRITON_DECODE_ATTN_STATIC_KV_SPLITS=1 \\
  exec env -0
export AFTER_LAUNCH=1
"""


def write(tmp_path: Path, text: str, name: str = "serve.sh") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def test_parse_reads_what_the_launched_process_sees(tmp_path: Path) -> None:
    parsed = BASH.parse(DECODE_SCRIPT)
    assert parsed == {
        "CUDA_VISIBLE_DEVICES": "4,5,6,7",
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "30",
        "MODEL": "/models/glm 4.6",
        "LOG": "a b",
        "PORT": "30001",
        "SGLANG_SM120_MMA_TARGET_CTAS": "512",
        "SGLANG_TRITON_DECODE_ATTN_STATIC_KV_SPLITS": "1",
    }
    launched = bash_launch_env(write(tmp_path, DECODE_SCRIPT))
    for knob, value in parsed.items():
        if knob != "PORT":  # a plain assignment is not exported by itself
            assert launched[knob] == value
    assert "NOT_A_KNOB" not in launched and "AFTER_LAUNCH" not in launched


def test_set_prefix_on_launch_line_changes_only_that_line(tmp_path: Path) -> None:
    out = BASH.set(DECODE_SCRIPT, "SGLANG_SM120_MMA_TARGET_CTAS", "256")
    before, after = DECODE_SCRIPT.split("\n"), out.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(before) == len(after) and changed == [12]
    assert after[12] == "SGLANG_SM120_MMA_TARGET_CTAS=256 \\"
    assert bash_launch_env(write(tmp_path, out))["SGLANG_SM120_MMA_TARGET_CTAS"] == "256"


def test_new_knob_goes_after_last_export_line() -> None:
    out = BASH.set(DECODE_SCRIPT, "SGLANG_NEW", "x y")
    lines = out.splitlines()
    assert lines[7] == "export SGLANG_NEW='x y'"
    assert lines[6].startswith("export MODEL=")
    assert BASH.unset(out, "SGLANG_NEW") == DECODE_SCRIPT


def test_new_knob_without_exports_goes_before_first_command() -> None:
    text = "#!/bin/bash\n# header\n\nset -e\npython -m engine serve\n"
    out = BASH.set(text, "K", "1")
    assert out == "#!/bin/bash\n# header\n\nexport K=1\nset -e\npython -m engine serve\n"
    assert BASH.set("", "K", "1") == "export K=1\n"
    assert BASH.set("# only a comment", "K", "1") == "# only a comment\nexport K=1"


def test_quoting_style_is_kept_when_it_fits() -> None:
    text = "export A='x' B=\"y\" C=z\n"
    out = BASH.set(BASH.set(BASH.set(text, "A", "1 2"), "B", "3 4"), "C", "5 6")
    assert out == "export A='1 2' B=\"3 4\" C='5 6'\n"
    assert BASH.set(text, "B", "$x") == "export A='x' B='$x' C=z\n"
    assert BASH.set(text, "A", "it's") == "export A='it'\\''s' B=\"y\" C=z\n"


def test_same_value_is_a_byte_identical_no_op() -> None:
    for knob, value in BASH.parse(DECODE_SCRIPT).items():
        assert BASH.set(DECODE_SCRIPT, knob, value) == DECODE_SCRIPT
    assert BASH.unset(DECODE_SCRIPT, "ABSENT") == DECODE_SCRIPT


def test_crlf_and_missing_final_newline_are_preserved() -> None:
    text = "#!/bin/bash\r\nexport A=1\r\nexport B=2"
    assert BASH.parse(text) == {"A": "1", "B": "2"}
    out = BASH.set(text, "C", "3")
    assert out == "#!/bin/bash\r\nexport A=1\r\nexport B=2\r\nexport C=3"
    assert BASH.set(text, "A", "9") == "#!/bin/bash\r\nexport A=9\r\nexport B=2"
    assert BASH.unset(out, "C") == text
    assert BASH.unset(text, "B") == "#!/bin/bash\r\nexport A=1"


def test_unset_removes_every_occurrence_the_launch_sees(tmp_path: Path) -> None:
    text = "export K=1\nexport A=2 K=3\nK=4 \\\n  exec env -0\n"
    out = BASH.unset(text, "K")
    assert out == "export A=2\nexec env -0\n"
    assert "K" not in bash_launch_env(write(tmp_path, out))


def test_unset_knob_is_not_reported_and_set_goes_after_the_unset() -> None:
    text = "export K=1\nunset K\necho hi\n"
    assert BASH.parse(text) == {}
    out = BASH.set(text, "K", "2")
    assert out == "export K=1\nunset K\nexport K=2\necho hi\n"
    assert BASH.parse(out) == {"K": "2"}


def test_computed_values_are_left_out_replaced_and_written_back() -> None:
    """A computed value is no static value, but its shell text is what the ledger records:
    a set replaces it and a set with that text as the source writes it back (issue 50);
    an append still depends on what came before, and is refused."""
    text = 'export A=$(nproc) B="$HOME/x" C=~/y D=plain E=`id` F+=x\n'
    assert BASH.parse(text) == {"D": "plain"}
    assert BASH.source(text, "A") == "$(nproc)" and BASH.source(text, "B") == '"$HOME/x"'
    assert BASH.parse_exact(text)["E"] == "`id`"
    out = BASH.set(text, "A", "4")
    assert out == text.replace("$(nproc)", "4")
    assert BASH.edit_many(out, {"A": "$(nproc)"}, {"A": "$(nproc)"}) == text
    with pytest.raises(FormatError, match=r"line 1: F is computed by the shell"):
        BASH.set(text, "F", "4")
    assert BASH.unset(text, "A") == 'export B="$HOME/x" C=~/y D=plain E=`id` F+=x\n'


def test_env_arguments_after_exec_count_as_prefixes(tmp_path: Path) -> None:
    text = "export K=1\nexec env K=2 L=3 /usr/bin/env -0\n"
    assert BASH.parse(text) == {"K": "2", "L": "3"}
    out = BASH.set(text, "K", "5")
    assert out == "export K=1\nexec env K=5 L=3 /usr/bin/env -0\n"
    assert bash_launch_env(write(tmp_path, out))["K"] == "5"


def test_exec_with_only_redirections_is_not_the_launch() -> None:
    text = "exec >/tmp/log 2>&1\nexport K=1\nK=2 python -m x\n"
    assert BASH.parse(text) == {"K": "2"}


@pytest.mark.parametrize("name", ["A;rm", "1X", "A B", "", "K=V"])
def test_bad_knob_names_are_refused(name: str) -> None:
    with pytest.raises(KnobError):
        BASH.set(DECODE_SCRIPT, name, "1")
    with pytest.raises(KnobError):
        BASH.unset(DECODE_SCRIPT, name)


@pytest.mark.parametrize("value", ["a\nb", "a\x00b", "a\rb"])
def test_bad_values_are_refused(value: str) -> None:
    with pytest.raises(KnobError):
        BASH.set(DECODE_SCRIPT, "K", value)


def test_unbalanced_quote_names_the_line() -> None:
    with pytest.raises(FormatError, match="line 2: unterminated single quote"):
        BASH.parse("export A=1\nexport B='oops\n")


def test_line_shared_with_other_commands_is_not_deleted() -> None:
    with pytest.raises(FormatError, match="line 1: K is set on a line shared"):
        BASH.unset("export K=1; cd /tmp\n", "K")


def test_hostile_value_is_data(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    value = f"$(touch {marker})`touch {marker}`'\"\\"
    path = write(tmp_path, BASH.set("#!/bin/bash\n", "K", value))
    assert bash_source_values(path, ["K"]) == {"K": value}
    assert not marker.exists()


@ORACLE
@given(st.dictionaries(knob_names, values, min_size=1, max_size=4))
def test_written_values_read_back_through_real_bash(
    tmp_path: Path, assignments: dict[str, str]
) -> None:
    text = "#!/bin/bash\n# generated\nexport KEEP=1\n"
    for knob, value in assignments.items():
        text = BASH.set(text, knob, value)
    assert BASH.parse(text) == {"KEEP": "1", **assignments}
    got = bash_source_values(write(tmp_path, text), list(assignments))
    assert got == assignments


@ORACLE
@given(knob_names, values, values)
def test_launch_prefix_and_exports_read_back_through_bash(
    tmp_path: Path, knob: str, exported: str, prefixed: str
) -> None:
    text = f"export A=1\nP_0=0 \\\n  {knob}=old \\\n  exec env -0\n"
    text = BASH.set(text, knob, prefixed)
    text = BASH.set(text, "Z_EXPORTED", exported)
    launched = bash_launch_env(write(tmp_path, text))
    assert launched[knob] == prefixed == BASH.parse(text)[knob]
    assert launched["Z_EXPORTED"] == exported


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    knob_names,
    values,
    st.sampled_from([DECODE_SCRIPT, DECODE_SCRIPT.replace("\n", "\r\n"), "x=1\n" * 50]),
)
def test_set_then_unset_of_an_absent_knob_restores_the_file(
    knob: str, value: str, text: str
) -> None:
    if knob in BASH.parse(text) or knob in text:
        return
    out = BASH.set(text, knob, value)
    assert BASH.parse(out)[knob] == value
    assert BASH.unset(out, knob) == text


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.sampled_from(sorted(BASH.parse(DECODE_SCRIPT))), values)
def test_set_of_an_existing_knob_touches_only_its_line(knob: str, value: str) -> None:
    out = BASH.set(DECODE_SCRIPT, knob, value)
    before, after = DECODE_SCRIPT.split("\n"), out.split("\n")
    assert len(before) == len(after)
    changed = [b for a, b in zip(before, after) if a != b]
    assert len(changed) <= 1 and all(knob in line for line in changed)
    assert BASH.parse(out) == {**BASH.parse(DECODE_SCRIPT), knob: value}
