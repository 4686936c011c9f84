"""Serve scripts in the shapes found in public SGLang/vLLM repositories (written for these
tests): PD launchers with two launch lines, multi-model if/elif env setups, args arrays with
comments, docker launchers, here-documents holding YAML, assignments inside strings.

Each fixture comes with the grid of conditions (variables set before the script runs)
that takes real bash down each of its branches.
"""

from __future__ import annotations

# The "done when" script: if/elif model branches, a shared args array, two launch
# lines (prefill and decode) with their own CUDA_VISIBLE_DEVICES.
PD_SGLANG = """\
#!/bin/bash
# 1P1D on one node: prefill on GPUs 0-3, decode on GPUs 4-7.
set -eo pipefail
MODEL_NAME=${MODEL_NAME:-dsv3}
export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600   # bugfix: slow handshakes
if [ "$MODEL_NAME" = "dsv3" ]; then
    MODEL_PATH=/models/DeepSeek-V3
    export SGLANG_ENABLE_JIT_DEEPGEMM=1
elif [ "$MODEL_NAME" = "qwen" ]; then
    MODEL_PATH=/models/Qwen3-235B
    export SGLANG_ENABLE_JIT_DEEPGEMM=0
else
    echo "unknown model $MODEL_NAME" >&2
    exit 1
fi

common=(
    --model-path "$MODEL_PATH"
    --trust-remote-code
    # memory
    --mem-fraction-static 0.85
    --disaggregation-transfer-backend nixl
)

CUDA_VISIBLE_DEVICES=0,1,2,3 python3 -m sglang.launch_server "${common[@]}" \\
    --disaggregation-mode prefill \\
    --port 30000 \\
    --chunked-prefill-size 8192 &
CUDA_VISIBLE_DEVICES=4,5,6,7 python3 -m sglang.launch_server "${common[@]}" \\
    --disaggregation-mode decode \\
    --port 30001 \\
    --cuda-graph-max-bs 128 &
wait
"""
PD_SGLANG_GRID = [{"MODEL_NAME": "dsv3"}, {"MODEL_NAME": "qwen"}, {"MODEL_NAME": "llama"}]

# vLLM 1P1D with NIXL: the side-channel port differs per launch line.
PD_VLLM = """\
#!/bin/bash
set -xe
MODEL=${MODEL:-Qwen/Qwen3-0.6B}
export VLLM_LOGGING_LEVEL=INFO
if [[ "$MODEL" == *Llama* ]]; then
    export VLLM_ATTENTION_BACKEND=FLASHINFER
elif [[ "$MODEL" == *Qwen* ]]; then
    export VLLM_ATTENTION_BACKEND=FLASH_ATTN
else
    export VLLM_ATTENTION_BACKEND=TRITON_ATTN
fi
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve "$MODEL" \\
    --port 8100 \\
    --enforce-eager \\
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5560 vllm serve "$MODEL" \\
    --port=8200 \\
    --gpu-memory-utilization 0.8 \\
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
wait
"""
PD_VLLM_GRID = [{"MODEL": "meta/Llama-3"}, {"MODEL": "Qwen/Qwen3"}, {"MODEL": "mistral"}]

# A benchmark recipe: flags in an array with comments, a YAML here-document, strings.
ARGS_SGLANG = """\
#!/bin/bash
export UCX_TLS=cuda,sm
export SGLANG_ENABLE_TORCH_INFERENCE_MODE=1
idx=${1:-0}

args=(
    --watchdog-timeout 86400
    --random-seed 0
    # --log-level debug

    ## select models
    # --model-path Qwen/Qwen3-32B
    --model-path meta-llama/Llama-3.1-8B-Instruct
    --trust-remote-code
    --port $((8100 + ${idx}))
    --mem-fraction-static 0.85
    --chunked-prefill-size=16384
    --disable-radix-cache   # PD: radix off
)

cat > /dev/null <<YAML
export NOT_A_KNOB=1
mem-fraction-static: 0.7
YAML
echo "export ALSO_NOT=1; --cuda-graph-max-bs 8"
# export COMMENTED=1
python3 -m sglang.launch_server "${args[@]}"
"""
ARGS_SGLANG_GRID = [{}]

DOCKER_VLLM = """\
#!/usr/bin/env bash
# vLLM in a container.
MODEL=mistralai/Mistral-7B-v0.1
HF_TOKEN=hf_dummy
docker run --runtime nvidia --gpus all \\
    -v /root/.cache/huggingface:/root/.cache/huggingface \\
    --env "HUGGING_FACE_HUB_TOKEN=$HF_TOKEN" \\
    -e VLLM_ATTENTION_BACKEND=FLASHINFER \\
    --env=VLLM_USE_V1=1 \\
    -p 8000:8000 \\
    --ipc=host \\
    vllm/vllm-openai:latest \\
    --model "$MODEL" \\
    --gpu-memory-utilization 0.85 \\
    --enable-prefix-caching
"""
DOCKER_VLLM_GRID = [{}]

DOCKER_ENV_FILE = """\
#!/bin/bash
docker run --gpus all --env-file ./serve.env -e SGLANG_X=1 lmsysorg/sglang:latest \\
    python3 -m sglang.launch_server --model-path /m --port 30000
"""

# One launch per role, each inside a case arm: no top-level place before them.
CASE_ROLES = """\
#!/bin/bash
case "$ROLE" in
  prefill)
    export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=8
    exec python -m sglang.launch_server --disaggregation-mode prefill --port 30000
    ;;
  decode)
    exec python -m sglang.launch_server --disaggregation-mode decode --port 30001
    ;;
esac
"""
CASE_ROLES_GRID = [{"ROLE": "prefill"}, {"ROLE": "decode"}, {"ROLE": "none"}]

# A launch inside a function called twice; loops and && lists setting knobs.
FUNCTIONS_AND_LOOPS = """\
#!/bin/bash
start() {
  local port=$1
  CUDA_VISIBLE_DEVICES=$2 python3 -m sglang.launch_server --port "$port" --tp 1 &
}
export SGLANG_X=1
for extra in $EXTRAS; do
  export SGLANG_LOOPED=$extra
done
[ "$FAST" = 1 ] && export SGLANG_FAST=1
( export SGLANG_SUBSHELL=1 )
start 30000 0
SGLANG_X=2
start 30001 1
wait
"""
FUNCTIONS_AND_LOOPS_GRID = [
    {"EXTRAS": "", "FAST": "0"},
    {"EXTRAS": "a b", "FAST": "1"},
]

ALL = {
    "pd_sglang": (PD_SGLANG, PD_SGLANG_GRID),
    "pd_vllm": (PD_VLLM, PD_VLLM_GRID),
    "args_sglang": (ARGS_SGLANG, ARGS_SGLANG_GRID),
    "docker_vllm": (DOCKER_VLLM, DOCKER_VLLM_GRID),
    "case_roles": (CASE_ROLES, CASE_ROLES_GRID),
    "functions_and_loops": (FUNCTIONS_AND_LOOPS, FUNCTIONS_AND_LOOPS_GRID),
}
