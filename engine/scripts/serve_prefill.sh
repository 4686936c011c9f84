#!/usr/bin/env bash
# Prefill worker of the bundled PD engine.  Knobs are read once at start-up.
# Under knob ledger (ledger.yaml, this script's target), so `ledger status --live` and
# `--restart` reach the running server:
#   live: {url: http://127.0.0.1:30100/server_info}
#   restart: [python, -m, engine, service, restart, --pid-file, run/prefill.pid, --,
#             bash, deploy/serve_prefill.sh]
#   health: {url: http://127.0.0.1:30100/health, expect: 200, timeout_s: 120}
set -euo pipefail

export ENGINE_DTYPE=auto
export ENGINE_LINEAR_BACKEND=auto
export ENGINE_PAGE_SIZE=16
export ENGINE_NUM_PAGES=2048
export ENGINE_PREFILL_CHUNK_TOKENS=512
export ENGINE_MAX_RUNNING_REQUESTS=64
export ENGINE_NUM_THREADS=0
export ENGINE_INFLIGHT_TIMEOUT_S=30
export ENGINE_TRANSFER_DROP_PROB=0

PYTHON="${PYTHON:-python}"
# MODEL=/path/to/checkpoint serves a local HF checkpoint; else the PRESET (tiny|small).
if [[ -n "${MODEL:-}" ]]; then
    model_flags=(--model "$MODEL")
else
    model_flags=(--preset "${PRESET:-tiny}")
fi
# The engine release this deployment runs, pinned as pip pins it: a bump is an upgrade
# (`ledger upgrade plan`), and knobs not set above take that release's defaults.
exec "$PYTHON" -m engine serve --role prefill --release knob-ledger-engine==1.0.0 \
    --host 127.0.0.1 --port "${PORT:-30100}" \
    "${model_flags[@]}"
