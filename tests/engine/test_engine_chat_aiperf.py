"""AIPerf's default run (its default endpoint type is ``chat``: ``POST /v1/chat/completions``)
against ``python -m engine serve``, over real HTTP on loopback.

AIPerf installs without torch, into a venv of its own (``pip install aiperf``); the test
finds it as ``ledger ab --bench aiperf`` does (``$AIPERF``, else ``aiperf`` on PATH) and
skips, saying so, where it is not installed.  CI installs it (.ci/run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ledger.evidence.aiperf_bench import find_aiperf
from tests.evidence.engine_checkpoint import make_checkpoint

AIPERF = find_aiperf()
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def engine_url(tmp_path):
    ckpt = make_checkpoint(tmp_path / "ckpt")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "server.log", "wb")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--role", "both", "--port", str(port),
         "--model", str(ckpt)],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                assert time.monotonic() < deadline, "the engine did not answer in 120 s"
                time.sleep(0.3)
        yield url, ckpt
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()


@pytest.mark.skipif(AIPERF is None, reason="AIPerf is not installed (pip install aiperf into a "
                    "venv of its own, then put aiperf on PATH or set AIPERF=/path/to/aiperf)")
def test_aiperf_default_endpoint_type_chat_completes_every_request(engine_url, tmp_path):
    url, ckpt = engine_url
    out = tmp_path / "artifacts"
    # No --endpoint-type: AIPerf's default (chat), non-streamed, then streamed.
    for streaming in ([], ["--streaming"]):
        artifacts = out / ("streamed" if streaming else "whole")
        done = subprocess.run(
            [AIPERF, "profile", "--model", str(ckpt), "--tokenizer", str(ckpt), "--url", url,
             *streaming, "--concurrency", "2", "--request-count", "6",
             "--synthetic-input-tokens-mean", "24", "--synthetic-input-tokens-stddev", "0",
             "--output-tokens-mean", "8", "--output-tokens-stddev", "0",
             "--random-seed", "1", "--artifact-dir", str(artifacts), "--ui-type", "none"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        (report,) = artifacts.rglob("profile_export_aiperf.json")
        doc = json.loads(report.read_text())
        assert doc["request_count"]["avg"] == 6
        assert doc["error_summary"] == []
        assert doc["output_token_count"]["avg"] > 0
        # What AIPerf sent is chat: every payload carries messages, not a prompt.
        (inputs,) = artifacts.rglob("inputs.json")
        payloads = [p for s in json.loads(inputs.read_text())["data"] for p in s["payloads"]]
        assert payloads and all("messages" in p and "prompt" not in p for p in payloads)
        assert all(p["stream"] is bool(streaming) for p in payloads)
        if streaming:
            assert doc["time_to_first_token"]["avg"] > 0
