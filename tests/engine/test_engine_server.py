"""The HTTP API of a single worker (role ``both``), served in-process on loopback."""

from __future__ import annotations

import threading
import urllib.request

import pytest

from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams
from engine.serving.http import EngineHTTPServer
from engine.serving.worker import Worker
from engine.serving.worker import make_worker_handler


@pytest.fixture(scope="module")
def worker_url():
    from engine.knobs import EngineKnobs

    eng = LLMEngine(EngineKnobs(num_pages=64), preset="tiny")
    eng.start()
    httpd = EngineHTTPServer(("127.0.0.1", 0), make_worker_handler(Worker(eng, "both")))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", eng
    httpd.shutdown()
    eng.stop()


def test_generate_by_prompt_and_by_ids(worker_url, call, knobs):
    url, eng = worker_url
    status, body = call(url, "/generate", {"prompt": "héllo", "max_new_tokens": 6,
                                           "ignore_eos": True})
    assert status == 200 and len(body["output_ids"]) == 6
    expected = LLMEngine(knobs, preset="tiny").generate(
        [eng.tokenizer.encode("héllo")], SamplingParams(6, ignore_eos=True))[0].output_ids
    assert body["output_ids"] == expected
    assert body["text"] == eng.tokenizer.decode(expected)
    assert body["meta"]["ttft_ms"] > 0 and body["meta"]["e2e_ms"] >= body["meta"]["ttft_ms"]
    status, sampled = call(url, "/generate", {"input_ids": [1, 2], "max_new_tokens": 4,
                                              "temperature": 1.0, "ignore_eos": True})
    assert status == 200 and len(sampled["output_ids"]) == 4


def test_bad_requests_get_400_and_the_server_keeps_serving(worker_url, call):
    url, _ = worker_url
    req = urllib.request.Request(url + "/generate", data=b"{not json", method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400
    for bad in ([1, 2], {"prompt": ""}, {"input_ids": []}, {"input_ids": [-1]},
                {"prompt": "a", "max_new_tokens": 10 ** 9},
                {"prompt": "a", "max_new_tokens": 5000},  # past the model's positions
                {"prompt": "a", "temperature": -1}, {"prompt": "a", "bootstrap_room": -5}):
        status, body = call(url, "/generate", bad)
        assert status == 400 and isinstance(body["error"], str), bad
    assert call(url, "/nope")[0] == 404
    status, health = call(url, "/health")
    assert status == 200 and health["free_pages"] == health["total_pages"] == 64
    assert call(url, "/generate", {"prompt": "ok", "max_new_tokens": 2})[0] == 200
