"""One pre-norm Llama decoder block."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention_ops import AttnContext
from engine.config import ModelConfig
from engine.kernels import TorchDecodeOps
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

    def decode_dense(self, x: torch.Tensor, delta: torch.Tensor | None, cos: torch.Tensor,
                     sin: torch.Tensor, kd: torch.Tensor, vd: torch.Tensor, lens: torch.Tensor,
                     bias: torch.Tensor, ops: TorchDecodeOps
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`forward` of a dense decode step, with the residual adds fused into norms.

        x: the residual stream [B, hidden], updated in place; delta: the previous layer's
        output not yet added to it (None for the first layer).  Returns this layer's MLP
        output (for the next norm to add) and the new token's k and v [B, Hkv, D].
        """
        w, eps = self.input_layernorm.weight, self.input_layernorm.eps
        h = ops.rmsnorm(x, w, eps) if delta is None else ops.add_rmsnorm_(x, delta, w, eps)
        a, k, v = self.self_attn.decode_dense(h, cos, sin, kd, vd, lens, bias, ops)
        post = self.post_attention_layernorm
        h = ops.add_rmsnorm_(x, a, post.weight, post.eps)
        return self.mlp(h, ops), k, v
