"""The client APIs of the bundled engine, driven by the official ``openai`` package and by
SGLang's native ``/generate`` shape: on a single-process server and through the PD router
(real processes on loopback); and ``/server_info`` on every role."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import openai
import pytest

from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams
from engine.knobs import EngineKnobs
from engine.serving.http import EngineHTTPServer
from engine.serving.http import stream_post
from engine.serving.info import startup_info
from engine.serving.worker import Worker
from engine.serving.worker import make_worker_handler
from tests.engine.conftest import REPO

PROMPT = [1, 72, 105, 33]


@pytest.fixture(scope="module")
def single():
    eng = LLMEngine(EngineKnobs(num_pages=64), preset="tiny")
    eng.start()
    worker = Worker(eng, "both", startup_info("both", "tiny", eng.knobs))
    httpd = EngineHTTPServer(("127.0.0.1", 0), make_worker_handler(worker))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    eng.stop()


@pytest.fixture(scope="module")
def cluster(module_servers):
    return module_servers.pd_cluster({}, scripts=True)


def expected(n: int, prompt=PROMPT) -> list[int]:
    eng = LLMEngine(EngineKnobs(num_pages=64, num_threads=1), preset="tiny")
    return eng.generate([prompt], SamplingParams(n, ignore_eos=True))[0].output_ids


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_openai_client_completes_text_and_token_ids_with_usage(single):
    c = client(single)
    r = c.completions.create(model="tiny", prompt=PROMPT, max_tokens=5, temperature=0,
                             extra_body={"ignore_eos": True, "return_token_ids": True})
    assert r.object == "text_completion" and r.model == "tiny"
    assert r.choices[0].token_ids == expected(5)
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (4, 5, 9)
    r = c.completions.create(model="tiny", prompt="héllo", max_tokens=3, temperature=0)
    assert r.usage.prompt_tokens == len("héllo".encode()) + 1  # BOS + bytes
    with pytest.raises(openai.BadRequestError, match="'n'=2 is not supported"):
        c.completions.create(model="tiny", prompt="x", n=2)
    with pytest.raises(openai.BadRequestError, match="batch of 2 prompts"):
        c.completions.create(model="tiny", prompt=["a", "b"])


def _stream_ids(url: str, n: int) -> tuple[list[int], list, object]:
    chunks = list(client(url).completions.create(
        model="tiny", prompt=PROMPT, max_tokens=n, temperature=0, stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "return_token_ids": True}))
    ids = [t for ch in chunks for choice in ch.choices for t in choice.token_ids]
    return ids, chunks, chunks[-1].usage


def test_openai_client_streams_from_a_single_process_server(single):
    ids, chunks, use = _stream_ids(single, 40)
    assert ids == expected(40)
    # One event per token, whatever the timing (as SGLang's stream_interval=1): a token's
    # ids come in a chunk of their own, never several tokens in one blob.
    assert [len(ch.choices[0].token_ids) for ch in chunks
            if ch.choices and ch.choices[0].token_ids] == [1] * 40
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length"
    assert use.completion_tokens == 40


def test_openai_client_streams_a_completion_from_the_router(cluster):
    _, _, router = cluster
    ids, chunks, use = _stream_ids(router, 40)
    assert ids == expected(40)
    assert [len(ch.choices[0].token_ids) for ch in chunks
            if ch.choices and ch.choices[0].token_ids] == [1] * 40
    assert use.prompt_tokens == 4 and use.completion_tokens == 40
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    whole = client(router).completions.create(model="tiny", prompt=PROMPT, max_tokens=40,
                                              temperature=0, extra_body={"ignore_eos": True})
    assert text == whole.choices[0].text
    with pytest.raises(openai.BadRequestError):
        client(router).completions.create(model="tiny", prompt=[], max_tokens=2)


@pytest.mark.parametrize("where", ["single", "router"])
def test_sglang_native_generate_shape_whole_and_streamed(where, single, cluster, call):
    url = single if where == "single" else cluster[2]
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    status, out = call(url, "/generate", body)
    assert status == 200 and out["output_ids"] == expected(4)
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
    assert out["meta_info"]["completion_tokens"] == 4
    long = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 48, "ignore_eos": True},
            "stream": True}  # long enough to span several polls of the stream
    events = [json.loads(d) for d in stream_post(f"{url}/generate", long, timeout=60)
              if d != b"[DONE]"]
    assert events[-1]["output_ids"] == expected(48)  # cumulative, as SGLang streams
    assert all(e["output_ids"] == events[-1]["output_ids"][:len(e["output_ids"])]
               for e in events)
    assert len(events) >= 2 and events[-1]["meta_info"]["finish_reason"]["type"] == "length"
    status, out = call(url, "/generate", {"text": "hi", "sampling_params": {"top_p": 0.5}})
    assert status == 400 and "top_p" in out["error"]
    status, out = call(url, "/generate", {"text": "hi", "max_new_tokens": 2,
                                          "sampling_params": {"max_new_tokens": 3}})
    assert status == 400 and "both" in out["error"]


def test_server_info_on_prefill_decode_and_router(cluster, call):
    prefill, decode, router = cluster
    for url, role in ((prefill, "prefill"), (decode, "decode")):
        status, info = call(url, "/server_info")
        assert status == 200 and info["role"] == role and info["model"] == "tiny"
        assert info["env"]["ENGINE_PAGE_SIZE"] == "16"  # as exported by the serve script
        assert info["knobs"]["ENGINE_PAGE_SIZE"] == 16
        assert os.path.exists(f"/proc/{info['pid']}") and info["start_unix"] > 0
        assert "--role" in info["argv"] and role in info["argv"]
    assert call(decode, "/server_info")[1]["env"]["ENGINE_DECODE_TARGET_CTAS"] == "16"
    status, info = call(router, "/server_info")
    assert info["role"] == "router" and info["decode"]["role"] == "decode"
    assert info["prefill"]["pid"] != info["decode"]["pid"] != info["pid"]
    assert call(router, "/get_server_info")[1]["role"] == "router"  # SGLang's path too


def test_server_info_names_the_engine_commit_of_a_git_checkout(tmp_path):
    import shutil

    repo = tmp_path / "engine-repo"
    shutil.copytree(REPO / "engine", repo / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(repo)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
                   check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    code = ("import json; from engine.serving.info import startup_info; "
            "print(json.dumps(startup_info('both', 'tiny', None)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(repo), capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(repo)})
    info = json.loads(out.stdout)
    assert info["engine_commit"] == head and info["engine_dirty"] is False
