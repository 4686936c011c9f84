"""The CUDA path: same tokens as the CPU where a GPU exists; a clear refusal where not."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from engine import LLMEngine
from engine import SamplingParams
from engine.knobs import EngineKnobs


def test_cuda_requested_without_a_gpu_is_refused_clearly():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = subprocess.run([sys.executable, "-m", "engine", "generate", "--preset", "tiny",
                        "--prompt-ids", "1,2,3", "--max-new-tokens", "2", "--json"],
                       env={"ENGINE_DEVICE": "cuda", "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "ENGINE_DEVICE=cuda" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_greedy_tokens_match_cpu():
    prompts = [list(range(3, 3 + n)) for n in (5, 17, 40)]
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    outs = {}
    for device in ("cpu", "cuda"):
        knobs = EngineKnobs(device=device, dtype="float32", num_pages=128, page_size=16,
                            decode_target_ctas=64)
        eng = LLMEngine(knobs, preset="tiny")
        outs[device] = [s.output_ids for s in eng.generate(prompts, params)]
    assert outs["cuda"] == outs["cpu"]
