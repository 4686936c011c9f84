"""The measured roofline the engine benchmarks compare with (this machine, one dtype).

Per decode step: max(bytes / bandwidth, flops / matmul rate), bytes = weights + KV read,
flops = 2 x params x batch (+ attention); :func:`roofline_run_tok_s` adds the prefill of
the prompts, which both sides' tok/s include.
"""

from __future__ import annotations

import time

import torch

from engine.config import ModelConfig


def measure_machine(dtype: torch.dtype) -> tuple[float, float]:
    """(memory bandwidth bytes/s, matmul flop/s) in ``dtype`` on this machine."""
    a = torch.empty(64 << 20, dtype=torch.uint8)
    b = torch.empty_like(a)
    b.copy_(a)
    best = float("inf")
    for _ in range(10):
        t = time.perf_counter()
        b.copy_(a)
        best = min(best, time.perf_counter() - t)
    bw = 2 * a.numel() / best  # read + write
    n = 2048
    x = torch.randn(n, n).to(dtype)
    y = torch.randn(n, n).to(dtype)
    gemms = [lambda: x @ y]
    if torch.backends.mkldnn.is_available():
        # The engine's prepacked oneDNN GEMM beats plain mm in fp32 here; a roofline must
        # use the fastest GEMM this machine has, or an engine could "beat" it.
        packed = torch.ops.mkldnn._reorder_linear_weight(y, n)
        gemms.append(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none",
                                                                [], ""))
    best = float("inf")
    for gemm in gemms:
        gemm()
        for _ in range(5):
            t = time.perf_counter()
            gemm()
            best = min(best, time.perf_counter() - t)
    flops = 2 * n ** 3 / best
    return bw, flops


def roofline_tok_s(cfg: ModelConfig, batch: int, ctx: int, itemsize: int, bw: float,
                   flops: float) -> float:
    # The embedding is a lookup (no FLOPs, one row read); the LM head is a real GEMM.
    params = cfg.num_params - cfg.vocab_size * cfg.hidden_size
    kv_bytes = batch * ctx * cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * itemsize
    step_bytes = params * itemsize + kv_bytes
    step_flops = 2 * params * batch + 4 * batch * ctx * cfg.num_layers * cfg.num_heads \
        * cfg.head_dim
    return batch / max(step_bytes / bw, step_flops / flops)


def roofline_run_tok_s(cfg: ModelConfig, batch: int, input_len: int, output_len: int,
                       itemsize: int, bw: float, flops: float) -> float:
    """Roofline of the whole measured run, the prompt's prefill included.

    Both sides' tok/s count the prefill's time (one forward over batch x input_len tokens,
    which yields the first token) and then output_len - 1 decode steps; at in 32 / out 32
    the prefill is ~40% of the run's FLOPs, so the per-step roofline alone caps any
    engine's ratio well below 100%.  This one is what a perfect engine could reach here.
    """
    body = cfg.num_params - 2 * cfg.vocab_size * cfg.hidden_size  # decoder layers only
    head = cfg.vocab_size * cfg.hidden_size
    tokens = batch * input_len
    attn = 2 * batch * input_len * input_len * cfg.num_layers * cfg.num_heads * cfg.head_dim
    prefill = max((body + head) * itemsize / bw, (2 * body * tokens + 2 * head * batch + attn)
                  / flops)
    steps = sum(batch / roofline_tok_s(cfg, batch, input_len + i, itemsize, bw, flops)
                for i in range(1, output_len))
    return batch * output_len / (prefill + steps)
