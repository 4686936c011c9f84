"""systemd service units of LLM servers, modelled on public ones.

The shapes found in self-hosting guides and repos that run vLLM or SGLang under
systemd: ``vllm serve`` from a venv with the flags continued over lines, several
assignments on one ``Environment=`` line, an ``EnvironmentFile=-``; ``/usr/bin/env vllm
serve`` (the ContentSwarm-style unit); an SGLang unit with one flag per continuation
line, a comment line inside the continuation and ``%%`` in a value; a Dynamo worker; a
``docker run`` unit; a oneshot unit with two commands; and a unit whose ExecStart= is a
wrapper script the ledger cannot see into.
"""

from tests.envknobs.foreign_shapes import VLLM_UNIT

SGLANG_UNIT = """\
[Unit]
Description=SGLang server (TP=2, 32K context)
After=network.target

[Service]
Type=simple
User=ivan
WorkingDirectory=/home/ivan/sglang
Environment=CUDA_VISIBLE_DEVICES=0,1
Environment='PYTHONPATH=/home/ivan/sglang/python' "NCCL_DEBUG=WARN"
Environment=SGLANG_DISAGGREGATION_QUEUE_SIZE=4 LOG_FMT=%%Y-%%m
Environment=HF_HOME=%h/.cache/huggingface
ExecStart=/home/ivan/sglang/.venv/bin/python -m sglang.launch_server \\
    --model-path Qwen/Qwen2.5-32B-Instruct \\
    --tp 2 \\
# --enable-torch-compile \\
    --context-length 32768 \\
    --mem-fraction-static 0.85 \\
    --host 0.0.0.0 --port 8001
StandardOutput=append:/home/ivan/sglang/sglang.log
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""

ENV_VLLM_UNIT = """\
[Unit]
Description=vLLM AutoGLM-9B vision model
After=network-online.target

[Service]
ExecStart=/usr/bin/env vllm serve zai-org/autoglm-phone-9b-multilingual \\
    --served-model-name autoglm-phone-9b --port 8000
Restart=on-failure
User=vllm

[Install]
WantedBy=multi-user.target
"""

DYNAMO_UNIT = """\
[Unit]
Description=Dynamo vLLM decode worker
Requires=nats-server.service etcd.service

[Service]
Environment="DYN_LOG=info" "VLLM_NIXL_SIDE_CHANNEL_PORT=20097"
ExecStart=/opt/dynamo/venv/bin/python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B \\
    --enforce-eager --gpu-memory-utilization=0.8 --max-model-len=16384
Restart=always

[Install]
WantedBy=multi-user.target
"""

# An HPC node's vLLM unit running the site's SIF image with apptainer --cleanenv (the
# shape of public systemd units for vLLM, and of the Slurm jobs' apptainer exec line).
APPTAINER_UNIT = """\
[Unit]
Description=vLLM in apptainer
After=network-online.target

[Service]
User=vllm
Environment=VLLM_USE_V1=1
Environment=APPTAINERENV_VLLM_ATTENTION_BACKEND=FLASHINFER
ExecStart=/usr/bin/apptainer exec --nv --cleanenv --env HF_HUB_OFFLINE=1 \\
    /opt/sif/vllm-openai.sif vllm serve /models/llama --port 8000
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


DOCKER_UNIT = """\
[Unit]
Description=vLLM in docker
After=docker.service
Requires=docker.service

[Service]
Environment=HF_HOME=/srv/hf
ExecStartPre=-/usr/bin/docker rm -f vllm
ExecStart=/usr/bin/docker run --rm --name vllm --gpus all -p 8000:8000 \\
    -e HF_TOKEN=hf_xxx vllm/vllm-openai:latest \\
    --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192
ExecStop=/usr/bin/docker stop vllm

[Install]
WantedBy=multi-user.target
"""

ONESHOT_UNIT = """\
[Unit]
Description=warm the cache, then serve

[Service]
Type=oneshot
ExecStart=/usr/bin/vllm serve A --port 8000
ExecStart=/usr/bin/vllm serve B --port 8001
"""

SCRIPT_UNIT = """\
[Unit]
Description=Lexi vLLM Service (legacy host fallback)

[Service]
WorkingDirectory=/mnt/data/Lex
Environment=VLLM_WORKER_MULTIPROC_METHOD=spawn
ExecStart=/mnt/data/Lex/scripts/run_vllm_vllm.sh --port 8008
Restart=always

[Install]
WantedBy=multi-user.target
"""

UNITS = {
    "vllm venv": VLLM_UNIT,
    "sglang": SGLANG_UNIT,
    "env vllm": ENV_VLLM_UNIT,
    "dynamo": DYNAMO_UNIT,
    "docker": DOCKER_UNIT,
    "apptainer": APPTAINER_UNIT,
    "script": SCRIPT_UNIT,
}
