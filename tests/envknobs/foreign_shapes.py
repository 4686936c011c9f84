"""Files that are plainly not dotenv or bash, modelled on public serving repos.

A systemd unit for an OpenAI-compatible vLLM server (the `vllm.service` examples shipped
beside self-hosting guides), docker-compose files of vLLM (the `environment:` list and the
map form, `command:` as a block scalar and as one line, OPEA's `sh -c`), a Kubernetes
Deployment of SGLang, and a Helm values file of production-stack's shape.
"""

from tests.envknobs.argv_shapes import SPLIT_TOKENS

VLLM_UNIT = """\
# /etc/systemd/system/vllm.service
[Unit]
Description=vLLM OpenAI-compatible server
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=vllm
WorkingDirectory=/opt/vllm
Environment="CUDA_VISIBLE_DEVICES=0,1" "VLLM_LOGGING_LEVEL=INFO"
Environment=HF_HOME=/opt/vllm/.cache/huggingface
EnvironmentFile=-/etc/vllm/vllm.env
ExecStart=/opt/vllm/venv/bin/vllm serve Qwen/Qwen2.5-7B-Instruct \\
    --tensor-parallel-size 2 --max-num-seqs 64 --port 8000
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

COMPOSE_ENV_LIST = """\
version: "3.8"

services:
  vllm:
    image: vllm/vllm-openai:latest
    runtime: nvidia
    environment:
      - HUGGING_FACE_HUB_TOKEN=${HUGGING_FACE_HUB_TOKEN}
      - VLLM_CPU_KVCACHE_SPACE=40
    volumes:
      - ~/.cache/huggingface:/root/.cache/huggingface
    ports:
      - "8000:8000"
    ipc: host
    command: |
      --model Qwen/Qwen2.5-7B-Instruct
      --max-model-len 8192
    restart: always
"""

COMPOSE_ENV_MAP = """\
# Copyright (C) 2024 Intel Corporation
services:
  vllm_service:
    image: vllm:cpu
    container_name: vllm-service
    ports:
      - "8008:80"
    environment:
      no_proxy: ${no_proxy}
      LLM_MODEL_ID: ${LLM_MODEL_ID}
    command: /bin/sh -c "cd / && export VLLM_CPU_KVCACHE_SPACE=40 && python3 -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --model $LLM_MODEL_ID --port 80"
"""

SGLANG_DEPLOYMENT = "---\n" + SPLIT_TOKENS  # the argv shapes' Deployment, a document marker first

HELM_VALUES = """\
servingEngineSpec:
  runtimeClassName: ""
  modelSpec:
  - name: "llama3"
    repository: "vllm/vllm-openai"
    tag: "latest"
    modelURL: "meta-llama/Llama-3.1-8B-Instruct"
    replicaCount: 1
    vllmConfig:
      maxModelLen: 4096
      extraArgs: ["--disable-log-requests", "--max-num-seqs", "32"]
    env:
      - name: VLLM_LOGGING_LEVEL
        value: DEBUG
"""

FOREIGN = {
    "systemd unit": (VLLM_UNIT, "vllm.service", "systemd unit"),
    "compose (env list)": (COMPOSE_ENV_LIST, "docker-compose.yml", "docker-compose file"),
    "compose (env map)": (COMPOSE_ENV_MAP, "compose.yaml", "docker-compose file"),
    "k8s deployment": (SGLANG_DEPLOYMENT, "sglang.yaml", "Kubernetes manifest"),
    "helm values": (HELM_VALUES, "values.yaml", "yaml-map"),
}
