"""Issue 25 item 9: ``target show`` says ``(computed)``, never ``unset``, for a place the
shell computes (``CUDA_VISIBLE_DEVICES=$ID`` in a loop of one server per GPU) among a
repeated knob's places, and fills LINES for YAML targets too."""

from __future__ import annotations

DP_SCRIPT = """\
#!/bin/bash
# one SGLang server per GPU (data parallel by hand), ports 30000+ID
MODEL=/models/Qwen2.5-7B-Instruct
for ID in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$ID python3 -m sglang.launch_server \\
    --model-path $MODEL --port $((30000 + ID)) &
done
CUDA_VISIBLE_DEVICES=4 python3 -m sglang.launch_server --model-path $MODEL --port 30010 &
wait
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:latest
          args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-num-seqs", "64"]
          env:
            - name: VLLM_LOGGING_LEVEL
              value: DEBUG
"""


def _row(stdout: str, knob: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.startswith(knob + " "))


def test_a_computed_place_of_a_repeated_knob_reads_computed(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root).exit_code == 0
    (tmp_path / "dp.sh").write_text(DP_SCRIPT)
    r = ledger("-C", root, "target", "add", "dp", tmp_path / "dp.sh", "--format", "bash")
    assert r.exit_code == 0, r.stderr
    shown = ledger("-C", root, "target", "show", "dp").stdout
    assert _row(shown, "CUDA_VISIBLE_DEVICES")[:5] == ["CUDA_VISIBLE_DEVICES", "(computed)",
                                                        "|", "4", "repeated"]
    assert _row(shown, "--model-path")[:3] == ["--model-path", "(computed)", "repeated"]
    assert "unset" not in " ".join(_row(shown, "CUDA_VISIBLE_DEVICES"))


def test_yaml_targets_show_their_lines(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root).exit_code == 0
    (tmp_path / "d.yaml").write_text(DEPLOYMENT)
    r = ledger("-C", root, "target", "add", "k", tmp_path / "d.yaml", "--format", "k8s",
               "--container", "vllm")
    assert r.exit_code == 0, r.stderr
    shown = ledger("-C", root, "target", "show", "k").stdout
    assert _row(shown, "VLLM_LOGGING_LEVEL")[3] == "13"
    assert _row(shown, "--max-num-seqs")[3] == "11"
