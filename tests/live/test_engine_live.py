"""``--live url=`` against real SGLang and vLLM answers (tests/live/fixtures/engines, their
provenance in PROVENANCE.md there) served on loopback by a real ``http.server``, and the
generating health check against the bundled engine with its engine loop stopped."""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from ledger.core.service import Health
from ledger.core.service import LiveProbe
from ledger.core.service import parse_health
from ledger.errors import InvalidValue
from ledger.live import probe as p
from ledger.live.restart import _check_once
from ledger.live.status import knob_state
from tests.engine.conftest import Servers
from tests.engine.conftest import free_port

FIXTURES = Path(__file__).parent / "fixtures" / "engines"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.stop_all()


@pytest.fixture
def engine_server():
    """A loopback server answering ``routes`` (path with query -> body bytes); 404 else."""
    routes: dict[str, bytes] = {}
    asked: list[str] = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            asked.append(self.path)
            body = routes.get(self.path)
            self.send_response(404 if body is None else 200)
            data = body if body is not None else b'{"detail":"Not Found"}'
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", routes, asked
    httpd.shutdown()


def test_sglang_flattened_server_info(tmp_path, engine_server):
    url, routes, _ = engine_server
    routes["/server_info"] = fixture("sglang_get_server_info_0.4.6.json")
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert (obs.state, obs.engine) == (p.RUNNING, "sglang")
    assert obs.flags["--mem-fraction-static"] == "0.8639842241317652"
    assert obs.flags["--schedule-policy"] == "fcfs"
    assert "--quantization" not in obs.flags  # null: unset
    assert "--version" not in obs.flags  # state, not a launch argument
    assert knob_state(obs, "--chunked-prefill-size", "8192", "8192").state == "live"
    pending = knob_state(obs, "--chunked-prefill-size", "4096", "4096")
    assert (pending.state, pending.process) == ("pending restart", "8192")
    assert knob_state(obs, "--trust-remote-code", "false", "false").state == "live"
    # SGLang does not report its environment: an env knob is unreadable, said so.
    env = knob_state(obs, "SGLANG_ENABLE_TORCH_COMPILE", "1", "1")
    assert env.state == "unreadable" and "does not report" in env.detail


def test_older_sglang_answers_get_server_info_only(tmp_path, engine_server):
    url, routes, asked = engine_server
    routes["/get_server_info"] = fixture("sglang_get_server_info_0.4.6.json")
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert (obs.state, obs.engine) == (p.RUNNING, "sglang")
    assert obs.source == f"{url}/get_server_info"
    assert asked == ["/server_info", "/get_server_info"]
    assert knob_state(obs, "--tp-size", "1", "1").state == "live"


def test_sglang_nested_server_args(tmp_path, engine_server):
    url, routes, _ = engine_server
    routes["/server_info"] = fixture("sglang_grpc_server_info_nested.json")
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert obs.engine == "sglang" and obs.flags["--chunked-prefill-size"] == "8192"
    assert obs.flags["--allow-auto-truncate"] == "false"


def test_vllm_server_info_text_then_json(tmp_path, engine_server):
    url, routes, asked = engine_server
    answer = json.loads(fixture("vllm_server_info_json.json"))
    routes["/server_info"] = json.dumps({**answer, "vllm_config": "VllmConfig(...)"}).encode()
    routes["/server_info?config_format=json"] = json.dumps(answer).encode()
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert (obs.state, obs.engine) == (p.RUNNING, "vllm")
    assert asked == ["/server_info", "/server_info?config_format=json"]
    assert obs.flags["--kv-cache-dtype"] == "auto"  # cache_dtype's flag
    assert obs.flags["--max-num-seqs"] == "256" and obs.flags["--block-size"] == "16"
    assert "--num-gpu-blocks" not in obs.flags  # measured at start-up, not a flag
    assert knob_state(obs, "--gpu-memory-utilization", "0.9", "0.9").state == "live"
    assert knob_state(obs, "VLLM_ATTENTION_BACKEND", "FLASH_ATTN", "FLASH_ATTN").state \
        == "live"
    assert knob_state(obs, "VLLM_ATTENTION_BACKEND", "FLASHINFER", "FLASHINFER").state \
        == "pending restart"


def test_vllm_without_server_info_reads_cache_config_info(tmp_path, engine_server):
    url, routes, asked = engine_server
    routes["/metrics"] = fixture("vllm_metrics_cache_config_info.txt")
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert (obs.state, obs.engine) == (p.RUNNING, "vllm")
    assert asked == ["/server_info", "/get_server_info", "/metrics"]
    assert "cache_config_info" in obs.source
    assert obs.flags == {"--block-size": "16", "--kv-cache-dtype": "auto",
                         "--gpu-memory-utilization": "0.9"}
    assert knob_state(obs, "--block-size", "32", "32").state == "pending restart"


def test_an_answer_of_no_engine_is_unreadable_and_says_why(tmp_path, engine_server):
    url, routes, _ = engine_server
    routes["/server_info"] = b'{"status": "ok"}'
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert obs.state == p.UNREADABLE and "bundled engine's, SGLang's or vLLM's" in obs.detail
    routes.clear()
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert obs.state == p.UNREADABLE and "/get_server_info" in obs.detail


def test_generate_health_is_parsed_and_checked():
    h = parse_health({"generate": "http://127.0.0.1:30000/", "timeout_s": 5}, "target t.health")
    assert h == Health(generate="http://127.0.0.1:30000", timeout_s=5.0)
    assert h.to_dict() == {"generate": "http://127.0.0.1:30000", "timeout_s": 5.0}
    assert "1-token completion" in h.describe()
    with pytest.raises(InvalidValue, match="one of them"):
        parse_health({"generate": "http://h", "url": "http://h/health"}, "t")
    with pytest.raises(InvalidValue, match="not an http"):
        parse_health({"generate": "file:///x"}, "t")


@pytest.mark.slow
def test_generate_health_catches_a_stopped_engine_loop_that_health_misses(servers):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = servers.spawn([sys.executable, "-m", "engine", "serve", "--role", "both",
                          "--preset", "tiny", "--port", str(port)],
                         {"ENGINE_DEBUG_ENDPOINTS": "1"})
    servers.wait_ready(proc, url)
    check = Health(generate=url, timeout_s=5)
    ok, detail = _check_once(check, 30, None)
    assert ok, detail
    assert "generated 1 token" in detail
    stop = urllib.request.Request(f"{url}/debug/stop_loop", data=b"{}", method="POST",
                                  headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(stop, timeout=10) as resp:
        assert resp.status == 200
    with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
        assert resp.status == 200  # /health is blind to the dead loop
    assert _check_once(Health(url=f"{url}/health"), 5, None)[0]
    ok, detail = _check_once(check, 3, None)
    assert not ok and "no tokens within 3.0s" in detail


@pytest.mark.slow
def test_the_debug_endpoint_is_off_by_default(servers):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    servers.wait_ready(servers.spawn([sys.executable, "-m", "engine", "serve", "--role",
                                      "both", "--preset", "tiny", "--port", str(port)]), url)
    stop = urllib.request.Request(f"{url}/debug/stop_loop", data=b"{}", method="POST",
                                  headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(stop, timeout=10)
    assert e.value.code == 404
    assert _check_once(Health(generate=url, timeout_s=30), 30, None)[0]


def test_status_live_and_target_set_against_a_real_sglang_answer(tmp_path, ledger,
                                                                  engine_server):
    """Through the CLI: a serve script's launch flags against what a real SGLang answers
    (the 0.4.6 fixture), and a generating health check set and shown."""
    url, routes, _ = engine_server
    routes["/get_server_info"] = fixture("sglang_get_server_info_0.4.6.json")
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/bash\nexec python -m sglang.launch_server --model-path "
                      "meta-llama/Llama-3.2-1B-Instruct --mem-fraction-static "
                      "0.8639842241317652 --chunked-prefill-size 4096 --stream-interval 1\n")
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"t={tmp_path}").exit_code == 0
    assert ledger("-C", ws, "target", "add", "decode", script, "--format", "bash").exit_code == 0
    r = ledger("-C", ws, "target", "set", "decode", "--live", f"url={url}/server_info",
               "--restart", "true", "--health-generate", url)
    assert r.exit_code == 0, r.stderr
    assert f"generate: {url}" in (ws / "ledger.yaml").read_text()
    r = ledger("-C", ws, "status", "--live", "--json")
    assert r.exit_code == 0, r.stderr
    rows = {k["knob"]: k for k in r.json()[0]["knobs"]}
    assert rows["--mem-fraction-static"]["state"] == "live"
    chunked = rows["--chunked-prefill-size"]
    assert (chunked["state"], chunked["file"], chunked["process"]) == \
        ("pending restart", "4096", "8192")
    # Unset in the file, SGLang reports its default: live, not a pending restart.
    r = ledger("-C", ws, "record", "flag", "decode", "--stream-interval", "--unset",
               "--class", "perf", "--title", "u")
    assert r.exit_code == 0, r.stderr
    r = ledger("-C", ws, "status", "--live", "--json")
    rows = {k["knob"]: k for k in r.json()[0]["knobs"]}
    interval = rows["--stream-interval"]
    assert (interval["state"], interval["file"], interval["process"]) == ("live", None, "1")
    r = ledger("-C", ws, "record", "flag", "decode", "--chunked-prefill-size=2048", "--class",
               "perf", "--title", "t", "--restart", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert f"then wait for health: a 1-token completion from {url} within 60s" in r.stdout
    r = ledger("-C", ws, "target", "set", "decode", "--health-generate", url,
               "--health-url", f"{url}/health")
    assert r.exit_code == 2 and "one of --health-url" in r.stderr  # a usage error
