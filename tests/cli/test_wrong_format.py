"""Issue 25 item 5: a file given as the wrong format is refused, naming the one to use.

Before, a systemd unit, a compose file or a manifest added as ``dotenv`` or ``bash`` read
as a file without knobs, and ``record knob`` appended ``K=V`` / ``export K=V`` that
systemd, compose or kubectl never read, and exited 0.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from dotenv import dotenv_values

from tests.envknobs.foreign_shapes import FOREIGN
from tests.envknobs.foreign_shapes import VLLM_UNIT


def _workspace(tmp_path: Path, ledger) -> list[str]:
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    return ["-C", str(root)]


def _config(tmp_path: Path) -> bytes:
    return (tmp_path / "ws" / "ledger.yaml").read_bytes()


@pytest.mark.parametrize("fmt", ["dotenv", "bash"])
@pytest.mark.parametrize("shape", sorted(FOREIGN))
def test_target_add_refuses_a_file_of_another_format(tmp_path, ledger, shape, fmt):
    text, name, kind = FOREIGN[shape]
    f = tmp_path / name
    f.write_text(text)
    C = _workspace(tmp_path, ledger)
    before = _config(tmp_path)
    r = ledger(*C, "target", "add", "t", str(f), "--format", fmt)
    assert r.exit_code == 1, r.stdout
    assert r.stderr.startswith("error: ") and str(f) in r.stderr
    assert kind in r.stderr
    assert f"not a {fmt} file" in r.stderr or f"as a {fmt} file" in r.stderr
    assert "--format" in r.stderr  # the format to use
    assert _config(tmp_path) == before and f.read_text() == text


def test_the_refusals_name_the_format_and_address_to_use(tmp_path, ledger):
    C = _workspace(tmp_path, ledger)
    expected = {
        "systemd unit": "manage the file its EnvironmentFile= names (/etc/vllm/vllm.env) as --format dotenv",
        "compose (env list)": "(services: vllm): use --format yaml-map --key-path services.NAME.environment;",
        "compose (env map)": "(services: vllm_service): use --format yaml-map --key-path services.NAME.environment;",
        "k8s deployment": "use --format k8s --container NAME",
        "helm values": "use --format yaml-map (--key-path PATH",
    }
    for i, (shape, advice) in enumerate(expected.items()):
        text, name, _ = FOREIGN[shape]
        f = tmp_path / name
        f.write_text(text)
        r = ledger(*C, "target", "add", f"t{i}", str(f), "--format", "dotenv")
        assert r.exit_code == 1 and advice in r.stderr, (shape, r.stderr)


def test_a_file_that_became_another_format_is_refused_at_load(tmp_path, ledger):
    """A target added as dotenv whose path now holds the unit (a mixed-up deploy, a
    hand-edited ledger.yaml): record knob refuses, writes nothing, records nothing."""
    C = _workspace(tmp_path, ledger)
    f = tmp_path / "vllm.env"
    f.write_text("VLLM_LOGGING_LEVEL=INFO\n")
    assert ledger(*C, "target", "add", "env", str(f), "--format", "dotenv").exit_code == 0
    f.write_text(VLLM_UNIT)
    entries = (tmp_path / "ws" / "entries.jsonl").read_bytes()
    r = ledger(*C, "record", "knob", "env", "VLLM_USE_V1=1", "--class", "perf", "--title", "v1")
    assert r.exit_code == 1 and "systemd unit" in r.stderr and str(f) in r.stderr
    assert f.read_text() == VLLM_UNIT
    assert (tmp_path / "ws" / "entries.jsonl").read_bytes() == entries


def test_the_refused_shapes_are_what_their_readers_say(tmp_path):
    """The fixtures are real: PyYAML loads the YAML ones, systemd parses the unit, and
    python-dotenv reading the unit sees no Environment= knob (what an appended line
    would have pretended to manage)."""
    for shape, (text, name, _) in FOREIGN.items():
        if name.endswith((".yaml", ".yml")):
            assert isinstance(yaml.safe_load(text), dict), shape
    unit = tmp_path / "vllm.service"
    unit.write_text(VLLM_UNIT)
    assert "VLLM_LOGGING_LEVEL" not in dotenv_values(unit)
    try:
        out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                             text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return
    # verify reports a missing binary or user on this machine, never a syntax error
    assert "Unknown section" not in out.stderr and "Invalid" not in out.stderr, out.stderr


DOTENV_WITH_COLONS = 'URL=http://proxy:3128\nNOTE=foo: bar\nMOTD="key: value\n- item"\n'
SCRIPT_WRITING_A_UNIT = """\
#!/bin/bash
export SGLANG_ENABLE_JIT_DEEPGEMM=0
cat > /etc/systemd/system/sglang.service <<'EOF'
[Unit]
Description=SGLang
EOF
cat > /tmp/config.yaml <<'EOF'
model-path: /models/x
tp-size: 2
EOF
exec python3 -m sglang.launch_server --config /tmp/config.yaml --port 30000
"""


@pytest.mark.parametrize(("text", "fmt"), [(DOTENV_WITH_COLONS, "dotenv"),
                                           (SCRIPT_WRITING_A_UNIT, "bash")])
def test_files_that_only_look_foreign_are_still_managed(tmp_path, ledger, text, fmt):
    C = _workspace(tmp_path, ledger)
    f = tmp_path / ("x.env" if fmt == "dotenv" else "serve.sh")
    f.write_text(text)
    assert ledger(*C, "target", "add", "t", str(f), "--format", fmt).exit_code == 0
    r = ledger(*C, "record", "knob", "t", "SGLANG_X=1", "--class", "perf", "--title", "x")
    assert r.exit_code == 0, r.stderr
    assert "SGLANG_X=1" in f.read_text()
