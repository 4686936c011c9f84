"""The causal LM: embeddings, decoder stack, final norm, LM head."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention_ops import AttnContext
from engine.config import ModelConfig
from engine.model.kernels import TorchOps
from engine.model.decoder_layer import DecoderLayer
from engine.model.linear import Linear
from engine.model.rmsnorm import RMSNorm
from engine.model.rope import RotaryEmbedding


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.rope = RotaryEmbedding(cfg.head_dim, cfg.max_position_embeddings, cfg.rope_theta)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        # The ops around the GEMMs (engine.weights picks the fused CPU kernels where allowed).
        self.ops: TorchOps = TorchOps()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: AttnContext,
                logits_rows: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, positions: [N] -> logits [R, vocab] (float32) for ``logits_rows``."""
        ops = self.ops
        x = self.embed_tokens(input_ids)  # the residual stream [N, hidden]
        # Per-step tables shared by every layer.
        ctx.cos, ctx.sin = self.rope.tables(positions, x.dtype)
        delta = None
        for layer in self.layers:
            delta = layer(x, delta, ctx, ops)
        if logits_rows is not None:
            # only the rows that sample a token: [R, hidden]
            x, delta = x[logits_rows], delta[logits_rows]
        return self.lm_head(ops.add_rmsnorm_(x, delta, self.norm.weight, self.norm.eps)).float()

    def decode_dense(self, input_ids: torch.Tensor, positions: torch.Tensor,
                     k_blocks: list[torch.Tensor], v_blocks: list[torch.Tensor],
                     bias: torch.Tensor | None, splits: int = 1
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """A decode step over dense context blocks, as a pure function of its inputs.

        input_ids, positions: [B], one new token per sequence (``positions`` is also the
        number of block positions before it); k_blocks, v_blocks: each layer's
        [B, Hkv, cap, D] context before the new token; bias: [B, 1, 1, cap]
        (engine.model.attention_ops.dense_decode_attention), or None where the ops read
        ``positions`` instead (the fused kernel); splits: split-K partitions of each
        sequence's attention (only where ``ops.splits_dense_decode``).  Returns the logits
        [B, vocab] (float32) and the new token's K and V of every layer,
        [layers, 2, B, Hkv, D], which the caller writes into its caches: nothing is written
        here (engine.core.runner stores them, engine.core.dense_kv explains why).  The ops
        are :attr:`ops` (the fused CPU kernels or eager torch, engine.model.kernels); each
        layer's residual add is fused into the norm that follows it, the last one into the
        final norm.
        """
        ops = self.ops
        x = self.embed_tokens(input_ids)  # the residual stream [B, hidden]
        cos, sin = self.rope.tables(positions, x.dtype)
        stack = ops.decode_stack(self.layers, x, cos, sin, k_blocks, v_blocks, positions, splits)
        if stack is not None:  # the fused kernels' one call for the whole loop below
            delta, kv = stack
        else:
            delta = None
            new_kv = []  # k, v of layer 0, then of layer 1, ...: stacked once at the end
            for layer, kd, vd in zip(self.layers, k_blocks, v_blocks):
                delta, k, v = layer.decode_dense(x, delta, cos, sin, kd, vd, positions, bias,
                                                 ops, splits)
                new_kv += (k, v)
            kv = torch.stack(new_kv).view(len(self.layers), 2, *new_kv[0].shape)
        h = ops.add_rmsnorm_(x, delta, self.norm.weight, self.norm.eps)
        return self.lm_head(h).float(), kv
