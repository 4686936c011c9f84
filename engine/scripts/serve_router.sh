#!/usr/bin/env bash
# Router of the bundled PD engine: sends each request to a prefill/decode pair.
set -euo pipefail

export ENGINE_INFLIGHT_TIMEOUT_S=30

PYTHON="${PYTHON:-python}"
exec "$PYTHON" -m engine serve --role router --host 127.0.0.1 --port "${PORT:-30000}" \
    --prefill "${PREFILL_URL:-http://127.0.0.1:30100}" \
    --decode "${DECODE_URL:-http://127.0.0.1:30200}"
