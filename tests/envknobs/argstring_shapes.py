"""Launch flags kept in an env string, in the shapes real deployments write them.

Modelled on public files: vLLM systemd units that keep ``vllm serve``'s extra flags in an
``Environment="VLLM_ARGS=..."`` line and expand ``$VLLM_ARGS`` on ``ExecStart=``; an SGLang
unit quoting the value (``SGLANG_OPTS="--port ..."``); an ``/etc/default``-style
EnvironmentFile with ``VLLM_ADDITIONAL_ARGS``; an SGLang start script that keeps its
parameters in ``SGL_PARAMS`` and expands it unquoted on the launch line.
"""

VLLM_ARGS_UNIT = """\
[Unit]
Description=vLLM OpenAI-compatible server
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=vllm
Environment="HF_HOME=/var/lib/vllm/hf"
Environment="VLLM_ARGS=--max-model-len 8192 --gpu-memory-utilization 0.90 --enable-prefix-caching"
ExecStart=/opt/vllm/bin/vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000 $VLLM_ARGS
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

SGLANG_OPTS_UNIT = """\
[Unit]
Description=SGLang server
After=network.target

[Service]
Environment=CUDA_VISIBLE_DEVICES=0,1
Environment=SGLANG_OPTS="--port 30000 --tp 2 --mem-fraction-static 0.85"
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path /models/Qwen2.5-14B-Instruct \\
    $SGLANG_OPTS
Restart=always

[Install]
WantedBy=multi-user.target
"""

VLLM_DEFAULTS_ENV = """\
# /etc/default/vllm: read by vllm.service (EnvironmentFile=)
VLLM_MODEL=meta-llama/Llama-3.1-8B-Instruct
HF_HOME=/srv/hf
VLLM_ADDITIONAL_ARGS="--max-model-len 32768 --enable-chunked-prefill --max-num-seqs 128"
"""

TWO_STRINGS_ENV = """\
SERVER_ARGS=--host 0.0.0.0 --port 8000
VLLM_EXTRA_ARGS='--max-num-seqs 64 --port 8001'
"""

SGL_PARAMS_SCRIPT = """\
#!/bin/bash
# start SGLang with the parameters of the image's environment
SGL_MODEL_DIR=/home/model
SGL_PARAMS="--enable-metrics --trust-remote-code --mem-fraction-static 0.8"
export SGLANG_ENABLE_TORCH_COMPILE=0

exec python3 -m sglang.launch_server \\
  --model-path ${SGL_MODEL_DIR} --host 0.0.0.0 --port 30000 \\
  $SGL_PARAMS
"""

# A PD pair launched by one script, the flags both servers share kept in one string (as
# SGLang's disaggregation examples repeat them on both command lines).
PD_COMMON_SCRIPT = """\
#!/bin/bash
COMMON_ARGS="--model-path /models/DeepSeek-V3 --tp 8 --trust-remote-code"
python3 -m sglang.launch_server $COMMON_ARGS --disaggregation-mode prefill --port 30000 &
python3 -m sglang.launch_server $COMMON_ARGS --disaggregation-mode decode --port 30001 &
wait
"""
