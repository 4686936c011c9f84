"""Issue 50 item 2: one spelling per argument everywhere.  An argparse abbreviation in a
YAML list (``--max-num-batched-token=``, as a KubeAI Model or Helm values file may hold)
is the full flag: recording the full name edits that item, records the real ``before``
and appends nothing.  A Helm ``extraArgs:`` item standing alone is removed (its key then
null), and a ``vllmConfig:`` map target reads the flags of its ``extraArgs:`` list.
Fixtures shaped like vLLM production-stack values (``servingEngineSpec.modelSpec``)."""

from __future__ import annotations

import pytest

HELM_VALUES = """\
servingEngineSpec:
  modelSpec:
    - name: "llama3"
      repository: "vllm/vllm-openai"
      tag: "latest"
      modelURL: "meta-llama/Llama-3.1-8B-Instruct"
      vllmConfig:
        maxModelLen: 4096
        extraArgs:
          - "--max-num-batched-token=2048"
          - "--enforce-eager"
"""

ALONE = HELM_VALUES.replace('          - "--max-num-batched-token=2048"\n', "")

FLOW = """\
args: ["--model", "Qwen/Qwen2.5-7B", "--max-num-batched-token", "2048", "--enforce-eager"]
"""


@pytest.fixture
def ws(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0

    class W:
        def add(self, text: str, key_path: str):
            path = tmp_path / "values.yaml"
            path.write_text(text)
            r = ledger("-C", root, "target", "add", "t", path, "--format", "yaml-map",
                       "--key-path", key_path, "--flags", "vllm")
            assert r.exit_code == 0, r.stderr
            return path

        def run(self, *a):
            return ledger("-C", root, *a)

    return W()


@pytest.mark.parametrize("text,key_path", [
    (HELM_VALUES, "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs"),
    (HELM_VALUES, "servingEngineSpec.modelSpec[0].vllmConfig"),
    (FLOW, "args"),
])
def test_an_abbreviation_is_the_flag_it_abbreviates(ws, text, key_path):
    path = ws.add(text, key_path)
    shown = ws.run("target", "show", "t", "--json").json()
    assert "--max-num-batched-tokens" in [k["knob"] for k in shown["knobs"]]
    r = ws.run("record", "flag", "t", "--max-num-batched-tokens=4096", "--class", "perf",
               "--title", "mnbt")
    assert r.exit_code == 0, r.stderr
    assert "2048 -> 4096" in r.stdout and "adds a new one" not in r.stderr
    after = path.read_text()
    assert after.count("--max-num-batched-token") == 1 and "4096" in after
    assert ws.run("revert", "mnbt", "--why", "w").exit_code == 0
    assert path.read_text() == text


@pytest.mark.parametrize("key_path", [
    "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs",
    "servingEngineSpec.modelSpec[0].vllmConfig",
])
def test_a_switch_standing_alone_is_removed_and_put_back(ws, key_path):
    path = ws.add(ALONE, key_path)
    r = ws.run("record", "flag", "t", "--enforce-eager", "--unset", "--class", "perf",
               "--title", "graphs")
    assert r.exit_code == 0, r.stderr
    assert "true -> (unset)" in r.stdout
    assert path.read_text() == ALONE.replace('          - "--enforce-eager"\n', "")
    assert ws.run("revert", "graphs", "--why", "w").exit_code == 0
    assert path.read_text() == ALONE


def test_the_bash_reader_resolves_the_abbreviation_too():
    from envknobs.formats.bash import BashFormat

    text = "#!/bin/bash\nvllm serve Q --max-num-batched-token=2048\n"
    assert BashFormat().parse(text) == {"--max-num-batched-tokens": "2048"}
    assert BashFormat().set(text, "--max-num-batched-tokens", "4096") == \
        text.replace("2048", "4096")


COMPOSE_ARGS = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    entrypoint: ["/bin/sh", "-c", "pip install -q hf_transfer && exec vllm serve \\"$@\\"", "--"]
    command:
      - Qwen/Qwen2.5-7B-Instruct
      - --gpu-memory-utilization=0.85
      - --max-model-len
      - "8192"
"""


def test_the_flags_an_sh_c_script_gets_as_its_arguments(tmp_path, ledger):
    path = tmp_path / "compose.yaml"
    path.write_text(COMPOSE_ARGS)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    r = ledger("-C", root, "target", "add", "c", path, "--format", "yaml-map",
               "--key-path", "services.vllm.command")
    assert r.exit_code == 0, r.stderr
    shown = {k["knob"]: k for k in ledger("-C", root, "target", "show", "c", "--json")
             .json()["knobs"]}
    assert shown["--gpu-memory-utilization"]["value"] == "0.85"
    assert shown["--max-model-len"]["places"][0]["line"] == 8
    r = ledger("-C", root, "record", "flag", "c", "--gpu-memory-utilization=0.8",
               "--class", "perf", "--title", "gmu")
    assert r.exit_code == 0 and "0.85 -> 0.8" in r.stdout
    text = path.read_text()
    assert text == COMPOSE_ARGS.replace("=0.85", "=0.8")  # the script string untouched
    r = ledger("-C", root, "record", "flag", "c", "--max-num-seqs=32", "--class", "perf",
               "--title", "seqs")
    assert r.exit_code == 0, r.stderr
    assert path.read_text().endswith('      - "8192"\n      - --max-num-seqs\n      - "32"\n')
    assert ledger("-C", root, "revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == COMPOSE_ARGS
