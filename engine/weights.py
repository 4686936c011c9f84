"""Building a model: seeded random weights for presets, or a local HF checkpoint.

Hugging Face checkpoints keep q/k/v and gate/up as separate matrices; the engine fuses
them at load time (one GEMM each), so the checkpoint on disk is never rewritten.
"""

from __future__ import annotations

from pathlib import Path

import torch

from engine.model.kernels import FusedCpuOps
from engine.model.kernels import select_ops
from engine.config import EngineError
from engine.cpu_isa import ALL_ROWS
from engine.cpu_isa import CpuPaths
from engine.cpu_isa import cpu_paths
from engine.cpu_isa import probe_cpu
from engine.config import ModelConfig
from engine.config import load_hf_config
from engine.config import preset_config
from engine.model.linear import SMALL_BATCH_ROWS
from engine.model.linear import Linear
from engine.model.llama import LlamaForCausalLM

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(knob: str, cfg: ModelConfig) -> torch.dtype:
    """``ENGINE_DTYPE`` -> torch dtype; ``auto`` follows the checkpoint's torch_dtype."""
    name = cfg.torch_dtype if knob == "auto" else knob
    if name == "float16":
        name = "float32"  # fp16 matmul is slow and lossy on CPU; run such checkpoints in fp32
    if name not in DTYPES:
        raise EngineError(f"unsupported dtype {name!r}")
    return DTYPES[name]


def resolve_device(knob: str) -> torch.device:
    """``ENGINE_DEVICE``: auto = the GPU when torch sees one, else the CPU."""
    if knob == "cuda" and not torch.cuda.is_available():
        raise EngineError("ENGINE_DEVICE=cuda, but torch sees no CUDA device")
    if knob == "cuda" or (knob == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


@torch.no_grad()
def build_model(preset: str | None, model_dir: str | None, dtype_knob: str = "auto",
                seed: int = 0, linear_backend: str = "auto", device: str = "auto",
                cpu_kernels: str = "auto", cpu_isa: str = "auto"
                ) -> tuple[LlamaForCausalLM, ModelConfig]:
    """A ready-to-run model in eval mode, on ``ENGINE_DEVICE``, in ``ENGINE_DTYPE``.

    Weights are made (or loaded) on the CPU with the seed, then moved, so a preset has
    the same weights on every device.
    """
    if (preset is None) == (model_dir is None):
        raise EngineError("give exactly one of --preset or --model")
    cfg = load_hf_config(model_dir) if model_dir else preset_config(preset or "")
    target = resolve_device(device)
    # ENGINE_CPU_ISA is refused (a CPU that cannot run it) before any weight is read.
    paths = cpu_paths(cpu_isa) if target.type == "cpu" else None
    model = LlamaForCausalLM(cfg)
    if model_dir:
        load_hf_weights(model, Path(model_dir))
    else:
        init_random(model, seed)
    dtype = resolve_dtype(dtype_knob, cfg)
    model = model.to(device=target, dtype=dtype).eval()
    # RoPE tables stay float32 whatever the weights are (cast per call).
    model.rope.float()
    # oneDNN prepacking is a CPU GEMM path; on a GPU the plain path is cuBLAS already.
    if paths is not None and use_onednn(linear_backend, dtype, paths):
        for module in model.modules():
            if isinstance(module, Linear):
                module.prepack()
    # The ops around the GEMMs: the fused CPU kernels where ENGINE_CPU_KERNELS allows.
    model.ops = select_ops(cpu_kernels, cfg, target, dtype, paths.isa if paths else None)
    rows = kernel_gemm_rows(linear_backend, paths) if paths else 0
    if isinstance(model.ops, FusedCpuOps) and dtype == torch.bfloat16 and rows:
        # Decode-sized bf16 batches: the kernels' GEMM (oneDNN keeps the large ones).
        for module in model.modules():
            if isinstance(module, Linear):
                module.pack_vnni(model.ops.lib, rows)
    model.cpu_paths = paths_report(model, paths)
    return model, cfg


def kernel_gemm_rows(backend: str, paths: CpuPaths) -> int:
    """Up to how many rows a bf16 projection runs the fused kernels' GEMM (where they are
    in use) under ``ENGINE_LINEAR_BACKEND``: ``auto`` what engine.cpu_isa chose for the
    CPU (64; 3 with AMX, where oneDNN's tiles win; every batch where oneDNN cannot run
    bf16); ``kernels`` 64 even with AMX (every batch without oneDNN bf16); ``onednn`` and
    ``aten`` never.  Decided by the CPU, not timed at load, so one machine always computes
    the same bits."""
    if backend == "kernels":
        return SMALL_BATCH_ROWS if paths.onednn_bf16 else ALL_ROWS
    if backend == "auto":
        return paths.kernel_gemm_rows
    return 0


def use_onednn(backend: str, dtype: torch.dtype, paths: CpuPaths) -> bool:
    """Whether ``ENGINE_LINEAR_BACKEND`` asks for prepacked oneDNN weights here.

    ``auto``, ``onednn`` and ``kernels`` pack float32 and bfloat16 where engine.cpu_isa
    says this CPU's oneDNN runs them; ``aten`` is the plain ``F.linear`` path (the escape
    hatch).  ``onednn`` asked of a dtype oneDNN cannot run here is refused (``auto`` falls
    back to the kernels' GEMM or ``F.linear``).
    """
    if backend == "aten" or not torch.backends.mkldnn.is_available():
        return False
    can = {torch.float32: paths.onednn_fp32, torch.bfloat16: paths.onednn_bf16}.get(dtype, False)
    if backend == "onednn" and not can and dtype in (torch.float32, torch.bfloat16):
        raise EngineError(f"ENGINE_LINEAR_BACKEND=onednn: oneDNN cannot run {dtype} on this "
                          f"CPU (ISA {paths.isa}, {paths.why}); use auto, kernels or aten")
    return can


def paths_report(model: LlamaForCausalLM, paths: CpuPaths | None) -> dict[str, object]:
    """What the engine chose (bench JSON ``cpu_paths``, ``/server_info``, ``/health``): the
    ISA and how it was chosen, the projections' GEMMs, and the kernels (on, or why off)."""
    report: dict[str, object] = {"kernels": model.ops.describe()}
    if paths is None:
        return {**report, "gemm": "torch (not a CPU)"}
    qkv = model.layers[0].self_attn.qkv_proj
    large = "onednn" if qkv.packed is not None else "aten"
    if qkv.vnni is None:
        gemm = large
    else:
        dot = "vdpbf16ps" if paths.vdpbf16 and model.ops.variant == "avx512" else "bf16->fp32 FMA"
        rows = "every batch" if qkv.vnni_rows >= ALL_ROWS else f"<= {qkv.vnni_rows} rows"
        gemm = f"kernels {model.ops.variant} ({dot}) {rows}"
        if qkv.vnni_rows < ALL_ROWS:
            gemm += f", {large} above"
    return {**report, **paths.as_report(), "gemm": gemm,
            "torch_capability": probe_cpu().torch_capability}


def init_random(model: LlamaForCausalLM, seed: int) -> None:
    """Seeded weights, independent of torch's global RNG (same seed -> same model)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        elif name.endswith(".bias"):
            p.zero_()
        else:
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)


def load_hf_weights(model: LlamaForCausalLM, model_dir: Path) -> None:
    """Load ``model.safetensors`` (or its shards) with Llama/Qwen2 names, fusing projections."""
    try:
        from safetensors.torch import load_file
    except ImportError as e:  # pragma: no cover - safetensors is an engine dependency
        raise EngineError("loading a checkpoint needs the safetensors package") from e
    files = sorted(model_dir.glob("model*.safetensors"))
    if not files:
        raise EngineError(f"{model_dir}: no model.safetensors")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(str(f)))

    def take(name: str) -> torch.Tensor:
        try:
            return tensors.pop(name).float()
        except KeyError:
            raise EngineError(f"{model_dir}: checkpoint has no tensor {name!r}") from None

    cfg = model.cfg
    model.embed_tokens.weight.copy_(take("model.embed_tokens.weight"))
    model.norm.weight.copy_(take("model.norm.weight"))
    if not cfg.tie_word_embeddings:
        model.lm_head.weight.copy_(take("lm_head.weight"))
    for i, layer in enumerate(model.layers):
        pre = f"model.layers.{i}."
        attn = layer.self_attn
        qkv = [take(pre + f"self_attn.{n}_proj.weight") for n in "qkv"]
        attn.qkv_proj.weight.copy_(torch.cat(qkv, dim=0))
        if cfg.attention_bias:
            attn.qkv_proj.bias.copy_(
                torch.cat([take(pre + f"self_attn.{n}_proj.bias") for n in "qkv"]))
        attn.o_proj.weight.copy_(take(pre + "self_attn.o_proj.weight"))
        layer.mlp.gate_up_proj.weight.copy_(
            torch.cat([take(pre + "mlp.gate_proj.weight"), take(pre + "mlp.up_proj.weight")]))
        layer.mlp.down_proj.weight.copy_(take(pre + "mlp.down_proj.weight"))
        layer.input_layernorm.weight.copy_(take(pre + "input_layernorm.weight"))
        layer.post_attention_layernorm.weight.copy_(take(pre + "post_attention_layernorm.weight"))
