"""PD disaggregation end to end: prefill, decode and router as separate processes."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams


@pytest.fixture(scope="module")
def cluster(module_servers):
    # Launched through the serve scripts, exactly as shipped.
    return module_servers.pd_cluster({}, scripts=True)


def test_pd_matches_single_process_for_16_concurrent_requests(cluster, knobs, call):
    _, durl, rurl = cluster
    prompts = [[(7 * i + j) % 250 for j in range(3 + i)] for i in range(16)]
    lengths = [4 + i % 5 for i in range(16)]
    local = LLMEngine(knobs, preset="tiny")
    expected = [local.generate([p], SamplingParams(n, ignore_eos=True))[0].output_ids
                for p, n in zip(prompts, lengths)]

    def one(i: int) -> tuple[int, dict]:
        return call(rurl, "/generate", {"input_ids": prompts[i], "max_new_tokens": lengths[i],
                                        "ignore_eos": True})

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(16)))
    assert [a[0] for a in answers] == [200] * 16, answers
    assert [a[1]["output_ids"] for a in answers] == expected
    assert all(a[1]["meta"]["ttft_ms"] > 0 for a in answers)
    _, health = call(durl, "/health")
    assert health["free_pages"] == health["total_pages"] and health["inflight"] == 0
    assert health["ops"].startswith("torch (")  # the tiny preset: eager ops, and why


def test_router_and_workers_refuse_bad_requests_and_keep_serving(cluster, call):
    purl, _, rurl = cluster
    for url in (rurl, purl):
        for bad in ({}, {"prompt": 5}, {"input_ids": [1, "x"]}, {"prompt": "a",
                    "max_new_tokens": 0}, {"input_ids": [1], "temperature": "hot"}):
            status, body = call(url, "/generate", bad)
            assert status == 400 and body["error"], (url, bad, body)
    status, body = call(purl, "/generate", {"input_ids": [1, 99999]})
    assert status == 400 and "vocabulary" in body["error"]
    status, body = call(rurl, "/generate", {"prompt": "hello", "max_new_tokens": 3})
    assert status == 200 and len(body["output_ids"]) <= 3 and isinstance(body["text"], str)



def test_only_the_workers_load_torch(cluster, module_servers):
    """The router forwards HTTP: a start-up without torch (each PD launch pays it once
    less, and the router's memory is a few MiB of Python, not torch's)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc (Linux)")
    prefill, decode, router = module_servers.procs[-3:]  # the order pd_cluster starts them
    loaded = {name: "libtorch_cpu" in Path(f"/proc/{proc.pid}/maps").read_text()
              for name, proc in (("prefill", prefill), ("decode", decode), ("router", router))}
    assert loaded == {"prefill": True, "decode": True, "router": False}

@pytest.mark.slow
def test_dropped_transfers_fail_fast_free_pages_and_servers_recover(servers, call):
    env = {"ENGINE_TRANSFER_DROP_PROB": "1", "ENGINE_INFLIGHT_TIMEOUT_S": "1.0"}
    purl, durl, rurl = servers.pd_cluster(env)
    t0 = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda i: call(rurl, "/generate", {
            "input_ids": [1, 2, 3, i], "max_new_tokens": 4}, timeout=30), range(3)))
    elapsed = time.monotonic() - t0
    assert all(status == 504 for status, _ in answers), answers
    assert all("ENGINE_INFLIGHT_TIMEOUT_S" in body["error"] for _, body in answers)
    assert elapsed < 10
    # Each side frees its pages at its own deadline (the prefill side's starts after its
    # forward pass), so allow one more timeout for the last of them.
    deadline = time.monotonic() + 5
    for url in (purl, durl):
        while True:
            _, health = call(url, "/health")
            if health["free_pages"] == health["total_pages"] and health["inflight"] == 0:
                break
            assert time.monotonic() < deadline, f"pages leaked on {health['role']}: {health}"
            time.sleep(0.05)
    # Still serving: a request that needs no transfer goes through the prefill worker.
    status, body = call(purl, "/generate", {"input_ids": [1, 2, 3], "max_new_tokens": 2})
    assert status == 200 and len(body["output_ids"]) == 2
    status, body = call(rurl, "/generate", {"input_ids": [5, 6], "max_new_tokens": 2})
    assert status == 504  # and the router answers again (drop prob is still 1)


def test_some_transfers_dropped_each_fails_fast_and_the_rest_are_answered(servers, call):
    # A partial fault (30% of transfers lost, a 2 s timeout on both workers): every request
    # gets an answer, the lost ones a 504 at the timeout, never a hang past it.
    env = {"ENGINE_TRANSFER_DROP_PROB": "0.3", "ENGINE_INFLIGHT_TIMEOUT_S": "2"}
    _, _, rurl = servers.pd_cluster(env)

    def one(i: int) -> tuple[int, dict, float]:
        t = time.monotonic()
        status, body = call(rurl, "/generate", {"input_ids": [1, 2, 3, i],
                                                "max_new_tokens": 4}, timeout=20)
        return status, body, time.monotonic() - t

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(one, range(12)))
    statuses = [status for status, _, _ in answers]
    # The drop draws are seeded (ENGINE_SEED): the same requests see the same count.
    assert set(statuses) == {200, 504}, answers
    for status, body, took in answers:
        if status == 504:
            assert "ENGINE_INFLIGHT_TIMEOUT_S=2s" in body["error"] and took < 6, (body, took)
        else:
            assert len(body["output_ids"]) == 4


def test_online_bench_against_the_router(cluster, tmp_path):
    import json
    import subprocess
    import sys

    _, _, rurl = cluster
    out = tmp_path / "online.jsonl"
    subprocess.run([sys.executable, "-m", "engine", "bench", "--mode", "online", "--url", rurl,
                    "--concurrency", "1,4", "--num-prompts", "4", "--input-len", "6",
                    "--output-len", "5", "--json", str(out)], check=True, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["max_concurrency"] for r in rows] == [1, 4]
    assert all(r["completed"] == 4 and r["total_output_tokens"] == 20 for r in rows)
    assert rows[0]["output_digest"] == rows[1]["output_digest"]
    assert rows[0]["mean_ttft_ms"] > 0 and rows[0]["output_throughput"] > 0
    # The decode worker's knobs as launched by serve_decode.sh, not the bench's own.
    info = rows[0]["server_info"]
    assert info["role"] == "router"
    assert info["decode"]["knobs"]["ENGINE_DECODE_TARGET_CTAS"] == 16
    assert info["prefill"]["knobs"]["ENGINE_PREFILL_CHUNK_TOKENS"] == 512
    # Where the tokens were made, for the ledger's evidence meta.
    assert all(r["device"] == info["decode"]["device"] for r in rows)
    assert info["decode"]["device"] == "cpu" or info["decode"]["device"].startswith("cuda:")
