"""Issue 25 item 3 through the CLI: a systemd unit as ``--format systemd``.

``target show`` lists its Environment= knobs and ExecStart= flags with their lines and
the EnvironmentFile= it names; ``record knob`` / ``record flag`` edit it, ``revert``
puts it back byte for byte; an edit that would take no effect exits 1 naming the line,
the unit untouched.
"""

from __future__ import annotations

import pytest

from tests.envknobs.systemd_oracle import needs_systemd
from tests.envknobs.systemd_oracle import systemd_reads
from tests.envknobs.systemd_shapes import DOCKER_UNIT
from tests.envknobs.systemd_shapes import DYNAMO_UNIT
from tests.envknobs.systemd_shapes import VLLM_UNIT


@pytest.fixture
def ws(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0

    def add(name: str, text: str):
        path = tmp_path / f"{name}.service"
        path.write_text(text)
        r = ledger("-C", root, "target", "add", name, path, "--format", "systemd")
        assert r.exit_code == 0, r.stderr
        return path

    class W:
        pass

    w = W()
    w.root, w.add = root, add
    w.run = lambda *a: ledger("-C", root, *a)
    return w


def test_target_show_lists_env_and_flags_with_lines_and_the_environment_file(ws, tmp_path):
    env = tmp_path / "vllm.env"
    env.write_text("VLLM_LOGGING_LEVEL=DEBUG\n")
    ws.add("unit", VLLM_UNIT.replace("/etc/vllm/vllm.env", str(env)))
    d = ws.run("target", "show", "unit", "--json").json()
    lines = {k["knob"]: [p["line"] for p in k["places"]] for k in d["knobs"]}
    assert lines["CUDA_VISIBLE_DEVICES"] == [11] and lines["HF_HOME"] == [12]
    assert lines["--max-num-seqs"] == [15]
    assert any(str(env) in n and "VLLM_LOGGING_LEVEL (line 1)" in n for n in d["notes"])


@needs_systemd
def test_record_and_revert_env_and_flag_byte_for_byte(ws, tmp_path):
    unit = ws.add("dyn", DYNAMO_UNIT)
    r = ws.run("record", "knob", "dyn", "DYN_LOG", "--unset", "--class", "perf", "--title", "t")
    assert r.exit_code == 0, r.stderr
    r = ws.run("record", "flag", "dyn", "--max-model-len=8192", "--class", "perf", "--title", "t",
               "--json")
    assert r.exit_code == 0, r.stderr
    got = systemd_reads(unit.read_text(), tmp_path / "..")
    assert "DYN_LOG" not in got.env and "--max-model-len=8192" in got.commands[0]
    r = ws.run("record", "flag", "dyn", "--enforce-eager", "--unset", "--class", "perf",
               "--title", "t")
    assert r.exit_code == 0, r.stderr
    assert "--enforce-eager" not in systemd_reads(unit.read_text(), tmp_path / "..").commands[0]
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert unit.read_text() == DYNAMO_UNIT
    shown = ws.run("target", "show", "dyn")
    assert shown.exit_code == 0 and "DYN_LOG" in shown.stdout and "--max-model-len" in shown.stdout


def test_an_edit_that_takes_no_effect_exits_1_naming_the_line(ws):
    unit = ws.add("docker", DOCKER_UNIT)
    r = ws.run("record", "knob", "docker", "HF_HOME=/x", "--class", "perf", "--title", "t")
    assert r.exit_code == 1
    assert r.stderr.startswith("error: ") and "line 9" in r.stderr and "docker" in r.stderr
    assert unit.read_text() == DOCKER_UNIT
