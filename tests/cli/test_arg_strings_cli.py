"""Issue 25 item 1 through the CLI: flags inside an env string (a unit's VLLM_ARGS, an
EnvironmentFile's VLLM_ADDITIONAL_ARGS, a script's SGL_PARAMS).

``target show`` lists them with the string's line; ``record flag`` / ``--unset`` edit them
inside the string; ``revert`` puts the file back byte for byte; an ambiguous flag exits
1 naming every ``file:line``, the file untouched.
"""

from __future__ import annotations

import pytest

from tests.envknobs.argstring_shapes import SGL_PARAMS_SCRIPT
from tests.envknobs.argstring_shapes import TWO_STRINGS_ENV
from tests.envknobs.argstring_shapes import VLLM_ARGS_UNIT
from tests.envknobs.argstring_shapes import VLLM_DEFAULTS_ENV


@pytest.fixture
def ws(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0

    class W:
        def add(self, name: str, file: str, text: str, fmt: str):
            path = tmp_path / file
            path.write_text(text)
            r = ledger("-C", root, "target", "add", name, path, "--format", fmt)
            assert r.exit_code == 0, r.stderr
            return path

        def run(self, *a):
            return ledger("-C", root, *a)

    return W()


@pytest.mark.parametrize("fmt,file,text,flag,old,new", [
    ("systemd", "vllm.service", VLLM_ARGS_UNIT, "--gpu-memory-utilization", "0.90", "0.85"),
    ("dotenv", "vllm.env", VLLM_DEFAULTS_ENV, "--max-num-seqs", "128", "256"),
    ("bash", "start.sh", SGL_PARAMS_SCRIPT, "--mem-fraction-static", "0.8", "0.7"),
])
def test_record_unset_and_revert_a_flag_in_a_string(ws, fmt, file, text, flag, old, new):
    path = ws.add("t", file, text, fmt)
    line = next(i + 1 for i, ln in enumerate(text.splitlines()) if f"{flag} {old}" in ln)
    shown = ws.run("target", "show", "t", "--json").json()
    (k,) = [k for k in shown["knobs"] if k["knob"] == flag]
    assert [p["line"] for p in k["places"]] == [line] and k["value"] == old
    r = ws.run("record", "flag", "t", f"{flag}={new}", "--class", "perf", "--title", "a")
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == text.replace(f"{flag} {old}", f"{flag} {new}")
    r = ws.run("record", "flag", "t", flag, "--unset", "--class", "perf", "--title", "b")
    assert r.exit_code == 0, r.stderr
    assert flag not in path.read_text()
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == text
    assert ws.run("restore", "--perf-only").exit_code == 0
    assert flag not in path.read_text()


def test_an_ambiguous_flag_exits_1_naming_each_file_line(ws):
    path = ws.add("env", "args.env", TWO_STRINGS_ENV, "dotenv")
    r = ws.run("record", "flag", "env", "--port=9000", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and r.stderr.startswith("error: ")
    assert f"{path}:1" in r.stderr and f"{path}:2" in r.stderr
    assert path.read_text() == TWO_STRINGS_ENV
    r = ws.run("record", "knob", "env", "SERVER_ARGS=--port 1", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and "record them as flags" in r.stderr


def test_a_string_both_launches_expand_is_one_place(ws):
    from tests.envknobs.argstring_shapes import PD_COMMON_SCRIPT

    path = ws.add("pd", "pd.sh", PD_COMMON_SCRIPT, "bash")
    r = ws.run("record", "flag", "pd", "--tp=16", "--class", "perf", "--title", "t")
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == PD_COMMON_SCRIPT.replace("--tp 8", "--tp 16")
    r = ws.run("record", "flag", "pd", "--tp=4", "--at", "3", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and "string of flags" in r.stderr
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == PD_COMMON_SCRIPT
