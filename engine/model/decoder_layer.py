"""One pre-norm Llama decoder block."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention_ops import AttnContext
from engine.config import ModelConfig
from engine.model.kernels import TorchOps
from engine.model.attention import Attention
from engine.model.mlp import MLP
from engine.model.rmsnorm import RMSNorm


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: torch.Tensor, delta: torch.Tensor | None, ctx: AttnContext,
                ops: TorchOps) -> torch.Tensor:
        """One block, with each residual add fused into the norm that follows it.

        x: the residual stream [N, hidden], updated in place; delta: the previous layer's
        output not yet added to it (None for the first layer).  Returns this layer's MLP
        output, for the next norm (or the final one) to add.
        """
        h = self._input_norm(x, delta, ops)
        post = self.post_attention_layernorm
        h = ops.add_rmsnorm_(x, self.self_attn(h, ctx, ops), post.weight, post.eps)
        return self.mlp(h, ops)

    def decode_dense(self, x: torch.Tensor, delta: torch.Tensor | None, cos: torch.Tensor,
                     sin: torch.Tensor, kd: torch.Tensor, vd: torch.Tensor, lens: torch.Tensor,
                     bias: torch.Tensor | None, ops: TorchOps, splits: int = 1
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`forward` of a dense decode step; also returns the new token's k and v
        [B, Hkv, D] (engine.model.llama.LlamaForCausalLM.decode_dense)."""
        h = self._input_norm(x, delta, ops)
        a, k, v = self.self_attn.decode_dense(h, cos, sin, kd, vd, lens, bias, ops, splits)
        post = self.post_attention_layernorm
        h = ops.add_rmsnorm_(x, a, post.weight, post.eps)
        return self.mlp(h, ops), k, v

    def _input_norm(self, x: torch.Tensor, delta: torch.Tensor | None,
                    ops: TorchOps) -> torch.Tensor:
        w, eps = self.input_layernorm.weight, self.input_layernorm.eps
        return ops.rmsnorm(x, w, eps) if delta is None else ops.add_rmsnorm_(x, delta, w, eps)
