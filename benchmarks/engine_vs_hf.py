"""Engine (offline) vs Hugging Face ``generate``, interleaved, with a roofline column.

    python benchmarks/engine_vs_hf.py [--model DIR | --preset small] [--dtypes float32,bfloat16]
                                      [--concurrency 1,8,16,32] [--pairs 3] [--threads 2]
                                      [--busy] [--busy-only]

Model: ``--model DIR`` (a Llama/Qwen2 checkpoint, loaded by both sides from disk), a
preset (the engine's seeded weights copied into a transformers model), or by default a
~30M Llama the engine has never seen (hidden 512, 8 layers, GQA 8/4, vocab 4096,
random weights) written with ``save_pretrained`` into a temporary directory.

Workload: ``--num-prompts`` prompts (32) of ``--input-len`` tokens (32), ``--output-len``
new tokens (64), at most ``c`` sequences at once (HF: batches of ``c`` prompts).  At
c < 8 the prompt count is capped at 4 x c (HF at c1 would take minutes otherwise).

Each (dtype, c) runs ``--pairs`` pairs of engine then HF back to back (A B A B ...), so
a noisy neighbour hits both sides alike; the table prints each side's median tok/s and
the median of the per-pair ratios, the load average over the pairs, and ``eng/roof``:
the engine against the roofline of the whole run (prefill + decode steps; each step is
max(bytes / bandwidth, flops / matmul rate), both measured here in the dtype); and
``step/bw``: the engine's decode steps, bytes they must read over their time, as a
fraction of this machine's memory bandwidth (benchmarks/roofline.py, which prints it
alone: the same code).  Bandwidth and matmul rate are measured beside each engine run,
right before it, and each run is set against its own: on a shared VM the bandwidth a
neighbour leaves swings 18-29 GB/s from one minute to the next, so a roofline measured
once, minutes away from a run, put the same engine at 33% or 68%.  ``roofline`` and
``bw GB/s`` print the medians of those measurements (their range in the second).

``--busy``: the same at c16/c32 with a spin loop pinned on one core.  The engine is then
built after the spinner starts, with ``ENGINE_NUM_THREADS`` from the environment (default
0: it picks its thread count at start-up); HF runs with torch's default thread count (all
cores), as a user would run it, and with ``--threads`` for reference.
Not a timed test: run it by hand (minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import write_unseen_llama  # noqa: E402
from roofline import measure_machine  # noqa: E402
from roofline import roofline_run_tok_s  # noqa: E402
from roofline import timed_generate  # noqa: E402

from engine.tools.bench import make_prompts  # noqa: E402
from engine.config import ModelConfig  # noqa: E402
from engine.knobs import EngineKnobs  # noqa: E402
from engine.knobs import load_knobs  # noqa: E402
from engine.core.llm import LLMEngine  # noqa: E402
from engine.core.sequence import SamplingParams  # noqa: E402

TORCH_DEFAULT_THREADS = torch.get_num_threads()  # before anything sets it


def hf_from_engine(engine: LLMEngine, dtype: torch.dtype):
    """A transformers LlamaForCausalLM holding a preset engine's weights (fused ones split)."""
    import transformers

    c: ModelConfig = engine.cfg
    hf_cfg = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
        num_key_value_heads=c.num_kv_heads, head_dim=c.head_dim, rope_theta=c.rope_theta,
        rms_norm_eps=c.rms_norm_eps, max_position_embeddings=c.max_position_embeddings,
        tie_word_embeddings=False, eos_token_id=None, bos_token_id=None, pad_token_id=0)
    model = transformers.LlamaForCausalLM(hf_cfg).to(dtype).eval()
    q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    sd = {"model.embed_tokens.weight": engine.model.embed_tokens.weight,
          "model.norm.weight": engine.model.norm.weight,
          "lm_head.weight": engine.model.lm_head.weight}
    for i, layer in enumerate(engine.model.layers):
        pre = f"model.layers.{i}."
        wq, wk, wv = layer.self_attn.qkv_proj.weight.split((q, kv, kv))
        gate, up = layer.mlp.gate_up_proj.weight.split(c.intermediate_size)
        sd.update({pre + "self_attn.q_proj.weight": wq, pre + "self_attn.k_proj.weight": wk,
                   pre + "self_attn.v_proj.weight": wv,
                   pre + "self_attn.o_proj.weight": layer.self_attn.o_proj.weight,
                   pre + "mlp.gate_proj.weight": gate, pre + "mlp.up_proj.weight": up,
                   pre + "mlp.down_proj.weight": layer.mlp.down_proj.weight,
                   pre + "input_layernorm.weight": layer.input_layernorm.weight,
                   pre + "post_attention_layernorm.weight":
                       layer.post_attention_layernorm.weight})
    model.load_state_dict({k: v.detach().clone() for k, v in sd.items()}, strict=True)
    return model


def hf_model(engine: LLMEngine, model_dir: str | None, dtype: torch.dtype):
    if model_dir is None:
        return hf_from_engine(engine, dtype)
    import transformers

    # the checkpoint's own architecture (Llama, Qwen2 with its q/k/v biases, Mistral)
    return transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype).eval()


def hf_tok_s(model, prompts: list[list[int]], c: int, out_len: int, threads: int) -> float:
    torch.set_num_threads(threads)
    ids = torch.tensor(prompts)
    kw = {"do_sample": False, "pad_token_id": 0}
    with torch.inference_mode():
        model.generate(ids[:1, :4], max_new_tokens=2, **kw)  # warm-up
        t = time.perf_counter()
        for i in range(0, len(prompts), c):
            model.generate(ids[i:i + c], max_new_tokens=out_len, min_new_tokens=out_len, **kw)
        return len(prompts) * out_len / (time.perf_counter() - t)


class EngineRun(NamedTuple):
    tok_s: float
    step_bw: float  # the decode steps' fraction of the bandwidth roofline (roofline.py)
    roof_tok_s: float  # the whole run's roofline (roofline_run_tok_s)
    bw: float  # bytes/s, measured right before the run


def engine_run(engine: LLMEngine, prompts: list[list[int]], c: int, args) -> EngineRun:
    """One timed engine run, set against the machine as measured right before it."""
    torch.set_num_threads(engine.num_threads)
    engine.generate(prompts[:1], SamplingParams(2, ignore_eos=True))  # warm-up
    engine.scheduler.max_running = c
    bw, fl = measure_machine(engine.runner.dtype)
    seconds, steps = timed_generate(engine, prompts, args.output_len)
    roof = roofline_run_tok_s(engine.cfg, c, args.input_len, args.output_len,
                              engine.runner.dtype.itemsize, bw, fl)
    return EngineRun(len(prompts) * args.output_len / seconds, steps.bandwidth_fraction(bw),
                     roof, bw)


def build_engine(args, dtype_name: str, num_threads: int) -> LLMEngine:
    knobs = EngineKnobs(dtype=dtype_name, num_pages=2048, max_running_requests=256,
                        num_threads=num_threads, linear_backend=args.linear_backend,
                        cpu_isa=args.cpu_isa)
    if args.model:
        return LLMEngine(knobs, model_dir=args.model)
    return LLMEngine(knobs, preset=args.preset)


def pairs(args, eng: LLMEngine, hf, c: int, hf_threads: int
          ) -> tuple[list[EngineRun], list[float], float]:
    """``--pairs`` interleaved (engine, HF) runs: the engine's runs, HF tok/s, and the
    mean 1-min load average over them."""
    n = args.num_prompts if c >= 8 else min(args.num_prompts, 4 * c)
    prompts = make_prompts(n, args.input_len, min(eng.cfg.vocab_size, 256), seed=c)
    ours, theirs, loads = [], [], []
    for _ in range(args.pairs):
        ours.append(engine_run(eng, prompts, c, args))
        theirs.append(hf_tok_s(hf, prompts, c, args.output_len, hf_threads))
        loads.append(os.getloadavg()[0])
    return ours, theirs, statistics.fmean(loads)


def print_row(label: str, ours: list[EngineRun], theirs: list[float], load: float) -> None:
    ratios = [a.tok_s / b for a, b in zip(ours, theirs)]
    med = statistics.median
    bws = [r.bw / 1e9 for r in ours]
    print(f"{label:>10} {med(r.tok_s for r in ours):>9.1f} {med(theirs):>9.1f} "
          f"{med(ratios):>6.2f}x {min(ratios):>5.2f}-{max(ratios):<5.2f} "
          f"{med(r.step_bw for r in ours):>7.0%} {med(r.roof_tok_s for r in ours):>9.1f} "
          f"{med(r.tok_s / r.roof_tok_s for r in ours):>7.0%} "
          f"{med(bws):>5.1f} {min(bws):>4.1f}-{max(bws):<4.1f} {load:>6.2f}", flush=True)


HEADER = (f"{'conc':>10} {'engine':>9} {'hf':>9} {'eng/hf':>7} {'range':>11} {'step/bw':>7} "
          f"{'roofline':>9} {'eng/roof':>8} {'bw GB/s':>7} {'range':>9} {'load1':>6}")


def spin_on(cpu: int) -> subprocess.Popen:
    """A busy process pinned on ``cpu`` (a neighbour's job on a shared machine)."""
    # It spins while its parent lives: a benchmark killed by a timeout leaves no spinner.
    code = (f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nparent = {os.getpid()}\n"
            "while os.getppid() == parent:\n    pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(1.0)  # let it show in /proc/stat before the engine's start-up probe
    return proc


def paths_line(eng: LLMEngine) -> str:
    """Which paths the engine ran (engine.cpu_isa, engine.weights.paths_report)."""
    p = eng.model.cpu_paths
    return (f"engine paths: ISA {p.get('cpu_isa')} ({p.get('cpu_isa_why')}); kernels "
            f"{p['kernels']}; GEMM {p['gemm']}")


def run_dtype(args, dtype_name: str, concs: list[int]) -> None:
    eng = build_engine(args, dtype_name, args.threads)
    hf = hf_model(eng, args.model, eng.runner.dtype)
    print(f"\n== {dtype_name}: {eng.cfg.num_params / 1e6:.0f}M params, {eng.num_threads} "
          f"threads both sides")
    print(paths_line(eng))
    print(HEADER)
    for c in concs:
        ours, theirs, load = pairs(args, eng, hf, c, eng.num_threads)
        print_row(f"c{c}", ours, theirs, load)


def run_busy(args, dtype_name: str, concs: list[int]) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    spinner = spin_on(cpus[-1])
    try:
        threads = load_knobs().num_threads  # ENGINE_NUM_THREADS, default 0 = auto
        eng = build_engine(args, dtype_name, threads)
        hf = hf_model(eng, args.model, eng.runner.dtype)
        default = TORCH_DEFAULT_THREADS
        hf_threads = [default] + ([args.threads] if args.threads not in (0, default) else [])
        print(f"\n== busy, {dtype_name}: spin loop pinned on cpu {cpus[-1]}; engine chose "
              f"{eng.num_threads} thread(s) (ENGINE_NUM_THREADS={threads}); HF at "
              + " and ".join(map(str, hf_threads)) + " (torch default first)")
        print(HEADER)
        for c in concs:
            for t in hf_threads:
                ours, theirs, load = pairs(args, eng, hf, c, t)
                print_row(f"c{c} hf@{t}", ours, theirs, load)
    finally:
        spinner.kill()
        spinner.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint directory (default: a fresh 30M Llama)")
    ap.add_argument("--preset", help="an engine preset (tiny, small) instead of a checkpoint")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--concurrency", default="1,8,16,32")
    ap.add_argument("--busy-concurrency", default="16,32")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=3, help="interleaved engine/HF pairs (>= 3)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, both sides "
                    "(0 = the engine's start-up choice)")
    ap.add_argument("--linear-backend", default="auto", choices=("auto", "aten", "onednn", "kernels"))
    ap.add_argument("--cpu-isa", default=os.environ.get("ENGINE_CPU_ISA", "auto"),
                    choices=("auto", "amx", "avx512", "avx2", "portable"),
                    help="the engine's ENGINE_CPU_ISA (default: the environment's, else auto)")
    ap.add_argument("--busy", action="store_true", help="also run with one core kept busy")
    ap.add_argument("--busy-only", action="store_true", help="only the busy case")
    args = ap.parse_args()
    if args.pairs < 3:
        ap.error("--pairs must be at least 3")
    if args.model and args.preset:
        ap.error("--model and --preset exclude each other")
    with tempfile.TemporaryDirectory(prefix="unseen-llama-") as tmp:
        if not args.model and not args.preset:
            args.model = str(write_unseen_llama(Path(tmp)))
        print(f"torch {torch.__version__}; model {args.model or args.preset}; "
              f"{args.num_prompts} prompts x {args.input_len} tokens, {args.output_len} new; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        dtypes = args.dtypes.split(",")
        if not args.busy_only:
            for d in dtypes:
                run_dtype(args, d, [int(x) for x in args.concurrency.split(",")])
        if args.busy or args.busy_only:
            for d in dtypes:
                run_busy(args, d, [int(x) for x in args.busy_concurrency.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
