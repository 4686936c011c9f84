"""The fused CPU decode kernels (engine/model/kernels) against their eager torch references.

Every kernel test runs once per variant this CPU can execute (avx512, avx2, portable:
engine.cpu_isa decides, the way ENGINE_CPU_ISA does); a variant the CPU cannot run, or a
machine without a C++ compiler or ninja, skips, naming why.  A build failure on a machine
that has them all is a failure, not a skip (``load()`` must return None).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.model import kernels
from engine.config import EngineError
from engine.config import ModelConfig
from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams
from engine.model.kernels import FusedCpuOps
from engine.model.kernels import TorchOps
from engine.cpu_isa import ALL_ROWS
from engine.cpu_isa import cpu_paths
from engine.cpu_isa import missing_for
from engine.cpu_isa import probe_cpu
from engine.model.linear import Linear
from engine.model.attention_ops import reference_attention
from tests.engine.conftest import REPO
from tests.engine.conftest import error_on_rows_fed_alike
from tests.engine.conftest import step_logits
from tests.engine.conftest import write_hf_checkpoint

transformers = pytest.importorskip("transformers")

_missing = kernels._unavailable_reason()
needs_kernels = pytest.mark.skipif(_missing is not None,
                                   reason=f"kernels not buildable: {_missing}")
DTYPES = [torch.float32, torch.bfloat16]
TORCH = TorchOps()


def _isa_param(isa: str):
    why = _missing and f"kernels not buildable: {_missing}"
    why = why or (f"this CPU cannot run the {isa} kernels: {missing_for(isa, probe_cpu())}"
                  if missing_for(isa, probe_cpu()) else None)
    return pytest.param(isa, marks=pytest.mark.skipif(why is not None, reason=why or ""))


ISAS = [_isa_param(isa) for isa in ("avx512", "avx2", "portable")]


@pytest.fixture(params=ISAS)
def isa(request) -> str:
    """Each ISA this CPU runs (ENGINE_CPU_ISA), its kernels' variant built."""
    assert kernels.load(kernels.VARIANT_OF_ISA[request.param]) is None
    return request.param


@pytest.fixture
def fused(isa) -> FusedCpuOps:
    return FusedCpuOps(kernels.VARIANT_OF_ISA[isa])


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance in units of the last place of a's dtype (bf16: 2^-8 relative)."""
    eps = torch.finfo(a.dtype).eps
    return (a.float() - b.float()).abs() / (b.float().abs() * eps).clamp_min(1e-30)


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,h", [(1, 64), (7, 512), (32, 4096)])
def test_rmsnorm_and_fused_residual_add_match_the_reference(fused, dtype, n, h):
    g = torch.Generator().manual_seed(n + h)
    x = (torch.randn(n, h, generator=g) * 3).to(dtype)
    r = torch.randn(n, h, generator=g).to(dtype)
    w = torch.rand(h, generator=g).add_(0.5).to(dtype)
    # Only the float32 mean of squares is summed in another order: a few float32 ulps,
    # which bf16's rounding hides or turns into one bf16 step.
    bound = 8 if dtype == torch.float32 else 2.01
    assert ulps_apart(fused.rmsnorm(x, w, 1e-6), TORCH.rmsnorm(x, w, 1e-6)).max() <= bound
    xf, xt = x.clone(), x.clone()
    yf, yt = fused.add_rmsnorm_(xf, r, w, 1e-5), TORCH.add_rmsnorm_(xt, r, w, 1e-5)
    assert torch.equal(xf, xt)  # the residual stream, updated in place, bit for bit
    assert torch.equal(xf, x + r)
    assert ulps_apart(yf, yt).max().item() <= bound


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,d", [(12, 64), (6, 128)])
def test_rope_in_place_on_the_qkv_rows_is_bit_identical(fused, dtype, heads, d):
    from engine.model.rope import RotaryEmbedding

    n, extra = 9, 2 * d  # v heads after the rotated ones stay untouched
    rope = RotaryEmbedding(d, 4096, 500000.0)
    positions = torch.tensor([0, 1, 5, 77, 300, 1023, 2047, 3000, 4095])
    cos, sin = rope.tables(positions, dtype)
    qkv = torch.randn(n, heads * d + extra, generator=torch.Generator().manual_seed(d)).to(dtype)
    a, b = qkv.clone(), qkv.clone()
    fused.rope_(a, cos, sin, heads, d)
    TORCH.rope_(b, cos, sin, heads, d)
    assert torch.equal(a, b)
    assert torch.equal(a[:, heads * d:], qkv[:, heads * d:])
    assert not torch.equal(a[1:, :heads * d], qkv[1:, :heads * d])  # position 0 is identity


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_matches_the_reference(fused, dtype):
    gu = (torch.randn(5, 2 * 1408, generator=torch.Generator().manual_seed(3)) * 4).to(dtype)
    gu[0, :8] = torch.tensor([-100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 88.0, 100.0]).to(dtype)
    ours, ref = fused.silu_mul(gu), TORCH.silu_mul(gu.clone())
    assert ours.shape == (5, 1408)
    # Another exp than torch's: float32 results within a few ulps, bf16 within one rounding.
    assert ulps_apart(ours, ref).max().item() <= (8 if dtype == torch.float32 else 1.01)
    assert torch.isfinite(ours).all()


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,d,splits", [(8, 4, 64, 1), (4, 4, 128, 1),
                                                     (16, 2, 64, 1), (8, 1, 64, 2),
                                                     (6, 3, 128, 3), (8, 4, 64, 7)])
def test_decode_attention_equals_the_float64_oracle(fused, dtype, heads, kv_heads, d, splits):
    """The block's real positions plus the own token; stale huge values past each context
    must not leak; q as a strided view of a fused qkv row, as the model passes it; split
    into ``splits`` ranges (some empty for the short rows) merged exactly."""
    g = torch.Generator().manual_seed(heads * d)
    B, cap = 5, 48
    lens = torch.tensor([48, 0, 17, 33, 1])  # context before the new token (0: own only)
    qkv = (torch.randn(B, (heads + 2 * kv_heads) * d, generator=g) * 2).to(dtype)
    q = qkv[:, :heads * d].view(B, heads, d)
    own_k = qkv[:, heads * d:(heads + kv_heads) * d].view(B, kv_heads, d)
    own_v = qkv[:, (heads + kv_heads) * d:].view(B, kv_heads, d)
    ctx_k = (torch.randn(B, kv_heads, cap, d, generator=g) * 2).to(dtype)
    ctx_v = torch.randn(B, kv_heads, cap, d, generator=g).to(dtype)
    kd, vd = ctx_k.clone(), ctx_v.clone()
    for b, n in enumerate(lens.tolist()):
        kd[b, :, n:] = 1e30
        vd[b, :, n:] = -1e30
    k = torch.zeros(B, cap + 1, kv_heads, d, dtype=torch.float64)
    v = torch.zeros(B, cap + 1, kv_heads, d, dtype=torch.float64)
    for b, n in enumerate(lens.tolist()):
        k[b, :n] = ctx_k[b, :, :n].transpose(0, 1).double()
        v[b, :n] = ctx_v[b, :, :n].transpose(0, 1).double()
        k[b, n], v[b, n] = own_k[b].double(), own_v[b].double()
    ref = reference_attention(q.double(), k, v, lens + 1, d ** -0.5)
    ours = fused.dense_decode_attention(q, own_k, own_v, kd, vd, lens, None, d ** -0.5, splits)
    assert ours.shape == (B, heads, d) and ours.dtype == dtype
    err = (ours.double() - ref).abs().max().item()
    # float32 inside: only the output's rounding to bf16 (|out| < 4 here) is bf16's.
    assert err < (2e-5 if dtype == torch.float32 else 4 * 2 ** -8), err


@needs_kernels
@pytest.mark.parametrize("k,n,bias", [(512, 1024, False), (1408, 512, True), (64, 48, True),
                                      (96, 112, False), (32, 80, True)])
def test_small_batch_bf16_gemm_equals_float32_math_and_ignores_the_other_rows(fused, k, n, bias):
    """Every tile shape (rows 8/4/2/1, column blocks 3/2/1 at the end of a thread's
    share; AVX2 and portable: rows 4/2/1, one block), and the same bits whatever the
    thread count (each thread prefetches the weights of its next tile: a wrong prefetch
    address would read past the matrix)."""
    g = torch.Generator().manual_seed(k + n)
    x = torch.randn(64, k, generator=g).to(torch.bfloat16)
    w = torch.randn(n, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, generator=g).to(torch.bfloat16) if bias else None
    wp = fused.lib.pack_bf16_vnni(w)
    exact = x.double() @ w.double().T + (0 if b is None else b.double())
    full = fused.lib.linear_bf16(x, wp, b)
    # float32 accumulation, one rounding to bf16: within a bf16 step of the exact value.
    assert ((full.double() - exact).abs() <= exact.abs() * 2 ** -8 + 1e-3).all()
    for m in (1, 2, 3, 7, 8, 13, 33):  # every tile shape: the same bits for each row
        assert torch.equal(fused.lib.linear_bf16(x[:m], wp, b), full[:m])
    threads = torch.get_num_threads()
    try:
        for t in (1, 3, 5):  # other shares of the column blocks per thread
            torch.set_num_threads(t)
            assert torch.equal(fused.lib.linear_bf16(x, wp, b), full)
    finally:
        torch.set_num_threads(threads)
    # the engine's Linear takes this path for small bf16 batches only
    from engine.model.linear import Linear

    lin = Linear(k, n, bias=bias).to(torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(w)
        if bias:
            lin.bias.copy_(b)
    assert lin.pack_vnni(fused.lib)
    assert torch.equal(lin(x[:5]), full[:5])
    assert not Linear(k, n + 8).to(torch.bfloat16).pack_vnni(fused.lib)  # out % 16: not packed


@needs_kernels
@pytest.mark.parametrize("k,i,bias", [(512, 1408, False), (96, 48, True), (64, 16, False)])
def test_swiglu_in_the_gemm_epilogue_gives_the_bits_of_gemm_then_swiglu(fused, k, i, bias):
    g = torch.Generator().manual_seed(k + i)
    x = (torch.randn(64, k, generator=g) * 2).to(torch.bfloat16)
    w = torch.randn(2 * i, k, generator=g).to(torch.bfloat16)
    b = torch.randn(2 * i, generator=g).to(torch.bfloat16) if bias else None
    wp = fused.lib.pack_bf16_vnni(w)
    ref = fused.silu_mul(fused.lib.linear_bf16(x, wp, b))
    threads = torch.get_num_threads()
    try:
        for t in (threads, 1, 3):
            torch.set_num_threads(t)
            for m in (64, 33, 8, 7, 2, 1):
                out = fused.lib.linear_bf16_silu(x[:m], wp, b)
                assert out.shape == (m, i) and torch.equal(out, ref[:m])
    finally:
        torch.set_num_threads(threads)
    # the MLP takes it for small bf16 batches, the unfused ops elsewhere: the same output
    from engine.model.mlp import MLP

    mlp = MLP(k, i).to(torch.bfloat16)
    with torch.no_grad():
        mlp.gate_up_proj.weight.copy_(w)
    assert mlp.gate_up_proj.pack_vnni(fused.lib)
    assert torch.equal(mlp(x[:5], fused), mlp(x[:5], TORCH))
    with pytest.raises(RuntimeError, match="gate and up halves"):
        odd = fused.lib.pack_bf16_vnni(torch.ones(48, k, dtype=torch.bfloat16))
        fused.lib.linear_bf16_silu(x, odd, None)  # 3 blocks of 16 rows


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_scatter_equals_index_copy(fused, dtype):
    g = torch.Generator().manual_seed(5)
    dst = torch.randn(300, 256, generator=g).to(dtype)
    src = torch.randn(70, 256, generator=g).to(dtype)
    index = torch.randperm(300, generator=g)[:70]
    ours, ref = dst.clone(), dst.clone()
    fused.copy_rows_(ours, index, src)
    TORCH.copy_rows_(ref, index, src)
    assert torch.equal(ours, ref)
    with pytest.raises(RuntimeError, match="out of"):
        fused.copy_rows_(ours, torch.tensor([0, 300] * 35), src)


@needs_kernels
@pytest.mark.parametrize("n,v", [(32, 4096), (3, 17), (2, 5), (1, 151936)])
def test_greedy_argmax_equals_torchs(fused, n, v):
    g = torch.Generator().manual_seed(n * v)
    x = torch.randn(n, v, generator=g)
    assert torch.equal(fused.argmax(x), TORCH.argmax(x))
    # ties (the first maximum wins), -inf rows, NaN (torch: the first NaN is the maximum)
    x = torch.randint(0, 3, (n, v), generator=g).float()
    x[0] = float("-inf")
    if n > 1:
        x[1, v // 2:] = float("nan")
        x[-1, v - 1] = 7.0  # in the scalar tail when v % 16 != 0
    assert torch.equal(fused.argmax(x), TORCH.argmax(x))
    assert torch.equal(fused.argmax(x[:, 1:]), TORCH.argmax(x[:, 1:]))  # strided rows


@needs_kernels
def test_kernels_refuse_what_they_cannot_compute(fused):
    x = torch.randn(2, 24)  # not a multiple of 16
    with pytest.raises(RuntimeError, match="multiple of 16"):
        fused.rmsnorm(x, torch.ones(24), 1e-6)
    with pytest.raises(RuntimeError, match="dtype"):
        fused.rmsnorm(torch.randn(2, 32, dtype=torch.float64), torch.ones(32, dtype=torch.float64),
                      1e-6)
    q = torch.randn(1, 2, 32)
    kd = torch.randn(1, 1, 4, 32)
    with pytest.raises(RuntimeError, match="head_dim 32"):
        fused.dense_decode_attention(q, q[:, :1], q[:, :1], kd, kd, torch.tensor([2]), None, 1.0)


@pytest.mark.slow(minutes=5.5)  # the module's: three variants built and run
@needs_kernels
def test_a_build_killed_mid_compile_does_not_block_later_builds(tmp_path):
    """torch's plain lock file, left by a killed builder, is cleared by the next builder
    (which holds the OS lock); a fresh process then takes the build and runs the kernels.

    torch's loader takes its lock file before every ninja run, an up-to-date one included,
    so a copy of this machine's finished build (the other tests' ``load()``) with the
    leftover lock beside it waits forever unless the lock is cleared, exactly as a half-built
    one does, and costs no fourth compile of the sources."""
    import os
    import shutil
    import subprocess
    import sys

    assert kernels.load() is None  # this machine's build, which the copy starts from
    where = tmp_path / kernels.build_directory().name
    shutil.copytree(kernels.build_directory(), where)
    (where / "lock").write_text("")  # what a builder killed mid-compile leaves
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    code = ("from engine.model import kernels; import torch; assert kernels.load() is None;"
            "print(kernels.build_directory());"
            "lib = kernels.FusedCpuOps().lib;"
            "x = torch.randn(2, 32); print(float(lib.rmsnorm(x, "
            "torch.ones(32), 1e-6).pow(2).mean()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    built_in, mean_square = out.stdout.split()
    assert built_in == str(where) and not (where / "lock").exists()
    assert abs(float(mean_square) - 1.0) < 1e-4  # a normalised row has mean square 1


def _config(**changes) -> ModelConfig:
    base = dict(vocab_size=300, hidden_size=256, intermediate_size=352, num_layers=2,
                num_heads=4, num_kv_heads=2, head_dim=64)
    return ModelConfig(**{**base, **changes})


def test_knob_selects_the_ops_and_on_refuses_where_they_cannot_run():
    cpu = torch.device("cpu")
    off = kernels.select_ops("off", _config(), cpu, torch.float32)
    assert off.describe() == "torch (ENGINE_CPU_KERNELS=off)"
    tiny = _config(hidden_size=64, head_dim=16)
    assert "head_dim 16" in kernels.select_ops("auto", tiny, cpu, torch.float32).describe()
    with pytest.raises(EngineError, match="head_dim 16"):
        kernels.select_ops("on", tiny, cpu, torch.float32)
    with pytest.raises(EngineError, match="on cuda"):
        kernels.select_ops("on", _config(), torch.device("cuda"), torch.float32)
    with pytest.raises(EngineError, match="ENGINE_CPU_KERNELS='fast'"):
        kernels.select_ops("fast", _config(), cpu, torch.float32)
    best = kernels.VARIANT_OF_ISA[cpu_paths().isa]
    expected = f"fused {best}" if _missing is None else f"torch ({_missing})"
    assert kernels.select_ops("auto", _config(), cpu, torch.bfloat16).describe() == expected


def test_on_refuses_a_machine_that_cannot_build_and_auto_says_why(tmp_path):
    """No compiler (CXX names none): ``on`` is an error naming it, ``auto`` runs eager
    torch and reports the reason; nothing is built."""
    import os
    import subprocess
    import sys

    code = ("import torch; from engine.config import EngineError, ModelConfig;"
            "from engine.model import kernels;"
            "cfg = ModelConfig(vocab_size=300, hidden_size=256, intermediate_size=352,"
            " num_layers=2, num_heads=4, num_kv_heads=2, head_dim=64);"
            "print(kernels.select_ops('auto', cfg, torch.device('cpu'), torch.float32)"
            ".describe());\n"
            "try: kernels.select_ops('on', cfg, torch.device('cpu'), torch.float32)\n"
            "except EngineError as e: print(e)")
    env = {**os.environ, "CXX": "no-such-compiler", "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    auto, on = out.stdout.splitlines()
    assert auto == "torch (no C++ compiler ('no-such-compiler' not on PATH))"
    assert on.startswith("ENGINE_CPU_KERNELS=on: the fused CPU kernels cannot run here: no C++")
    assert list(tmp_path.iterdir()) == []


def _write_llama(tmp_path, seed: int = 7, family: str = "llama"):
    """A small Llama (or Qwen2: q/k/v biases) with head_dim 64 (what the kernels take),
    written by transformers."""
    return write_hf_checkpoint(
        tmp_path, family, seed=seed, std=0.06, vocab_size=320, hidden_size=256,
        intermediate_size=352, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, rope_theta=10000.0)


PROMPTS = [[5, 17, 42, 99, 3, 250, 7], [64, 128, 11, 0, 299], list(range(1, 40)), [9]]


@needs_kernels
def test_fused_decode_gives_transformers_greedy_tokens_in_float32(tmp_path, knobs, isa):
    hf = _write_llama(tmp_path)
    eng = LLMEngine(knobs.replace(dtype="float32", cpu_kernels="on", cpu_isa=isa),
                    model_dir=str(tmp_path))
    assert eng.model.ops.name == "fused"
    assert eng.model.ops.variant == kernels.VARIANT_OF_ISA[isa]
    outs = eng.generate(PROMPTS, SamplingParams(40, ignore_eos=True))
    assert eng.runner.dense.appended > 0  # the dense (kernel) path ran
    for prompt, seq in zip(PROMPTS, outs):
        with torch.inference_mode():
            ref = hf.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False,
                              min_new_tokens=40)[0, len(prompt):].tolist()
        assert seq.output_ids == ref


@needs_kernels
def test_blocks_read_by_length_are_gathered_once_per_64_steps_not_16(tmp_path, knobs):
    """The fused kernel reads each sequence's length, so its blocks keep 64 positions of
    headroom (engine.core.dense_kv.HEADROOM_BY_LENGTH); eager attention runs over the whole
    masked block and keeps 16."""
    from engine.core.dense_kv import HEADROOM
    from engine.core.dense_kv import HEADROOM_BY_LENGTH

    _write_llama(tmp_path)
    appended = {}
    for mode in ("on", "off"):
        eng = LLMEngine(knobs.replace(dtype="float32", cpu_kernels=mode), model_dir=str(tmp_path))
        eng.generate(PROMPTS, SamplingParams(41, ignore_eos=True))  # 40 decode steps
        assert eng.runner.dense.headroom == {"on": HEADROOM_BY_LENGTH, "off": HEADROOM}[mode]
        appended[mode] = eng.runner.dense.appended
    assert appended == {"on": 39, "off": 37}  # gathers: 1 vs 3 (every 17 steps)


@needs_kernels
def test_split_k_in_the_kernel_gives_the_unsplit_tokens(tmp_path, knobs, isa):
    """ENGINE_DECODE_TARGET_CTAS large enough to split every step (long prompt, few
    sequences): the kernel's split-K over the dense blocks gives the unsplit tokens in fp32."""
    _write_llama(tmp_path)
    prompts = [list(range(1, 200)), list(range(7, 150))]
    outs = {}
    for ctas in (1, 64):
        eng = LLMEngine(knobs.replace(dtype="float32", cpu_kernels="on", decode_target_ctas=ctas,
                                      cpu_isa=isa), model_dir=str(tmp_path))
        seqs = eng.generate(prompts, SamplingParams(24, ignore_eos=True))
        outs[ctas] = [s.output_ids for s in seqs]
        assert eng.runner.dense.appended > 0  # the dense blocks served the split steps too
        assert (eng.runner.last_num_splits > 1) == (ctas == 64)
    assert outs[1] == outs[64]


@needs_kernels
@pytest.mark.parametrize("family,ctas,dtype,backend", [
    ("llama", 1, "bfloat16", "kernels"), ("qwen2", 1, "bfloat16", "kernels"),
    ("llama", 64, "bfloat16", "kernels"), ("llama", 1, "bfloat16", "onednn"),
    ("qwen2", 1, "bfloat16", "onednn"), ("llama", 64, "float32", "auto"),
    ("qwen2", 1, "float32", "onednn")])
def test_the_one_call_decoder_stack_gives_the_bits_of_the_layer_loop(tmp_path, knobs, isa,
                                                                      family, ctas, dtype,
                                                                      backend):
    """Every kernel, with the kernels' bf16 GEMM or oneDNN's (bf16, fp32): the decode
    step's C++ stack against the Python loop over the same ops, logits bit for bit on every
    step (Qwen2's q/k/v biases; split-K)."""
    if backend == "onednn" and dtype == "bfloat16" and not cpu_paths(isa).onednn_bf16:
        pytest.skip(f"oneDNN runs no bf16 on a CPU with only {isa} "
                    "(refused: see test_engine_cpu_isa)")
    _write_llama(tmp_path, family=family)
    runs, calls = {}, []
    for stacked in (True, False):
        eng = LLMEngine(knobs.replace(dtype=dtype, cpu_kernels="on", linear_backend=backend,
                                      decode_target_ctas=ctas, cpu_isa=isa),
                        model_dir=str(tmp_path))
        ops = eng.model.ops
        if stacked:
            def counted(*args, one_call=ops.decode_stack):
                out = one_call(*args)
                calls.append(out is not None)
                return out

            ops.decode_stack = counted
        else:
            ops.decode_stack = lambda *a: None  # the per-layer loop
        runs[stacked] = step_logits(eng, PROMPTS, 12)
        assert (eng.runner.last_num_splits > 1) == (ctas == 64)
    assert calls == [True] * 11  # every decode step took the one call
    (steps, ids), (ref_steps, ref_ids) = runs[True], runs[False]
    assert ids == ref_ids
    assert all(torch.equal(a, b) for a, b in zip(steps, ref_steps))


@needs_kernels
@pytest.mark.parametrize("backend", ["auto", "kernels", "onednn"])
def test_the_linear_backend_decides_up_to_which_batch_the_kernels_gemm_runs(tmp_path, knobs,
                                                                           isa, backend):
    """ENGINE_LINEAR_BACKEND with the ISA's paths (engine.cpu_isa; AMX's 3 rows are in
    test_engine_cpu_isa): the kernels' GEMM (and the one-call stack) up to that many rows,
    oneDNN's packed GEMM above where oneDNN runs bf16, every batch where it does not."""
    paths = cpu_paths(isa)
    rows = {"auto": paths.kernel_gemm_rows, "onednn": 0,
            "kernels": 64 if paths.onednn_bf16 else ALL_ROWS}[backend]
    _write_llama(tmp_path)
    chosen = knobs.replace(dtype="bfloat16", cpu_kernels="on", linear_backend=backend,
                           cpu_isa=isa)
    if backend == "onednn" and not paths.onednn_bf16:
        with pytest.raises(EngineError, match="oneDNN cannot run torch.bfloat16 on this CPU"):
            LLMEngine(chosen, model_dir=str(tmp_path))
        return
    eng = LLMEngine(chosen, model_dir=str(tmp_path))
    linears = [m for m in eng.model.modules() if isinstance(m, Linear)]
    assert {m.vnni_rows for m in linears} == {rows}
    # oneDNN for the larger batches where it runs bf16; never packed where it cannot
    assert all((m.packed is not None) == paths.onednn_bf16 for m in linears)
    assert all((m.vnni is not None) == (rows > 0) for m in linears)
    qkv = eng.model.layers[0].self_attn.qkv_proj
    for n in (1, 3, 4, 16, 64, 65, 600):
        x = torch.zeros(n, qkv.in_features, dtype=torch.bfloat16)
        assert qkv.small_batch(x) == (n <= rows), n
    report = eng.model.cpu_paths
    assert report["cpu_isa"] == isa and report["kernels"] == f"fused {eng.model.ops.variant}"
    assert report["gemm"].startswith(
        "kernels" if rows else "onednn" if paths.onednn_bf16 else "aten")


def test_cpu_has_amx_is_torchs_answer_or_false():
    from engine.cpu_isa import cpu_has_amx

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert isinstance(cpu_has_amx(), bool)
    if "amx_bf16" not in flags.split():
        assert not cpu_has_amx()


@needs_kernels
def test_fused_bfloat16_decode_is_no_further_from_float32_than_eager_bfloat16(tmp_path, knobs,
                                                                           isa):
    """Both bf16 paths against the fp32 logits on the first decode steps (rows still fed
    the fp32 run's tokens): the kernels' float32 attention must not be the worse one by
    more than bf16's own noise."""
    _write_llama(tmp_path)
    logits = {}
    for dtype, mode in (("float32", "off"), ("bfloat16", "off"), ("bfloat16", "on")):
        eng = LLMEngine(knobs.replace(dtype=dtype, cpu_kernels=mode, cpu_isa=isa),
                        model_dir=str(tmp_path))
        logits[dtype, mode] = step_logits(eng, PROMPTS, 4)
    ref = logits["float32", "off"]
    scale = max(x.abs().max().item() for x in ref[0])
    errors = {mode: error_on_rows_fed_alike(logits["bfloat16", mode], ref)
              for mode in ("off", "on")}
    assert all(0 < e < 0.05 * scale for e in errors.values()), errors
    assert errors["on"] < 1.5 * errors["off"] + 0.005 * scale, errors
