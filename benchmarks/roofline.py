"""The measured roofline the engine benchmarks compare with (this machine, one dtype).

    python benchmarks/roofline.py [--model DIR] [--dtypes float32,bfloat16]
                                  [--concurrency 1,16] [--runs 3] [--threads 2]

prints, per dtype and concurrency, what fraction of this machine's memory bandwidth the
engine's decode steps reach: the bytes a decode step must read (every weight but the
embedding table, whose B rows are read instead, plus each sequence's K and V at its
current context, every layer) over the step's measured time (``LLMEngine.on_step``: the
whole step, scheduling and sampling included), against :func:`measure_bandwidth` taken
right before that run (a shared VM's bandwidth swings 18-29 GB/s minute to minute).
``of roof`` is the same step against max(bytes / bandwidth, flops / matmul rate): past a
few sequences a step's GEMMs are compute-bound here, so that is the bar a step can reach.
Model: as benchmarks/engine_vs_hf.py (a fresh ~30M Llama by default).  The workload:
``c`` prompts of 32 tokens, 64 new tokens each, ``--runs`` runs (medians printed).

The whole-run roofline of engine_vs_hf.py (:func:`roofline_run_tok_s`): per decode step
max(bytes / bandwidth, flops / matmul rate), bytes = weights + KV read, flops = 2 x params
x batch (+ attention), plus the prefill of the prompts, which both sides' tok/s include.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from checkpoints import write_unseen_llama

from engine.config import ModelConfig
from engine.cpu_isa import probe_cpu
from engine.model import kernels

# STREAM's rule: arrays well past the last-level cache (32 MiB here), so what is timed
# is DRAM, not cache.
STREAM_BYTES = 256 << 20


def measure_bandwidth(nbytes: int = STREAM_BYTES, repeats: int = 10) -> float:
    """This machine's memory bandwidth in bytes/s, STREAM-like, with torch's current threads.

    Two kernels over ``nbytes`` arrays filled with data first (an untouched ``empty``
    reads the kernel's shared zero page, i.e. cache: that once measured 127 GB/s here):
    a float32 ``sum`` (bytes read / time, the traffic of a decode step, which reads its
    weights) and a ``copy_`` (read + written bytes / time, STREAM's copy).  Each is timed
    ``repeats`` times; the best time of each counts and the higher bandwidth of the two
    is returned: the strictest bar the machine itself showed.
    """
    a = torch.ones(nbytes // 4)
    b = torch.zeros_like(a)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    read = nbytes / best(a.sum)
    copy = 2 * nbytes / best(lambda: b.copy_(a))
    return max(read, copy)


def measure_machine(dtype: torch.dtype) -> tuple[float, float]:
    """(memory bandwidth bytes/s, matmul flop/s) in ``dtype`` on this machine."""
    bw = measure_bandwidth()
    n = 2048
    x = torch.randn(n, n).to(dtype)
    y = torch.randn(n, n).to(dtype)
    # A roofline must use the fastest GEMM this machine has, or an engine could "beat" it:
    # oneDNN's prepacked one where it runs the dtype (it beats plain mm in fp32 here), the
    # engine kernels' bf16 GEMM where they are built.  Where oneDNN runs no bf16 (an AVX2
    # CPU: engine.cpu_isa) packing would raise, and plain bf16 mm is torch's slow fallback
    # (~100x the kernels' time), left out unless nothing else runs.
    bf16_onednn = probe_cpu().onednn_bf16
    gemms = [] if dtype == torch.bfloat16 and not bf16_onednn else [lambda: x @ y]
    if torch.backends.mkldnn.is_available() and (dtype != torch.bfloat16 or bf16_onednn):
        packed = torch.ops.mkldnn._reorder_linear_weight(y, n)
        gemms.append(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none",
                                                                [], ""))
    if dtype == torch.bfloat16 and kernels.load() is None:
        lib = kernels.FusedCpuOps().lib
        vnni = lib.pack_bf16_vnni(y.T.contiguous())  # x @ y = x @ (y^T)^T
        gemms.append(lambda: lib.linear_bf16(x, vnni, None))
    if not gemms:
        gemms.append(lambda: x @ y)
    best = float("inf")
    for gemm in gemms:
        gemm()
        for _ in range(5):
            t = time.perf_counter()
            gemm()
            best = min(best, time.perf_counter() - t)
    flops = 2 * n ** 3 / best
    return bw, flops


def decode_weight_params(cfg: ModelConfig) -> int:
    """Parameters a decode step reads in full: all but the embedding table (a lookup of
    one row per sequence); a tied table is read whole anyway, as the LM head."""
    return cfg.num_params - (0 if cfg.tie_word_embeddings else cfg.vocab_size * cfg.hidden_size)


def decode_step_bytes(cfg: ModelConfig, contexts: list[int], itemsize: int) -> int:
    """Bytes a decode step must read: weights, each sequence's embedding row, and the K
    and V of every layer at each sequence's ``contexts`` positions before its new token."""
    kv_per_position = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim
    return itemsize * (decode_weight_params(cfg) + len(contexts) * cfg.hidden_size
                       + kv_per_position * sum(contexts))


def decode_step_flops(cfg: ModelConfig, contexts: list[int]) -> int:
    """GEMM flops of a decode step (embedding excluded), attention over ``contexts``."""
    attn = 4 * sum(contexts) * cfg.num_layers * cfg.num_heads * cfg.head_dim
    return 2 * decode_weight_params(cfg) * len(contexts) + attn


def roofline_tok_s(cfg: ModelConfig, batch: int, ctx: int, itemsize: int, bw: float,
                   flops: float) -> float:
    step = max(decode_step_bytes(cfg, [ctx] * batch, itemsize) / bw,
               decode_step_flops(cfg, [ctx] * batch) / flops)
    return batch / step


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


class DecodeSteps:
    """An ``LLMEngine.on_step`` observer: the bytes, flops and seconds of each decode step."""

    def __init__(self, cfg: ModelConfig, itemsize: int) -> None:
        self.cfg = cfg
        self.itemsize = itemsize
        self.steps: list[tuple[int, int, float]] = []  # (bytes, flops, seconds)

    def __call__(self, batch, seconds: float) -> None:
        if batch.is_prefill:
            return
        # After the step: each sequence's KV now holds its new token too, so the step
        # read num_computed - 1 positions (plus the token itself, computed in the step).
        contexts = [s.num_computed - 1 for s in batch.seqs]
        self.steps.append((decode_step_bytes(self.cfg, contexts, self.itemsize),
                           decode_step_flops(self.cfg, contexts), seconds))

    @property
    def seconds(self) -> float:
        return sum(s for _, _, s in self.steps)

    def bandwidth_fraction(self, bw: float) -> float:
        """Bytes the decode steps read / their time, as a fraction of ``bw``."""
        return sum(b for b, _, _ in self.steps) / self.seconds / bw

    def roof_fraction(self, bw: float, flops: float) -> float:
        """The steps' roofline time (max of bytes / bw and flops / rate) / their time."""
        return sum(max(b / bw, f / flops) for b, f, _ in self.steps) / self.seconds


def timed_generate(engine, prompts: list[list[int]], out_len: int) -> tuple[float, DecodeSteps]:
    """Run ``prompts`` to ``out_len`` new tokens each (EOS ignored): (seconds, its steps)."""
    from engine.core.sequence import SamplingParams

    steps = DecodeSteps(engine.cfg, engine.runner.dtype.itemsize)
    engine.on_step = steps
    try:
        t = time.perf_counter()
        engine.generate(prompts, SamplingParams(out_len, ignore_eos=True))
        return time.perf_counter() - t, steps
    finally:
        engine.on_step = None


def run_dtype(args, model_dir: str, dtype_name: str) -> None:
    from engine.core.llm import LLMEngine
    from engine.knobs import EngineKnobs
    from engine.tools.bench import make_prompts

    eng = LLMEngine(EngineKnobs(dtype=dtype_name, num_pages=2048, max_running_requests=256,
                                num_threads=args.threads,
                                cpu_isa=os.environ.get("ENGINE_CPU_ISA", "auto")),
                    model_dir=model_dir)
    paths = eng.model.cpu_paths
    print(f"\n== {dtype_name}: {eng.num_threads} threads, ops {eng.model.ops.describe()}, ISA "
          f"{paths.get('cpu_isa')}, GEMM {paths['gemm']}; "
          f"bandwidth (STREAM-like, best of sum and copy over {STREAM_BYTES >> 20} MiB) and "
          f"matmul rate measured right before each run")
    print(f"{'conc':>6} {'step ms':>8} {'MB/step':>8} {'GB/s':>6} {'of bw':>6} {'range':>9} "
          f"{'of roof':>7} {'bw GB/s':>7} {'GFLOP/s':>7}")
    med = statistics.median
    for c in [int(x) for x in args.concurrency.split(",")]:
        prompts = make_prompts(c, args.input_len, min(eng.cfg.vocab_size, 256), seed=c)
        timed_generate(eng, prompts[:1], 2)  # warm-up
        eng.scheduler.max_running = c
        runs = []  # (steps, bandwidth, matmul rate): each run against the machine beside it
        for _ in range(args.runs):
            bw, fl = measure_machine(eng.runner.dtype)
            runs.append((timed_generate(eng, prompts, args.output_len)[1], bw, fl))
        fracs = [r.bandwidth_fraction(bw) for r, bw, _ in runs]
        step_s = med(r.seconds / len(r.steps) for r, _, _ in runs)
        step_b = statistics.fmean(b for b, _, _ in runs[0][0].steps)
        print(f"{'c' + str(c):>6} {step_s * 1e3:>8.3f} {step_b / 1e6:>8.1f} "
              f"{step_b / step_s / 1e9:>6.1f} {med(fracs):>6.0%} "
              f"{min(fracs):>4.0%}-{max(fracs):<4.0%} "
              f"{med(r.roof_fraction(bw, fl) for r, bw, fl in runs):>7.0%} "
              f"{med(bw for _, bw, _ in runs) / 1e9:>7.1f} "
              f"{med(fl for _, _, fl in runs) / 1e9:>7.0f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint directory (default: a fresh 30M Llama)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (0 = the engine's "
                    "start-up choice)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="unseen-llama-") as tmp:
        model = args.model or str(write_unseen_llama(Path(tmp)))
        print(f"torch {torch.__version__}; model {model}; c prompts x {args.input_len} "
              f"tokens, {args.output_len} new, {args.runs} runs", flush=True)
        for d in args.dtypes.split(","):
            run_dtype(args, model, d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
