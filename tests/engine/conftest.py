"""Fixtures of the engine tests: default knobs, and real server processes on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.knobs import EngineKnobs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def knobs() -> EngineKnobs:
    """Default knobs with a small cache, independent of the caller's environment."""
    return EngineKnobs(num_pages=256, page_size=16)


def step_logits(eng, prompts: list[list[int]], max_new_tokens: int
                ) -> tuple[list, list[list[int]]]:
    """Greedy generation keeping each step's logits (what the sampler saw), and the tokens."""
    from engine.core.sequence import SamplingParams

    steps = []
    sample = eng.runner.sample

    def record(x, temps):
        steps.append(x.clone())
        return sample(x, temps)

    eng.runner.sample = record
    seqs = eng.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True))
    eng.runner.sample = sample
    return steps, [s.output_ids for s in seqs]


def error_on_rows_fed_alike(run: tuple[list, list[list[int]]],
                            ref: tuple[list, list[list[int]]]) -> float:
    """Largest logit difference of two :func:`step_logits` runs on the prefill step and
    the first decode step, the latter only on rows both fed the same first token."""
    (steps, ids), (ref_steps, ref_ids) = run, ref
    fed_alike = [i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a[0] == b[0]]
    assert fed_alike, "no row was fed alike: the comparison would say nothing"
    return max((steps[0] - ref_steps[0]).abs().max().item(),
               (steps[1][fed_alike] - ref_steps[1][fed_alike]).abs().max().item())


def write_hf_checkpoint(path, family: str = "llama", seed: int = 1234, std: float = 0.08,
                        **config):
    """A small Llama (or Qwen2) written by transformers' ``save_pretrained`` into ``path``,
    its weights widened from the default init (attention far from uniform, so comparisons
    bite); ``config`` sets the model's sizes.  Returns the transformers model."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config_cls, causal_lm = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[family]
    settings = {"rms_norm_eps": 1e-5, "tie_word_embeddings": False, "eos_token_id": None,
                "bos_token_id": None, "pad_token_id": None, **config}
    model = causal_lm(config_cls(**settings))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, 0.2 if "embed" in name else std)
    model = model.float().eval()
    model.save_pretrained(path, safe_serialization=True)
    return model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_call(url: str, path: str, body: dict | None = None, timeout: float = 60
              ) -> tuple[int, dict]:
    """GET (no body) or POST JSON; returns (status, decoded JSON) for errors too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Servers:
    """Engine server processes started by a test, all stopped at teardown."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def spawn(self, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "ENGINE_NUM_THREADS": "1",
                    "ENGINE_NUM_PAGES": "128", "PYTHON": sys.executable, **(env or {})}
        proc = subprocess.Popen(cmd, cwd=str(REPO), env=full_env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def wait_ready(self, proc: subprocess.Popen, url: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    return url
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"server {proc.args} did not come up")

    def pd_cluster(self, env: dict[str, str], scripts: bool = False) -> tuple[str, str, str]:
        """Prefill, decode and router processes (tiny preset); returns their URLs.

        ``scripts``: launch through engine/scripts/serve_*.sh, as an operator would.
        """
        ports = [free_port() for _ in range(3)]
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        if scripts:
            cmds = [["bash", str(REPO / "engine/scripts" / f"serve_{role}.sh")]
                    for role in ("prefill", "decode", "router")]
            envs = [{**env, "PORT": str(port), "PREFILL_URL": urls[0], "DECODE_URL": urls[1]}
                    for port in ports]
        else:
            base = [sys.executable, "-m", "engine", "serve"]
            cmds = [base + ["--role", "prefill", "--preset", "tiny", "--port", str(ports[0])],
                    base + ["--role", "decode", "--preset", "tiny", "--port", str(ports[1])],
                    base + ["--role", "router", "--prefill", urls[0], "--decode", urls[1],
                            "--port", str(ports[2])]]
            envs = [env] * 3
        # Workers start in parallel (model build dominates); the router after them.
        workers = [self.spawn(cmds[i], envs[i]) for i in (0, 1)]
        for proc, url in zip(workers, urls):
            self.wait_ready(proc, url)
        self.wait_ready(self.spawn(cmds[2], envs[2]), urls[2])
        return urls[0], urls[1], urls[2]

    def stop_all(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.stop_all()


@pytest.fixture(scope="module")
def module_servers():
    s = Servers()
    yield s
    s.stop_all()


@pytest.fixture
def call() -> Callable[..., tuple[int, dict]]:
    return http_call
