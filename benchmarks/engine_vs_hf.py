"""Engine (offline) vs Hugging Face ``generate`` vs a measured roofline, on the ``small`` preset.

    python benchmarks/engine_vs_hf.py [--dtypes float32,bfloat16] [--concurrency 1,8,16,32]
                                      [--input-len 32] [--output-len 32]

Same weights, prompts and dtype on both sides.  Output tok/s; ratios engine/HF and
engine/roofline.  The roofline per decode step is max(bytes / bandwidth, flops / matmul
rate), both measured here in the dtype; bytes = weights + KV read, flops = 2 x params x batch
(+ attention).  ``eng/run-roof`` compares with the roofline of the whole measured run, the
prefill of the prompts included (see roofline_run_tok_s).  Each figure is the best of
--repeats runs with the sides interleaved; ``spread`` is how far the worst run fell below
the best (engine/HF), the noise of a shared machine.  Also prints the effect of
ENGINE_DECODE_TARGET_CTAS at each concurrency.  Not a timed test: run it by hand (minutes
on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from engine.tools.bench import make_prompts
from engine.config import ModelConfig
from engine.knobs import EngineKnobs
from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams


def hf_model(engine: LLMEngine, dtype: torch.dtype):
    """A transformers LlamaForCausalLM holding the engine's weights (fused ones split)."""
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


def hf_tok_s(model, prompts: list[list[int]], out_len: int) -> float:
    ids = torch.tensor(prompts)
    with torch.inference_mode():
        model.generate(ids[:, :4], max_new_tokens=2, do_sample=False)  # warm-up
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=out_len, min_new_tokens=out_len, do_sample=False)
        return len(prompts) * out_len / (time.perf_counter() - t)


def engine_tok_s(engine: LLMEngine, prompts: list[list[int]], out_len: int) -> float:
    params = SamplingParams(out_len, ignore_eos=True)
    engine.scheduler.max_running = len(prompts)
    t = time.perf_counter()
    engine.generate(prompts, params)
    return len(prompts) * out_len / (time.perf_counter() - t)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--concurrency", default="1,8,16,32")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--ctas", default="1,256", help="ENGINE_DECODE_TARGET_CTAS values to "
                    "compare with the default (16)")
    ap.add_argument("--repeats", type=int, default=3, help="best of N interleaved runs")
    ap.add_argument("--linear-backend", default="auto", choices=("auto", "aten", "onednn"),
                    help="ENGINE_LINEAR_BACKEND of the engine side")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads for both sides (0 = torch's default)")
    args = ap.parse_args()
    if args.threads:
        # On a shared machine one thread can beat two by a lot: every op that enters an
        # OpenMP region waits for the second thread to be scheduled.
        torch.set_num_threads(args.threads)
    concs = [int(x) for x in args.concurrency.split(",")]
    ctas = [int(x) for x in args.ctas.split(",")]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)
    for dtype_name in args.dtypes.split(","):
        knobs = EngineKnobs(dtype=dtype_name, num_pages=1024, max_running_requests=256,
                            num_threads=args.threads, linear_backend=args.linear_backend)
        eng = LLMEngine(knobs, preset="small")
        hf = hf_model(eng, eng.runner.dtype)
        bw, fl = measure_machine(eng.runner.dtype)
        print(f"\n== {dtype_name}, ENGINE_LINEAR_BACKEND={args.linear_backend}: small preset "
              f"({eng.cfg.num_params / 1e6:.0f}M params), "
              f"bandwidth {bw / 1e9:.1f} GB/s, matmul {fl / 1e9:.0f} GFLOP/s")
        print(f"{'conc':>5} {'engine':>9} {'hf':>9} {'roofline':>9} {'eng/hf':>7} "
              f"{'eng/roof':>8} {'eng/run-roof':>12} {'spread eng/hf':>14}   "
              f"engine tok/s at TARGET_CTAS="
              + ",".join(map(str, ctas)))
        engine_tok_s(eng, make_prompts(2, 8, 256, 9), 4)  # warm-up
        for c in concs:
            prompts = make_prompts(c, args.input_len, 256, seed=c)
            # Best of --repeats, the sides interleaved, so a noisy neighbour on a shared
            # machine hits every side alike and the best run shows what the code can do;
            # the spread (worst run below the best, per side) says how noisy it was.
            ours: list[float] = []
            theirs: list[float] = []
            by_ctas = [0.0] * len(ctas)
            for _ in range(args.repeats):
                for i, t in enumerate(ctas):
                    eng.runner.knobs = knobs.replace(decode_target_ctas=t)
                    by_ctas[i] = max(by_ctas[i], engine_tok_s(eng, prompts, args.output_len))
                eng.runner.knobs = knobs
                ours.append(engine_tok_s(eng, prompts, args.output_len))
                theirs.append(hf_tok_s(hf, prompts, args.output_len))
            roof = roofline_tok_s(eng.cfg, c, args.input_len + args.output_len // 2,
                                  eng.runner.dtype.itemsize, bw, fl)
            run_roof = roofline_run_tok_s(eng.cfg, c, args.input_len, args.output_len,
                                          eng.runner.dtype.itemsize, bw, fl)
            best, hf_best = max(ours), max(theirs)
            spread = f"-{1 - min(ours) / best:.0%}/-{1 - min(theirs) / hf_best:.0%}"
            print(f"{c:>5} {best:>9.1f} {hf_best:>9.1f} {roof:>9.1f} {best / hf_best:>6.2f}x "
                  f"{best / roof:>7.0%} {best / run_roof:>12.0%} {spread:>14}   " + " ".join(f"{x:.1f}" for x in by_ctas),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
