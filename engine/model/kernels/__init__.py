"""Fused CPU kernels around the model's GEMMs, built at run time (``ENGINE_CPU_KERNELS``).

At decode batch sizes a step's eager torch ops are tiny: at c32 on the 30M Llama in
bfloat16 the ~40 small ops of a layer around its four GEMMs (norm casts, RoPE halves,
the attention's two batched matmuls, softmax and masking, SwiGLU, residual adds) cost
more than the GEMMs' arithmetic, mostly in dispatch, allocation and memory round trips.
``cpu_ops.cpp`` replaces them with fused kernels (AVX-512, AVX2 + FMA, or portable C++
loops: see "Which path runs" below), the CPU counterparts of what SGLang's and vLLM's CPU
backends fuse:

- ``dense_decode_attention``: scores, softmax and the weighted sum of one KV head's G
  query heads in one pass over the block, float32 throughout, reading only each
  sequence's real positions (the batched-matmul path reads the padded block), split-K
  inside (``ENGINE_DECODE_TARGET_CTAS``, merged exactly);
- ``rmsnorm`` and ``add_rmsnorm_`` (the residual add fused into the next norm, vLLM's
  ``fused_add_rms_norm``);
- ``rope_`` (q and k heads of the fused qkv projection rotated in place);
- ``silu_mul`` (SwiGLU of the fused gate/up projection);
- ``copy_rows_`` (the decode step's K/V row scatter into the paged cache and the blocks);
- ``argmax_rows`` (greedy sampling over float32 logits: torch's is element by element);
- ``linear_bf16`` on a ``pack_bf16_vnni`` weight: a bf16 GEMM for decode-sized batches
  (vdpbf16ps with AVX512-BF16, else bf16 widened in registers + FMA; engine.model.linear
  and engine.cpu_isa say up to how many rows it runs), and
  ``linear_bf16_silu``, the gate/up projection with SwiGLU in its epilogue;
- ``decode_layers``: where every projection runs that GEMM, or every one oneDNN's
  prepacked GEMM (float32 or bfloat16), a decode step's whole decoder stack in one call
  (the same ops in the same order, the same bits as the per-layer loop; the ~64 Python
  and dispatcher trips of a step cost ~1 ms at c32).

Every kernel has a torch reference, :class:`TorchOps` (the eager code the step ran
before, shared with the prefill path), used where the kernels are not built and compared
with them in tests/engine/test_engine_kernels.py.  bfloat16
results are rounded where the reference rounds, so the two agree bit for bit except
where a float32 sum or exp is ordered differently; attention is float32 inside (the
batched-matmul reference rounds scores and probabilities to bfloat16), so the kernel is
the closer of the two to float32 math.

Measured (``python benchmarks/engine_vs_hf.py --concurrency 16,32 --pairs 5``, unseen 30M
Llama, 2 threads, engine/HF median of interleaved pairs, three runs each): eager ops
bfloat16 c16 1.52x, c32 1.43x; float32 c16 1.70x, c32 1.64x.  With the norm, RoPE, SwiGLU,
attention kernels and the bf16 GEMM: bf16 c16 2.40-2.53x, c32 1.90-2.07x; float32 c16
2.12-2.28x, c32 1.75-2.16x.  Then the GEMM's even split of column blocks over threads,
SwiGLU in the gate/up GEMM's epilogue, the attention's prefetch, the argmax and the one-call
decoder stack (the engine alone, old vs new alternated: 12-15% less time at bf16 c32):
bf16 c16 2.62-2.88x, c32 2.35-2.61x; float32 c16 2.18-2.22x, c32 1.97-1.98x.  An unseen
Qwen2 (q/k/v biases, GQA 10/2, 6 layers, tied 8192 vocab), bf16: c16 2.57x, c32 1.99x.
The attention kernel alone, bf16 [32 seqs, 8/4 heads, 80 positions]: 62 vs 280-350 us a
layer for the eager batched matmuls.

Per variant (``engine_vs_hf.py --concurrency 16 --pairs 3 --num-prompts 16 --output-len
32``, the same unseen 30M Llama, engine/HF median of interleaved pairs, a shared 2-core Zen 4
at load 4-12, so the ranges are wide): auto (avx512) bf16 2.27x and 2.61x, fp32 1.44x and
2.28x; an AVX2-only CPU simulated end to end (ENGINE_CPU_ISA=avx2 with
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2: transformers then runs torch's bf16
fallback GEMM, as on a Zen 3) bf16 2.84x, fp32 1.98x.  The avx2 GEMM alone, 768 -> 2304,
1 thread: 16 rows 556 us (avx512 vdpbf16ps 252, oneDNN bf16 271, torch's AVX2 bf16
fallback 3010), 512 rows 25.7 ms (fallback 666 ms).

Which path runs (decided once per process; engine.cpu_isa holds the pure decision and
its table, ENGINE_CPU_ISA overrides it; every choice is reported as ``cpu_paths`` in the
bench JSON, ``/server_info`` and ``/health``):

================  =============  ===========================  =============================
CPU (auto)        kernels        bf16 projections             float32 projections
================  =============  ===========================  =============================
AMX (SPR+)        avx512         kernels' GEMM <= 3 rows,     oneDNN prepacked
                                 oneDNN (AMX) above
AVX-512 + BF16    avx512         kernels' GEMM (vdpbf16ps)    oneDNN prepacked
                                 <= 64 rows, oneDNN above
AVX-512, no BF16  avx512         kernels' GEMM (widened,      oneDNN prepacked
                                 FMA) <= 64, oneDNN above
AVX2 + FMA        avx2           kernels' GEMM (widened,      oneDNN prepacked
                                 FMA) at every batch (oneDNN
                                 runs no bf16 there: never
                                 packed for it)
anything else     portable       F.linear (the loops' GEMM    oneDNN on x86, else F.linear
                                 with ..._BACKEND=kernels)
no compiler or    torch (eager,  oneDNN bf16 where it runs,   as above
ninja, or a       the reason     else F.linear
failed build      said in
                  ``describe``)
================  =============  ===========================  =============================

``ENGINE_CPU_ISA=avx2`` (or ``portable``) on a bigger CPU behaves as the smaller one would:
that variant of the kernels and none of oneDNN's bf16 packing, so those paths are tested
on any machine (tests/engine/test_engine_kernels.py runs every kernel test per ISA the CPU
can execute).  ``ENGINE_CPU_KERNELS=on`` refuses where the kernels cannot run; ``auto``
falls back to eager torch and says why once per process (the build is tried once).
Within each variant a row's bits never depend on the other rows of its batch; between
variants they differ in the last bits (summation orders, the exp), inside the HF-parity
bounds the tests hold every variant to.

Build: ``torch.utils.cpp_extension.load`` compiles the kernels' sources (:data:`SOURCES`:
``cpu_ops.cpp`` and one file per kernel family, included into the one unit
``all_kernels.cpp``) once per variant and machine: ``avx512``
with ``-march=native`` (AVX512-BF16 where the CPU has it), ``avx2`` with ``-mavx2 -mfma
-mf16c`` and ``portable`` with no ISA flag at all (it builds for any target, aarch64
included), each with ``-DKERNEL_ISA_<variant>`` and its own torch library
namespace (``torch.ops.knob_engine_<variant>``), in its own directory keyed by variant,
sources' hash and torch version (:func:`build_directory`; 12-40 s a variant on 2 shared cores;
concurrent and killed builds: :func:`_build`).  The compiler is the system's ``c++`` (or
``CXX``), ninja the ``ninja`` wheel of the engine extra.  ``off`` never builds.  Every step
runs the norm, RoPE and SwiGLU kernels; the attention kernel is the dense decode step's
(prefill keeps torch's fused SDPA).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.config import EngineError
from engine.config import ModelConfig
from engine.model.attention_ops import dense_decode_attention
from engine.model.linear import Linear
from engine.model.rmsnorm import rms_norm
from engine.model.rope import rotate

# One build compiles every family (cpu_ops.cpp registers them) as one translation unit,
# all_kernels.cpp, which includes them (torch's headers are parsed once a variant, not once
# a family); kernels.h is their shared layer.  All of them are hashed, so that an edit of
# any builds afresh (build_directory).
UNIT = Path(__file__).with_name("all_kernels.cpp")
SOURCES = tuple(Path(__file__).with_name(f) for f in (
    "cpu_ops.cpp", "attention.cpp", "norm_rope.cpp", "elementwise.cpp", "gemm.cpp"))
HEADERS = (Path(__file__).with_name("kernels.h"),)
NAME = "knob_engine_cpu_ops"
CHOICES = ("auto", "on", "off")
# engine.cpu_isa's ISA -> the compiled variant that runs it (AMX's tiles are oneDNN's; the
# kernels there are the AVX-512 ones).
VARIANT_OF_ISA = {"amx": "avx512", "avx512": "avx512", "avx2": "avx2", "portable": "portable"}
_COMMON_FLAGS = ["-O3", "-ffp-contract=off", "-fopenmp"]
# The AVX-512 build keeps -march=native (AVX512-BF16 and the tuning of the machine that
# runs it); the others name their ISA only, so they run on any CPU that has it.
_VARIANT_FLAGS = {
    "avx512": ["-march=native", "-DKERNEL_ISA_AVX512", "-DCPU_CAPABILITY=AVX512",
               "-DCPU_CAPABILITY_AVX512"],
    "avx2": ["-mavx2", "-mfma", "-mf16c", "-DKERNEL_ISA_AVX2", "-DCPU_CAPABILITY=AVX2",
             "-DCPU_CAPABILITY_AVX2"],
    "portable": ["-DKERNEL_ISA_PORTABLE"],
}

_lock = threading.Lock()
_state: dict[str, str | None] = {}  # per variant: None once built, else why not


def namespace(variant: str) -> str:
    """The torch library namespace a variant registers its ops under."""
    return f"knob_engine_{variant}"


def _unavailable_reason() -> str | None:
    """Why no variant can be built here (no compiler, no ninja), or None."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler!r} not on PATH)"
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        try:  # the ninja wheel (the engine extra) puts it next to the interpreter
            import ninja

            # torch's build runs `ninja` from PATH: this process's PATH gains the wheel's.
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
        if not is_ninja_available():
            return "ninja is not installed"
    return None


def default_variant() -> str:
    """The variant of the ISA engine.cpu_isa picks for this CPU with ENGINE_CPU_ISA=auto."""
    from engine.cpu_isa import cpu_paths

    return VARIANT_OF_ISA[cpu_paths().isa]


def load(variant: str | None = None) -> str | None:
    """Build (or reuse) and register one variant (default: this CPU's best): None once it
    is in use, else why not.

    The answer is kept for the process: a machine that cannot build them is not asked
    again by every engine it starts (and says why once, in every report of the ops).
    """
    variant = variant or default_variant()
    if variant not in _VARIANT_FLAGS:
        raise EngineError(f"no kernel variant {variant!r}: expected one of "
                          f"{', '.join(_VARIANT_FLAGS)}")
    with _lock:
        if variant not in _state:
            reason = _unavailable_reason()
            if reason is None:
                try:
                    _build(variant)
                except Exception as e:  # a compiler error, a missing header, a bad cache
                    reason = f"build failed: {str(e).strip().splitlines()[-1][:300]}"
            _state[variant] = reason
        return _state[variant]


def build_directory(variant: str | None = None) -> Path:
    """Where a variant's compiled kernels live: under torch's extension root, keyed by the
    variant, the sources' hash and the torch version (an edited source or another torch
    builds afresh beside the old ones instead of over them)."""
    variant = variant or default_variant()
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions"
    sources = b"".join(p.read_bytes() for p in (UNIT, *SOURCES, *HEADERS))
    digest = hashlib.sha256(sources).hexdigest()[:12]
    return Path(root) / f"{NAME}-{variant}-{digest}-torch{torch.__version__}"


def _build(variant: str) -> None:
    """Compile (or reuse) and register a variant; safe against concurrent and killed builds.

    torch's own build lock is a plain file that a builder killed mid-compile leaves
    behind, after which every later build waits on it forever.  An OS lock (released when
    its holder dies) serialises the builds here instead, and whoever holds it knows any
    torch lock file it finds is such a leftover."""
    from torch.utils.cpp_extension import load as build

    where = build_directory(variant)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "build.flock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (where / "lock").unlink(missing_ok=True)
        build(name=f"{NAME}_{variant}", sources=[str(UNIT)],
              is_python_module=False, build_directory=str(where),
              extra_cflags=[*_COMMON_FLAGS, *_VARIANT_FLAGS[variant],
                            f"-DKERNEL_NS={namespace(variant)}"],
              extra_ldflags=["-fopenmp"], verbose=False)


class TorchOps:
    """The model's ops around its GEMMs as eager torch (any device and dtype): the
    references, and what a GPU, another dtype or an unsupported shape runs; ``reason``
    says why the kernels are not in use (reported by /health and bench results)."""

    name = "torch"

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def describe(self) -> str:
        return f"{self.name} ({self.reason})" if self.reason else self.name
    # Whether dense_decode_attention can split a sequence's positions (split-K) itself;
    # else a split step takes the runner's gather path (engine.model.attention_ops).
    splits_dense_decode = False
    # Whether dense_decode_attention reads the additive mask (else only ``lens``).
    reads_decode_bias = True

    @staticmethod
    def copy_rows_(dst: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> None:
        """dst[index[i]] = src[i]: rows of 2-D tensors (index_copy_ is a plain scatter;
        index_put_ goes through the generic advanced-indexing machinery, slower here)."""
        dst.index_copy_(0, index, src)

    @staticmethod
    def argmax(logits: torch.Tensor) -> torch.Tensor:
        """Greedy sampling's token of each row of logits [B, V] (the first maximum)."""
        return logits.argmax(dim=-1)

    @staticmethod
    def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm(x, w, eps)

    @staticmethod
    def add_rmsnorm_(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                     eps: float) -> torch.Tensor:
        """x += residual (in place: x is the decoder's running sum), then its norm."""
        return rms_norm(x.add_(residual), w, eps)

    @staticmethod
    def rope_(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
              head_dim: int) -> None:
        """RoPE of the first ``heads`` heads of each row of qkv [N, ...], in place.

        cos, sin: [N, 1, D] from :meth:`engine.model.rope.RotaryEmbedding.tables`."""
        x = qkv[:, :heads * head_dim].view(qkv.shape[0], heads, head_dim)
        x.copy_(rotate(x, cos, sin))

    @staticmethod
    def silu_mul(gu: torch.Tensor) -> torch.Tensor:
        """SwiGLU of a fused gate/up projection [N, 2I] -> [N, I]."""
        gate, up = gu.chunk(2, dim=-1)
        return F.silu(gate, inplace=True).mul(up)  # the gate half of a fresh GEMM output

    @classmethod
    def gate_up_silu(cls, gate_up: Linear, x: torch.Tensor) -> torch.Tensor:
        """SwiGLU of x's fused gate/up projection: [N, hidden] -> [N, I]."""
        return cls.silu_mul(gate_up(x))

    @staticmethod
    def decode_stack(layers, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     k_blocks: list[torch.Tensor], v_blocks: list[torch.Tensor],
                     lens: torch.Tensor, splits: int
                     ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The whole decoder stack of a dense decode step in one call, where the ops can:
        (the last layer's output, the new K/V of every layer), as the per-layer loop of
        engine.model.llama.LlamaForCausalLM.decode_dense computes them; None where they
        cannot (that loop runs instead)."""
        return None

    @staticmethod
    def dense_decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               kd: torch.Tensor, vd: torch.Tensor, lens: torch.Tensor,
                               bias: torch.Tensor, scale: float, splits: int = 1
                               ) -> torch.Tensor:
        """engine.model.attention_ops.dense_decode_attention (``lens`` is in ``bias``)."""
        if splits != 1:
            raise ValueError("the eager dense decode path does not split (gather path)")
        return dense_decode_attention(q, k, v, kd, vd, bias, scale)


class FusedCpuOps(TorchOps):
    """The same ops as one built variant of the kernels (CPU tensors of one dtype, fp32 or
    bf16); ``lib`` is its torch library namespace (``torch.ops.knob_engine_<variant>``)."""

    name = "fused"
    splits_dense_decode = True
    reads_decode_bias = False

    def __init__(self, variant: str | None = None, reason: str = "") -> None:
        super().__init__(reason)
        self.variant = variant = variant or default_variant()
        self.lib = getattr(torch.ops, namespace(variant))

    def describe(self) -> str:
        return f"{self.name} {self.variant}" + (f" ({self.reason})" if self.reason else "")

    def copy_rows_(self, dst, index, src):
        self.lib.copy_rows_(dst, index, src)

    def argmax(self, logits):
        return self.lib.argmax_rows(logits)

    def rmsnorm(self, x, w, eps):
        return self.lib.rmsnorm(x, w, eps)

    def add_rmsnorm_(self, x, residual, w, eps):
        return self.lib.add_rmsnorm_(x, residual, w, eps)

    def rope_(self, qkv, cos, sin, heads, head_dim):
        self.lib.rope_(qkv, cos, sin, heads, head_dim)

    def silu_mul(self, gu):
        return self.lib.silu_mul(gu)

    def gate_up_silu(self, gate_up, x):
        if gate_up.small_batch(x):  # SwiGLU in the GEMM's epilogue, the same bits
            return self.lib.linear_bf16_silu(x, gate_up.vnni, gate_up.vnni_bias)
        return self.silu_mul(gate_up(x))

    def dense_decode_attention(self, q, k, v, kd, vd, lens, bias, scale, splits=1):
        return self.lib.dense_decode_attention(q, k, v, kd, vd, lens, scale, splits)

    def decode_stack(self, layers, x, cos, sin, k_blocks, v_blocks, lens, splits):
        """One C++ call for a batch whose every projection runs the kernels' bf16 GEMM, or
        every one oneDNN's prepacked GEMM (float32 or bfloat16): the same ops in the same
        order as the loop (the same bits), without its ~8 Python and dispatcher trips a
        layer.  Projections on plain ``F.linear`` (ENGINE_LINEAR_BACKEND=aten) keep the loop."""
        qkv = layers[0].self_attn.qkv_proj
        if qkv.small_batch(x):
            onednn = False
        elif qkv.packed is not None and x.dim() == 2 and x.dtype == qkv.packed.dtype:
            onednn = True
        else:
            return None
        weights = _stack_weights(layers, onednn)
        if weights is None:
            return None
        attn = layers[0].self_attn
        return self.lib.decode_layers(
            x, *weights, k_blocks, v_blocks, lens, cos, sin, attn.num_heads, attn.num_kv_heads,
            layers[0].input_layernorm.eps, attn.scale, splits, onednn)


def _stack_weights(layers, onednn: bool) -> tuple | None:
    """The weight lists of decode_layers for a decoder stack (an nn.ModuleList), oneDNN's
    packed weights or the kernels' VNNI ones, kept on it from its first step (a step's
    ~140 module attribute reads cost 0.1 ms) and remade if its weights were repacked; None
    where a projection would not take the same GEMM as the first layer's qkv (the loop
    then runs, each Linear choosing its own)."""
    qkv0 = layers[0].self_attn.qkv_proj
    key = qkv0.packed if onednn else qkv0.vnni
    cache = getattr(layers, "_decode_stack_weights", None)
    if cache is None:
        cache = layers._decode_stack_weights = {}
    cached = cache.get(onednn)
    if cached is not None and cached[0] is key:
        return cached[1]
    attn = [layer.self_attn for layer in layers]
    mlp = [layer.mlp for layer in layers]
    qkvs = [a.qkv_proj for a in attn]
    unbiased = [m for a, f in zip(attn, mlp) for m in (a.o_proj, f.gate_up_proj, f.down_proj)]
    linears = qkvs + unbiased
    weights = None
    # (only qkv may have a bias, Qwen2's: the call passes no other)
    same_path = (all(m.vnni_rows == qkv0.vnni_rows for m in linears)
                 and all(m.bias is None for m in unbiased))
    if onednn:
        same_path = same_path and all(m.packed is not None
                                      and m.packed.dtype == qkv0.packed.dtype for m in linears)
        take, bias = (lambda m: m.packed), (lambda m: m.bias)
    else:
        same_path = same_path and all(m.vnni is not None for m in linears)
        take, bias = (lambda m: m.vnni), (lambda m: m.vnni_bias)
    if same_path:
        weights = ([layer.input_layernorm.weight for layer in layers],
                   [take(m) for m in qkvs], [bias(m) for m in qkvs],
                   [take(a.o_proj) for a in attn],
                   [layer.post_attention_layernorm.weight for layer in layers],
                   [take(f.gate_up_proj) for f in mlp], [take(f.down_proj) for f in mlp])
    cache[onednn] = (key, weights)
    return weights


def unsupported(cfg: ModelConfig, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the kernels cannot run this model here, or None.  They vectorise 16 floats at a
    time: the hidden and intermediate sizes must be multiples of 16 and the head size one
    of 64, 128, 256 (the Llama/Qwen family's); the toy presets' 16 is not."""
    if device.type != "cpu":
        return f"the model is on {device.type}; the kernels are CPU kernels"
    if dtype not in (torch.float32, torch.bfloat16):
        return f"dtype {dtype}; the kernels are float32/bfloat16"
    if cfg.hidden_size % 16 or cfg.intermediate_size % 16 or cfg.head_dim not in (64, 128, 256):
        return (f"hidden {cfg.hidden_size}, intermediate {cfg.intermediate_size}, head_dim "
                f"{cfg.head_dim}; the kernels need multiples of 16 and head_dim 64/128/256")
    return None


def select_ops(mode: str, cfg: ModelConfig, device: torch.device, dtype: torch.dtype,
               isa: str | None = None) -> TorchOps:
    """The ops the model runs around its GEMMs under ``ENGINE_CPU_KERNELS=mode``, the
    kernels' variant the one of ``isa`` (engine.cpu_isa's choice for this CPU).

    ``on`` where the kernels cannot run (see :func:`unsupported`, and a missing compiler
    or ninja, a failed build) is an EngineError naming why; ``auto`` runs eager torch
    there, the reason kept in :attr:`TorchOps.reason`.
    """
    if mode not in CHOICES:
        raise EngineError(f"ENGINE_CPU_KERNELS={mode!r}: expected one of {', '.join(CHOICES)}")
    if mode == "off":
        return TorchOps("ENGINE_CPU_KERNELS=off")
    reason = unsupported(cfg, device, dtype)
    if reason is not None:
        variant = ""
    else:
        variant = VARIANT_OF_ISA[isa] if isa else default_variant()
        reason = load(variant)
    if reason is None:
        return FusedCpuOps(variant)
    if mode == "on":
        raise EngineError(f"ENGINE_CPU_KERNELS=on: the fused CPU kernels cannot run here: "
                          f"{reason}")
    return TorchOps(reason)
