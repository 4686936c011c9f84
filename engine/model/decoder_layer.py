"""One pre-norm Llama decoder block."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention_ops import AttnContext
from engine.config import ModelConfig
from engine.model.attention import Attention
from engine.model.mlp import MLP
from engine.model.rmsnorm import RMSNorm
from engine.model.rope import RotaryEmbedding


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, rope)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: torch.Tensor, ctx: AttnContext) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), ctx)
        return x + self.mlp(self.post_attention_layernorm(x))

    def decode_dense(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     kd: torch.Tensor, vd: torch.Tensor, bias: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`forward` of a dense decode step: also returns the new token's k, v."""
        h, k, v = self.self_attn.decode_dense(self.input_layernorm(x), cos, sin, kd, vd, bias)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), k, v
