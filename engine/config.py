"""Model configuration: presets and Hugging Face ``config.json`` (Llama / Qwen2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class EngineError(Exception):
    """A request, a model directory or a setting the engine cannot accept."""


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of a Llama-architecture decoder (RMSNorm, RoPE, GQA, SwiGLU)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096
    attention_bias: bool = False  # Qwen2 has q/k/v biases
    tie_word_embeddings: bool = False
    torch_dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers",
                     "num_heads", "num_kv_heads", "head_dim"):
            if int(getattr(self, name)) <= 0:
                raise EngineError(f"model config: {name} must be positive")
        if self.num_heads % self.num_kv_heads:
            raise EngineError(
                f"model config: num_heads {self.num_heads} is not a multiple of "
                f"num_kv_heads {self.num_kv_heads}"
            )

    @property
    def num_params(self) -> int:
        h, i, d = self.hidden_size, self.intermediate_size, self.head_dim
        attn = h * d * (self.num_heads * 2 + self.num_kv_heads * 2)
        layer = attn + 3 * h * i + 2 * h
        emb = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * layer + emb + h


# Byte-level vocabulary: 256 bytes + BOS/EOS (see engine.tokenizer).
PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(vocab_size=258, hidden_size=64, intermediate_size=176, num_layers=2,
                        num_heads=4, num_kv_heads=2, head_dim=16),
    # ~100M parameters: the bench model.
    "small": ModelConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                         num_layers=10, num_heads=12, num_kv_heads=4, head_dim=64),
}


def preset_config(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise EngineError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None


def load_hf_config(model_dir: str | Path) -> ModelConfig:
    """Read a Hugging Face ``config.json`` of a Llama or Qwen2 checkpoint."""
    path = Path(model_dir) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise EngineError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise EngineError(f"{path} is not valid JSON: {e}") from e
    model_type = raw.get("model_type", "llama")
    if model_type not in ("llama", "qwen2", "mistral"):
        raise EngineError(f"{path}: model_type {model_type!r} is not Llama-like")
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        if raw.get("rope_scaling"):
            raise EngineError(f"{path}: rope_scaling is not supported")
        rope_theta = raw.get("rope_theta")
        if rope_theta is None:
            rope_theta = (raw.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        return ModelConfig(
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rope_theta=float(rope_theta),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
            attention_bias=bool(raw.get("attention_bias", model_type == "qwen2")),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            torch_dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float32"),
        )
    except KeyError as e:
        raise EngineError(f"{path}: missing key {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise EngineError(f"{path}: bad value: {e}") from None
