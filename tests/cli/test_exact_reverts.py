"""Issue 50 item 1 through the CLI: a record of a flag or knob whose value is an
expression keeps the expression as its ``before`` and a revert writes the original bytes
back; YAML list items come back in their own style.

Fixtures are shaped like public files: an SGLang launcher feeding flags from shell
variables (``--mem-fraction-static ${MEM_FRACTION_STATIC}``), a compose file whose
``command: >`` folds ``--flag ${VAR:-default}`` lines (vLLM's docker examples), an LWS
manifest (SGLang's ``lws.yaml``: a comment line between a flag and its plain value).
"""

from __future__ import annotations

import subprocess

import pytest

SGLANG_VARS = """\
#!/bin/bash
# decode server; values from the environment of the job
MEM_FRACTION_STATIC=0.8
export OMP_NUM_THREADS=$(nproc)
python3 -m sglang.launch_server --model-path /models/Qwen2.5-7B \\
  --mem-fraction-static ${MEM_FRACTION_STATIC} \\
  --port "${PORT:-30000}" \\
  --chunked-prefill-size=$CHUNK
"""

COMPOSE_FOLDED = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.8.5
    command: >
      --model ${MODEL:-Qwen/Qwen2.5-7B-Instruct}
      --max-model-len ${MAX_MODEL_LEN:-8192}
      --gpu-memory-utilization=${GPU_MEMORY_UTILIZATION:-0.9}
      --port 8000
    ports:
      - "8000:8000\""""

LWS = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: sglang
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: sglang-leader
            image: lmsysorg/sglang:latest
            command:
              - python3
              - -m
              - sglang.launch_server
              - --model-path
              - /work/models
              - --disaggregation-ib-device
              # should modify according your rdma env
              - mlx5_bond_0,mlx5_bond_1,mlx5_bond_2,mlx5_bond_3
              - --mem-fraction-static
              - "0.8"
              - --tp
              - '16'
"""


@pytest.fixture
def ws(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0

    class W:
        def add(self, file: str, text: str, *how: str):
            path = tmp_path / file
            path.write_bytes(text.encode())
            r = ledger("-C", root, "target", "add", "t", path, *how)
            assert r.exit_code == 0, r.stderr
            return path

        def run(self, *a):
            r = ledger("-C", root, *a)
            return r

        def record(self, *a):
            r = self.run("record", "flag" if a[0].startswith("-") else "knob", "t", *a,
                         "--class", "perf", "--title", f"change {a[0]}", "--no-validate")
            assert r.exit_code == 0, r.stderr
            return r

    return W()


def test_a_flag_fed_by_a_variable_comes_back_as_the_variable(ws):
    path = ws.add("serve.sh", SGLANG_VARS, "--format", "bash")
    r = ws.record("--mem-fraction-static=0.85")
    assert "${MEM_FRACTION_STATIC} -> 0.85" in r.stdout
    assert "--mem-fraction-static 0.85 \\" in path.read_text()
    shown = ws.run("show", "change-mem-fraction-static", "--json").json()
    assert shown["before"] == "${MEM_FRACTION_STATIC}"
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SGLANG_VARS  # the line is there, the variable in it
    assert "drift" not in ws.run("status").stdout.lower()


@pytest.mark.parametrize("edits", [
    [("--mem-fraction-static=0.85",), ("--mem-fraction-static", "--unset")],
    [("--port=30001",), ("--chunked-prefill-size=8192",), ("OMP_NUM_THREADS=4",)],
    [("OMP_NUM_THREADS", "--unset"), ("--port", "--unset")],
])
def test_every_computed_value_is_written_back_byte_for_byte(ws, edits):
    path = ws.add("serve.sh", SGLANG_VARS, "--format", "bash")
    for edit in edits:
        ws.record(*edit)
    assert path.read_text() != SGLANG_VARS
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SGLANG_VARS
    assert "drift" not in ws.run("status").stdout.lower()


def test_a_folded_compose_command_keeps_its_lines(ws):
    path = ws.add("compose.yaml", COMPOSE_FOLDED, "--format", "yaml-map",
                  "--key-path", "services.vllm.command")
    ws.record("--max-model-len=4096")
    ws.record("--gpu-memory-utilization=0.8")
    assert "--max-model-len 4096\n      --gpu-memory-utilization=0.8\n" in path.read_text()
    ws.record("--max-model-len", "--unset")
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == COMPOSE_FOLDED  # no final newline either


def test_list_items_come_back_in_their_own_style(ws):
    path = ws.add("lws.yaml", LWS, "--format", "k8s", "--container", "sglang-leader")
    ws.record("--disaggregation-ib-device=mlx5_0")
    ws.record("--mem-fraction-static=0.7")
    ws.record("--tp-size=8")
    text = path.read_text()
    assert "- mlx5_0\n" in text and '- "0.7"\n' in text
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == LWS


SERVE_COMMENTED = """\
#!/usr/bin/env bash
export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
export SGLANG_SM120_MMA_TARGET_CTAS=256   # wave quantisation at c64
exec python -m sglang.launch_server --model-path /models/m --port 30001
"""
DEPLOY_COMMENTED = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.4
          env:
            - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
              value: "4"
            - name: SGLANG_SM120_MMA_TARGET_CTAS
              value: '256'  # wave quantisation at c64
"""


@pytest.mark.parametrize("file, text, how, line", [
    ("serve.sh", SERVE_COMMENTED, ("--format", "bash"),
     "export SGLANG_SM120_MMA_TARGET_CTAS=512   # wave quantisation at c64\n"),
    ("deploy.yaml", DEPLOY_COMMENTED, ("--format", "k8s", "--container", "sglang"),
     "              value: '512'  # wave quantisation at c64\n"),
])
def test_a_knob_unset_then_set_again_comes_back_as_its_own_lines(ws, file, text, how, line):
    """Unset, then set to a new value: the knob's old lines with that value, the bytes a
    change in place gives (a clone that pulls both entries changes the line in place), and
    every revert gives back the bytes before it."""
    path = ws.add(file, text, *how)
    ws.record("SGLANG_SM120_MMA_TARGET_CTAS", "--unset")
    unset = path.read_text()
    assert "SGLANG_SM120_MMA_TARGET_CTAS" not in unset
    ws.record("SGLANG_SM120_MMA_TARGET_CTAS=512")
    assert path.read_text() == text.replace(line.replace("512", "256"), line)
    assert line in path.read_text()
    if file == "serve.sh":  # what bash sees
        seen = subprocess.run(["bash", "-c", f"source <(grep ^export {path}); "
                               "echo $SGLANG_SM120_MMA_TARGET_CTAS"],
                              capture_output=True, text=True, check=True).stdout
        assert seen == "512\n"
    assert ws.run("revert", "change-sglang-sm120-mma-target-ctas-512", "--why", "w").exit_code == 0
    assert path.read_text() == unset
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == text
    assert "drift" not in ws.run("status").stdout.lower()
