"""``GET /metrics`` on router, prefill and decode: SGLang's names, buckets and labels, and
values that follow real requests sent on loopback."""

from __future__ import annotations

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.serving.metrics import E2E_BUCKETS
from engine.serving.metrics import ITL_BUCKETS
from engine.serving.metrics import TTFT_BUCKETS

pytestmark = pytest.mark.slow

HISTOGRAMS = ("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
              "sglang:e2e_request_latency_seconds")


def scrape(url: str) -> dict[str, list]:
    """Samples by sample name, parsed by prometheus_client's own text parser."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append(s)
    return samples


def value(samples: dict[str, list], name: str) -> float:
    (one,) = samples[name]
    assert one.labels["model_name"] == "tiny", one.labels
    return one.value


def stream_completion(url: str, body: dict) -> list[dict]:
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=120) as resp:
        for line in resp:
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                events.append(json.loads(line[5:]))
    return events


def test_every_role_counts_its_requests_in_sglang_names(servers, call):
    prefill, decode, router = servers.pd_cluster({})
    before = {url: scrape(url) for url in (prefill, decode, router)}
    for url in (prefill, decode, router):
        # Buckets exactly SGLang's, and all three histograms empty before any request.
        for name, buckets in zip(HISTOGRAMS, (TTFT_BUCKETS, ITL_BUCKETS, E2E_BUCKETS)):
            les = [float(s.labels["le"]) for s in before[url].get(f"{name}_bucket", [])]
            assert les == [*map(float, buckets), float("inf")] or les == [], (url, name)
        assert value(before[url], "sglang:num_running_reqs") == 0
    prompts, generated = 0, 0
    for n in (5, 3):
        status, body = call(router, "/generate", {"text": "hello metrics", "ignore_eos": True,
                                                  "sampling_params": {"max_new_tokens": n}})
        assert status == 200 and body["meta_info"]["completion_tokens"] == n
        prompts += body["meta_info"]["prompt_tokens"]
        generated += n
    events = stream_completion(router, {"model": "tiny", "prompt": "streamed", "max_tokens": 4,
                                        "ignore_eos": True, "stream": True,
                                        "stream_options": {"include_usage": True}})
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] == 4
    prompts += usage["prompt_tokens"]
    generated += 4

    after = {url: scrape(url) for url in (prefill, decode, router)}
    for url, gen in ((router, generated), (decode, generated), (prefill, 3)):
        a, b = after[url], before[url]
        grew = value(a, "sglang:generation_tokens_total") - \
            value(b, "sglang:generation_tokens_total")
        assert grew == gen, (url, grew, gen)
        assert value(a, "sglang:prompt_tokens_total") == prompts, url
        assert value(a, "sglang:num_requests_total") == 3, url
        for name in ("sglang:time_to_first_token_seconds",
                     "sglang:e2e_request_latency_seconds"):
            assert value(a, f"{name}_count") == 3, (url, name)
            inf = [s for s in a[f"{name}_bucket"] if s.labels["le"] == "+Inf"]
            assert inf[0].value == 3
            assert value(a, f"{name}_sum") > 0
        # One inter-token interval per token after each request's first.
        assert value(a, "sglang:inter_token_latency_seconds_count") == gen - 3, url
        assert value(a, "sglang:num_running_reqs") == 0 and \
            value(a, "sglang:num_queue_reqs") == 0


def test_servers_in_one_process_keep_their_own_registry():
    from engine.serving.metrics import ServingMetrics

    one = ServingMetrics("a", lambda: 1, lambda: 2)
    two = ServingMetrics("b", lambda: 0, lambda: 0)
    one.observe(7, 0.0, [0.5, 0.6], 0.7)
    text_one = one.exposition()[0].decode()
    text_two = two.exposition()[0].decode()
    assert 'sglang:generation_tokens_total{model_name="a"} 2.0' in text_one
    assert 'sglang:num_queue_reqs{model_name="a"} 2.0' in text_one
    assert 'sglang:generation_tokens_total{model_name="b"} 0.0' in text_two
    assert 'model_name="a"' not in text_two
