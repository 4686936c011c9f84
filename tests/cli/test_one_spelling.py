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
