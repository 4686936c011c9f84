"""Issue 50 item 4: a serve script held in a YAML file (SkyPilot's ``run: |``) as a
``bash`` target at a key path: its flags and exports are read and edited as in a serve
script, the block keeps its indentation and other lines, lines are the file's, and a
revert is byte-exact.  The fixture follows the shape of SkyPilot's vLLM serving YAMLs
(``resources:``, ``envs:``, ``setup: |`` installing, ``run: |`` launching)."""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

SKYPILOT = """\
# Serving an 8B model with vLLM on one GPU.
#   sky launch -c vllm serve.yaml
resources:
  accelerators: {L4, A10g, A100}
  ports: 8081

envs:
  MODEL_NAME: meta-llama/Llama-3.1-8B-Instruct

setup: |
  pip install vllm==0.9.2

run: |
  export VLLM_ATTENTION_BACKEND=FLASHINFER
  # one replica per node
  vllm serve $MODEL_NAME \\
    --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE \\
    --max-num-seqs 128 \\
    --host 0.0.0.0 --port 8081
"""


def test_the_script_is_read_at_file_lines():
    run = get_format("bash", key_path="run")
    assert run.parse(SKYPILOT)["--max-num-seqs"] == "128"
    assert run.parse(SKYPILOT)["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    found = run.summary(SKYPILOT)
    lines = {k.knob: k.places[0].line for k in found.knobs}
    assert lines["VLLM_ATTENTION_BACKEND"] == 14 and lines["--max-num-seqs"] == 18
    assert found.launches[0].line == 16


def test_an_edit_keeps_the_block_and_reverts_exactly():
    run = get_format("bash", key_path="run")
    out = run.set(SKYPILOT, "--max-num-seqs", "256")
    assert "    --max-num-seqs 256 \\\n" in out
    assert out.replace("256", "128", 1) == SKYPILOT
    added = run.set(SKYPILOT, "--enable-prefix-caching", "true")
    assert "    --enable-prefix-caching \\\n" in added or "--enable-prefix-caching" in added
    assert run.unset(added, "--enable-prefix-caching") == SKYPILOT
    env = run.set(SKYPILOT, "VLLM_USE_V1", "1")
    assert "  export VLLM_USE_V1=1\n" in env
    assert run.unset(env, "VLLM_USE_V1") == SKYPILOT


def test_a_script_that_is_no_literal_block_is_refused_with_its_line():
    with pytest.raises(FormatError, match=r"line 10: the string at 'setup' is not a literal"):
        get_format("bash", key_path="setup").parse(SKYPILOT.replace("setup: |", "setup: >"))
    with pytest.raises(FormatError, match="holds no string"):
        get_format("bash", key_path="resources").parse(SKYPILOT)


def test_record_and_revert_through_the_cli(ws):  # noqa: F811
    path = ws.add("serve.yaml", SKYPILOT, "--format", "bash", "--key-path", "run")
    r = ws.record("--max-num-seqs=256")
    assert "128 -> 256" in r.stdout
    ws.record("VLLM_ATTENTION_BACKEND", "--unset")
    ws.record("--gpu-memory-utilization=0.85")
    assert "export VLLM_ATTENTION_BACKEND" not in path.read_text()
    shown = ws.run("target", "show", "t").stdout
    assert "--max-num-seqs" in shown and "18" in shown
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SKYPILOT
