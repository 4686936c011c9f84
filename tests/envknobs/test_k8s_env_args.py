"""Issue 50 item 4: vLLM flags kept in a k8s env value (KServe's LLMInferenceService
``VLLM_ADDITIONAL_ARGS: >- ...``, Helm charts' ``extraArgs``-style env strings) are
knobs of the k8s target: read, edited inside the value with its scalar style and lines
kept, reverted byte for byte.  Fixtures follow KServe's LLMInferenceService samples and
a Deployment whose runtime command expands ``$(VLLM_ARGS)``."""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

KSERVE = """\
apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata:
  name: qwen2-7b-instruct
spec:
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
    name: Qwen/Qwen2.5-7B-Instruct
  replicas: 1
  template:
    containers:
      - name: main
        env:
          - name: VLLM_LOGGING_LEVEL
            value: INFO
          - name: VLLM_ADDITIONAL_ARGS
            value: >-
              --max-model-len 8192
              --enable-prefix-caching
              --gpu-memory-utilization=0.9
        resources:
          limits:
            nvidia.com/gpu: "1"
"""

WITH_ARGV = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.9.2
          command: ["sh", "-c"]
          args: ["vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000 --max-num-seqs 64 $(VLLM_ARGS)"]
          env:
            - name: VLLM_ARGS
              value: "--max-model-len 8192 --max-num-seqs 32"
"""


def test_flags_in_an_env_value_are_knobs():
    k8s = get_format("k8s", container="main")
    found = k8s.parse(KSERVE)
    assert found["--max-model-len"] == "8192"
    assert found["--enable-prefix-caching"] == "true"
    assert found["--gpu-memory-utilization"] == "0.9"
    assert "VLLM_ADDITIONAL_ARGS" not in found and found["VLLM_LOGGING_LEVEL"] == "INFO"
    lines = {k.knob: k.places[0].line for k in k8s.summary(KSERVE).knobs}
    assert lines["--max-model-len"] == 18 and lines["--gpu-memory-utilization"] == 20


def test_edits_stay_in_the_folded_value_and_revert_exactly():
    k8s = get_format("k8s", container="main")
    out = k8s.set(KSERVE, "--max-model-len", "16384")
    assert "              --max-model-len 16384\n" in out
    assert k8s.set(out, "--max-model-len", "8192") == KSERVE
    gone = k8s.unset(KSERVE, "--enable-prefix-caching")
    assert "--enable-prefix-caching" not in gone and k8s.parse(gone)["--max-model-len"] == "8192"
    added = k8s.set(KSERVE, "--max-num-seqs", "128")
    assert "--gpu-memory-utilization=0.9 --max-num-seqs 128\n" in added
    assert k8s.unset(added, "--max-num-seqs") == KSERVE


def test_the_holder_is_not_edited_whole():
    with pytest.raises(FormatError, match=r"line 16: VLLM_ADDITIONAL_ARGS is a string of flags"):
        get_format("k8s", container="main").set(KSERVE, "VLLM_ADDITIONAL_ARGS", "--x 1")


def test_a_flag_in_the_argv_and_a_string_is_refused_naming_both():
    k8s = get_format("k8s", container="vllm")
    assert k8s.parse(WITH_ARGV)["--max-model-len"] == "8192"
    assert "--max-num-seqs" not in k8s.parse(WITH_ARGV)  # 64 or 32: the command's order
    assert any("--max-num-seqs is both in the command/args (line 12)" in n
               for n in k8s.summary(WITH_ARGV).notes)
    with pytest.raises(FormatError) as e:
        k8s.set(WITH_ARGV, "--max-num-seqs", "16")
    assert "line 15 (in VLLM_ARGS: --max-num-seqs 32)" in str(e.value)
    assert "line 12 (in the container's command/args)" in str(e.value)
    # a new flag could go on the command line or in the string: refused naming both,
    # `record flag --in args|env` selects (it went on the command line silently before)
    with pytest.raises(FormatError, match=r"--dtype can go in the command/args of container "
                                          r"vllm \(line 12\) or in env VLLM_ARGS \(line 15\).*"
                                          r"select one with --in args or --in env"):
        k8s.set(WITH_ARGV, "--dtype", "bfloat16")
    out = k8s.placed("args").set(WITH_ARGV, "--dtype", "bfloat16")
    assert "$(VLLM_ARGS) --dtype bfloat16\"]" in out
    assert k8s.placed("args").unset(out, "--dtype") == WITH_ARGV
    out = k8s.placed("env").set(WITH_ARGV, "--dtype", "bfloat16")
    assert k8s.parse(out)["--dtype"] == "bfloat16" and "$(VLLM_ARGS)\"]" in out
    assert k8s.placed("env").unset(out, "--dtype") == WITH_ARGV
    with pytest.raises(FormatError, match="--in configmap: a flag goes in the container's args"):
        k8s.placed("configmap").set(WITH_ARGV, "--dtype", "bfloat16")


def test_record_unset_and_revert_through_the_cli(ws):  # noqa: F811
    path = ws.add("llmisvc.yaml", KSERVE, "--format", "k8s", "--container", "main")
    r = ws.record("--enable-prefix-caching", "--unset")
    assert "true -> (unset)" in r.stdout
    ws.record("--max-model-len=32768")
    shown = ws.run("target", "show", "t").stdout
    assert "--max-model-len" in shown and "32768" in shown
    assert "env VLLM_ADDITIONAL_ARGS of container main" in shown
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == KSERVE


def test_record_flag_in_env_and_args_through_the_cli(ws):  # noqa: F811
    path = ws.add("vllm.yaml", WITH_ARGV, "--format", "k8s", "--container", "vllm")
    r = ws.run("record", "flag", "t", "--dtype=bfloat16", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and str(path) in r.stderr and "--in args or --in env" in r.stderr
    assert path.read_text() == WITH_ARGV
    ws.record("--dtype=bfloat16", "--in", "env")
    ws.record("--enforce-eager", "--in", "args")
    text = path.read_text()
    assert "--enforce-eager" in text.split("$(VLLM_ARGS)")[1].split("\n")[0]
    assert get_format("k8s", container="vllm").parse(text)["--dtype"] == "bfloat16"
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == WITH_ARGV
    r = ws.run("restore", "--perf-only", "--why", "w")
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == text  # each flag comes back where --in put it
