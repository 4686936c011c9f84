"""Issue 25 item 1 (last part): launch flags inside an env string that the launch expands.

``Environment="VLLM_ARGS=..."`` with ``$VLLM_ARGS`` on ``ExecStart=``, an EnvironmentFile's
``VLLM_ADDITIONAL_ARGS="..."``, a script's ``SGL_PARAMS="..."`` with ``$SGL_PARAMS`` on its
launch: the flags are read with their lines, edited inside the string (every other byte
kept), and each edit is checked by the real reader: systemd (``systemd-analyze verify``,
the value then split at blanks as systemd splits ``$NAME``), python-dotenv, real bash.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dotenv import dotenv_values

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import PlaceEdit
from tests.envknobs.argstring_shapes import SGL_PARAMS_SCRIPT
from tests.envknobs.argstring_shapes import SGLANG_OPTS_UNIT
from tests.envknobs.argstring_shapes import TWO_STRINGS_ENV
from tests.envknobs.argstring_shapes import VLLM_ARGS_UNIT
from tests.envknobs.argstring_shapes import VLLM_DEFAULTS_ENV
from tests.envknobs.systemd_oracle import needs_systemd
from tests.envknobs.systemd_oracle import systemd_reads

UNIT = get_format("systemd")
DOTENV = get_format("dotenv")
BASH = get_format("bash")


def unit_argv(text: str, tmp: Path) -> list[str]:
    """The argv systemd starts: the command it parsed, each ``$NAME`` word replaced by
    the value of NAME split at blanks (systemd.service(5), "Command lines")."""
    parsed = systemd_reads(text, tmp)
    (cmd,) = parsed.commands
    out: list[str] = []
    for word in cmd:
        out += parsed.env.get(word[1:], "").split() if word.startswith("$") else [word]
    return out


def dotenv_argv(text: str, tmp: Path, name: str) -> list[str]:
    path = tmp / "vllm.env"
    path.write_text(text)
    return (dotenv_values(path)[name] or "").split()


def bash_argv(script: str, tmp: Path) -> list[str]:
    shim = tmp / "bin" / "python3"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                         check=True, timeout=30)
    return out.stdout.splitlines()


def value_after(argv: list[str], flag: str) -> str:
    return argv[len(argv) - 1 - argv[::-1].index(flag) + 1]


def changed_lines(a: str, b: str) -> list[int]:
    la, lb = a.splitlines(), b.splitlines()
    assert len(la) == len(lb)
    return [i + 1 for i, (x, y) in enumerate(zip(la, lb)) if x != y]


@needs_systemd
def test_a_units_string_of_flags_is_read_and_edited_where_it_is_written(tmp_path):
    summary = UNIT.summary(VLLM_ARGS_UNIT)
    lines = {k.knob: [p.line for p in k.places] for k in summary.knobs}
    assert lines["--max-model-len"] == [10] and lines["--port"] == [11]
    assert "VLLM_ARGS" not in lines and not any("cannot see into" in n for n in summary.notes)
    assert UNIT.parse(VLLM_ARGS_UNIT)["--gpu-memory-utilization"] == "0.90"
    out = UNIT.set(VLLM_ARGS_UNIT, "--max-model-len", "16384")
    out = UNIT.unset(out, "--gpu-memory-utilization")
    assert changed_lines(VLLM_ARGS_UNIT, out) == [10]
    argv = unit_argv(out, tmp_path)
    assert value_after(argv, "--max-model-len") == "16384"
    assert "--gpu-memory-utilization" not in argv and "--enable-prefix-caching" in argv
    assert UNIT.set(UNIT.set(out, "--max-model-len", "8192"), "--gpu-memory-utilization",
                    "0.90") != VLLM_ARGS_UNIT  # re-added: at the end of the command
    added = UNIT.set(out, "--max-num-seqs", "64")  # no string has it: last on ExecStart=
    assert value_after(unit_argv(added, tmp_path), "--max-num-seqs") == "64"


@needs_systemd
def test_a_quoted_value_keeps_its_quotes_and_the_flags_spelling(tmp_path):
    out = UNIT.set(SGLANG_OPTS_UNIT, "--tp-size", "4")
    assert out == SGLANG_OPTS_UNIT.replace("--tp 2", "--tp 4")
    assert value_after(unit_argv(out, tmp_path), "--tp") == "4"


def test_a_removed_flag_is_put_back_byte_for_byte_at_its_anchor():
    place = UNIT.knob(VLLM_ARGS_UNIT, "--gpu-memory-utilization").places[0]
    assert place.kind == "string-flag" and place.anchor["container"] == "string VLLM_ARGS"
    out = UNIT.unset(VLLM_ARGS_UNIT, "--gpu-memory-utilization")
    back = UNIT.edit_places(out, "--gpu-memory-utilization",
                            [PlaceEdit(place.key, "0.90", raw=place.raw, anchor=place.anchor)])
    assert back == VLLM_ARGS_UNIT
    for text, fmt in ((VLLM_DEFAULTS_ENV, DOTENV), (SGL_PARAMS_SCRIPT, BASH)):
        first = fmt.summary(text).knobs[-1]
        p = first.places[0]
        gone = fmt.unset(text, first.knob)
        assert fmt.edit_places(gone, first.knob, [PlaceEdit(p.key, p.value, p.raw, p.anchor)]) \
            == text


def test_ambiguous_places_are_refused_naming_every_line():
    both = VLLM_ARGS_UNIT.replace("--port 8000 $VLLM_ARGS", "$VLLM_ARGS --max-model-len 4096")
    assert "--max-model-len" not in UNIT.parse(both)
    with pytest.raises(FormatError, match=r"line 10 \(in VLLM_ARGS.*line 11 \(on ExecStart"):
        UNIT.set(both, "--max-model-len", "1024")
    with pytest.raises(FormatError, match="line 10.*line 11"):
        UNIT.unset(both, "--max-model-len")
    with pytest.raises(FormatError, match=r"line 1 \(in SERVER_ARGS.*line 2 \(in VLLM_EXTRA"):
        DOTENV.set(TWO_STRINGS_ENV, "--port", "9000")
    with pytest.raises(FormatError, match="no string of flags yet.*line 1.*line 2"):
        DOTENV.set(TWO_STRINGS_ENV, "--dtype", "half")
    script = SGL_PARAMS_SCRIPT.replace("--port 30000", "--port 30000 --enable-metrics")
    with pytest.raises(FormatError, match=r"line 4 \(in SGL_PARAMS.*line 8 \(on the launch"):
        BASH.unset(script, "--enable-metrics")


def test_the_variable_itself_and_unplain_values_are_refused():
    for fmt, text, name in ((UNIT, VLLM_ARGS_UNIT, "VLLM_ARGS"),
                            (DOTENV, VLLM_DEFAULTS_ENV, "VLLM_ADDITIONAL_ARGS"),
                            (BASH, SGL_PARAMS_SCRIPT, "SGL_PARAMS")):
        with pytest.raises(FormatError, match="record them as flags"):
            fmt.set(text, name, "--port 1")
        knob = fmt.summary(text).knobs[-1].knob
        with pytest.raises(FormatError, match="cannot be written inside"):
            fmt.set(text, knob, "a b'c")


def test_an_environment_files_string_is_edited_as_python_dotenv_reads_it(tmp_path):
    assert DOTENV.summary(VLLM_DEFAULTS_ENV).get("--max-num-seqs").places[0].line == 4
    out = DOTENV.set(VLLM_DEFAULTS_ENV, "--max-num-seqs", "256")
    out = DOTENV.unset(out, "--enable-chunked-prefill")
    out = DOTENV.set(out, "--enforce-eager", "true")
    assert changed_lines(VLLM_DEFAULTS_ENV, out) == [4]
    argv = dotenv_argv(out, tmp_path, "VLLM_ADDITIONAL_ARGS")
    assert argv == ["--max-model-len", "32768", "--max-num-seqs", "256", "--enforce-eager"]
    assert DOTENV.parse(out)["HF_HOME"] == "/srv/hf" and DOTENV.summary("A=1\n") is None


def test_a_scripts_string_is_edited_as_bash_splits_it(tmp_path):
    assert value_after(bash_argv(SGL_PARAMS_SCRIPT, tmp_path), "--mem-fraction-static") == "0.8"
    out = BASH.set(SGL_PARAMS_SCRIPT, "--mem-fraction-static", "0.85")
    out = BASH.unset(out, "--trust-remote-code")
    assert changed_lines(SGL_PARAMS_SCRIPT, out) == [4]
    argv = bash_argv(out, tmp_path)
    assert value_after(argv, "--mem-fraction-static") == "0.85"
    assert "--trust-remote-code" not in argv and "--enable-metrics" in argv
    assert BASH.parse(out)["--port"] == "30000"
    quoted = SGL_PARAMS_SCRIPT.replace("  $SGL_PARAMS", '  "$SGL_PARAMS"')
    assert "--enable-metrics" not in BASH.parse(quoted)  # one argument: not split


def test_a_string_from_an_environment_file_is_named_with_its_file_line():
    from envknobs.formats.systemd import SystemdFormat

    unit = ("[Service]\nEnvironmentFile=/etc/default/vllm\n"
            "ExecStart=/usr/bin/vllm serve m $VLLM_ARGS\n")
    fmt = SystemdFormat(read=lambda path: {"HF_HOME": 1, "VLLM_ARGS": 3})
    assert any("$VLLM_ARGS, set in /etc/default/vllm:3" in n and "--format dotenv" in n
               for n in fmt.outside_notes(unit))
    shadowed = unit.replace("EnvironmentFile", 'Environment="VLLM_ARGS=--port 8000"\n'
                            "EnvironmentFile")
    with pytest.raises(FormatError, match="/etc/default/vllm:3.*wins over Environment="):
        fmt.set(shadowed, "--port", "8001")


def test_sglangs_short_spelling_is_the_catalogs_flag_in_a_dotenv_string():
    text = 'SGLANG_OPTS="--port 30000 --tp 2"\n'
    assert DOTENV.canonical(text, "--tp") == "--tp-size"
    assert DOTENV.set(text, "--tp", "4") == text.replace("--tp 2", "--tp 4")


def test_a_string_both_launches_expand_reaches_both(tmp_path):
    from tests.envknobs.argstring_shapes import PD_COMMON_SCRIPT

    assert BASH.select_places(PD_COMMON_SCRIPT, "--tp", None) == ()
    out = BASH.set(PD_COMMON_SCRIPT, "--tp", "16")
    argv = bash_argv(out, tmp_path)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--tp"] == ["16", "16"]
    with pytest.raises(FormatError, match="--at/--all select places on launch lines"):
        BASH.set(PD_COMMON_SCRIPT, "--tp", "16", at=3)
