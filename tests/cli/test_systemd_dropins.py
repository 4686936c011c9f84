"""Issue 25, systemd drop-ins: ``NAME.service.d/*.conf`` beside a unit target.

systemd reads them after the unit, so ``target show`` names each with what it overrides,
and an edit of the unit that a drop-in overrides (its ``Environment=``, ``UnsetEnvironment=``,
``EnvironmentFile=`` for env knobs, its ``ExecStart=`` for flags) exits 1 naming the
drop-in's ``file:line``, the unit untouched; an edit no drop-in reaches goes through.
Drop-ins modelled on the usual ``systemctl edit vllm`` overrides (``override.conf``).
"""

from __future__ import annotations

import pytest

from tests.envknobs.argstring_shapes import VLLM_ARGS_UNIT

OVERRIDE_ENV = """\
[Service]
Environment="HF_HOME=/mnt/fast/hf"
"""

OVERRIDE_CMD = """\
[Service]
ExecStart=
ExecStart=/opt/vllm/bin/vllm serve Qwen/Qwen2.5-7B-Instruct --port 8001 $VLLM_ARGS
"""


@pytest.fixture
def unit(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    path = tmp_path / "vllm.service"
    path.write_text(VLLM_ARGS_UNIT)
    (tmp_path / "vllm.service.d").mkdir()
    (tmp_path / "vllm.service.d" / "10-env.conf").write_text(OVERRIDE_ENV)
    r = ledger("-C", root, "target", "add", "u", path, "--format", "systemd")
    assert r.exit_code == 0, r.stderr

    class Unit:
        parent = tmp_path

        def run(self, *a):
            return ledger("-C", root, *a)

        def read_text(self):
            return path.read_text()

    return Unit()


def test_target_show_names_each_drop_in_and_what_it_overrides(unit):
    notes = unit.run("target", "show", "u", "--json").json()["notes"]
    drop_in = unit.parent / "vllm.service.d" / "10-env.conf"
    assert any(str(drop_in) in n and 'line 2: Environment="HF_HOME=/mnt/fast/hf"' in n
               for n in notes)


def test_an_env_edit_a_drop_in_overrides_exits_1_naming_it(unit):
    r = unit.run("record", "knob", "u", "HF_HOME=/srv/hf", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and r.stderr.startswith("error: ")
    assert f"{unit.parent / 'vllm.service.d' / '10-env.conf'}:2" in r.stderr
    assert unit.read_text() == VLLM_ARGS_UNIT
    r = unit.run("record", "knob", "u", "VLLM_LOGGING_LEVEL=DEBUG", "--class", "perf",
                 "--title", "t")
    assert r.exit_code == 0, r.stderr
    r = unit.run("record", "flag", "u", "--max-model-len=4096", "--class", "perf", "--title", "t")
    assert r.exit_code == 0, r.stderr


def test_a_flag_edit_under_a_drop_in_execstart_exits_1(unit):
    (unit.parent / "vllm.service.d" / "20-cmd.conf").write_text(OVERRIDE_CMD)
    for args in (["--port=8002"], ["--max-model-len=4096"], ["--enforce-eager"]):
        r = unit.run("record", "flag", "u", *args, "--class", "perf", "--title", "t")
        assert r.exit_code == 1 and "20-cmd.conf:2" in r.stderr, r.stderr
    assert unit.read_text() == VLLM_ARGS_UNIT


def test_a_string_flag_whose_variable_a_drop_in_sets_exits_1(unit):
    (unit.parent / "vllm.service.d" / "30-args.conf").write_text(
        '[Service]\nEnvironment="VLLM_ARGS=--max-model-len 2048"\n')
    r = unit.run("record", "flag", "u", "--max-model-len=4096", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and "30-args.conf:2" in r.stderr, r.stderr
    assert unit.read_text() == VLLM_ARGS_UNIT
