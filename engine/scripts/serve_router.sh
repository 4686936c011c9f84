#!/usr/bin/env bash
# Router of the bundled PD engine: sends each request to a prefill/decode pair.
# Under knob ledger (ledger.yaml, this script's target), so `ledger status --live` and
# `--restart` reach the running server:
#   live: {url: http://127.0.0.1:30000/server_info}
#   restart: [python, -m, engine, service, restart, --pid-file, run/router.pid, --,
#             bash, deploy/serve_router.sh]
#   health: {url: http://127.0.0.1:30000/health, expect: 200, timeout_s: 120}
set -euo pipefail

export ENGINE_INFLIGHT_TIMEOUT_S=30

PYTHON="${PYTHON:-python}"
# The engine release this deployment runs, pinned as pip pins it: a bump is an upgrade
# (`ledger upgrade plan`), and knobs not set above take that release's defaults.
exec "$PYTHON" -m engine serve --role router --release knob-ledger-engine==1.0.0 \
    --host 127.0.0.1 --port "${PORT:-30000}" \
    --prefill "${PREFILL_URL:-http://127.0.0.1:30100}" \
    --decode "${DECODE_URL:-http://127.0.0.1:30200}"
