"""Grouped-query self-attention over the paged KV cache (fused q/k/v projection)."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention_ops import AttnContext
from engine.model.attention_ops import batched_prefill_attention
from engine.model.attention_ops import gather_kv
from engine.model.attention_ops import prefill_attention
from engine.model.attention_ops import split_k_attention
from engine.config import ModelConfig
from engine.model.kernels import TorchOps
from engine.model.linear import Linear


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.num_kv_heads = cfg.num_kv_heads
        self.head_dim = cfg.head_dim
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        self.scale = cfg.head_dim ** -0.5
        self.qkv_proj = Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size,
                               bias=cfg.attention_bias)
        self.o_proj = Linear(self.q_size, cfg.hidden_size)
        # Flat slot arrays [num_slots, Hkv, D], bound by the model runner.
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def _project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ops: TorchOps
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, hidden] -> rotated q [N, H, D], rotated k and v [N, Hkv, D]: views of
        one projection whose q and k heads are rotated in place, in one pass."""
        N, D = x.shape[0], self.head_dim
        qkv = self.qkv_proj(x)  # [N, q + 2kv]
        ops.rope_(qkv, cos, sin, self.num_heads + self.num_kv_heads, D)
        q = qkv[:, :self.q_size].view(N, self.num_heads, D)
        k = qkv[:, self.q_size:self.q_size + self.kv_size].view(N, self.num_kv_heads, D)
        v = qkv[:, self.q_size + self.kv_size:].view(N, self.num_kv_heads, D)
        return q, k, v

    def forward(self, x: torch.Tensor, ctx: AttnContext, ops: TorchOps) -> torch.Tensor:
        N = x.shape[0]
        q, k, v = self._project(x, ctx.cos, ctx.sin, ops)
        if self.k_cache is None or self.v_cache is None:
            raise RuntimeError("attention layer has no KV cache bound")
        # index_copy_ is a plain row scatter (index_put_ goes through the generic
        # advanced-indexing machinery, several times slower for these sizes).
        self.k_cache.index_copy_(0, ctx.slot_mapping, k)
        self.v_cache.index_copy_(0, ctx.slot_mapping, v)
        if ctx.is_prefill:
            out = self._prefill(q, k, v, ctx)
        else:
            out = self._decode(q, ctx)
        return self.o_proj(out.reshape(N, self.q_size))

    def decode_dense(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     kd: torch.Tensor, vd: torch.Tensor, lens: torch.Tensor,
                     bias: torch.Tensor | None,
                     ops: TorchOps, splits: int = 1
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decode token per sequence over its dense context block (no cache write).

        x: [B, hidden]; kd, vd: [B, Hkv, cap, D]; lens: [B] positions of the block before
        each token; bias: the same as a mask (engine.model.attention_ops.
        dense_decode_attention; the eager path reads it, the fused kernel reads lens);
        splits: split-K partitions of each sequence's positions (fused kernel only).
        Returns the output [B, hidden] and the new token's k and v [B, Hkv, D] (views of
        the projection), for the caller to store.
        """
        B = x.shape[0]
        q, k, v = self._project(x, cos, sin, ops)
        out = ops.dense_decode_attention(q, k, v, kd, vd, lens, bias, self.scale, splits)
        return self.o_proj(out.reshape(B, self.q_size)), k, v

    def _decode(self, q: torch.Tensor, ctx: AttnContext) -> torch.Tensor:
        if ctx.kv_index is None or ctx.kv_buffers is None or ctx.decode_bias is None:
            raise RuntimeError("decode context without kv_index/kv_buffers/decode_bias")
        kbuf, vbuf = ctx.kv_buffers  # shared by every layer of the step
        k = gather_kv(self.k_cache, ctx.kv_index, kbuf)  # [B, Hkv, S, C, D]
        v = gather_kv(self.v_cache, ctx.kv_index, vbuf)
        return split_k_attention(q, k, v, ctx.decode_bias, self.scale)  # [B, H, D]

    def _prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 ctx: AttnContext) -> torch.Tensor:
        if ctx.cu_seqlens is None or ctx.start_pos is None:
            raise RuntimeError("prefill context without cu_seqlens/start_pos")
        lens = {b - a for a, b in zip(ctx.cu_seqlens, ctx.cu_seqlens[1:])}
        if len(lens) == 1 and not any(ctx.start_pos):
            # Fresh prompts of one length (the common batch of a bench): one batched call.
            B, T = len(ctx.start_pos), lens.pop()
            return batched_prefill_attention(q.view(B, T, self.num_heads, self.head_dim),
                                             k.view(B, T, self.num_kv_heads, self.head_dim),
                                             v.view(B, T, self.num_kv_heads, self.head_dim),
                                             self.scale).reshape(B * T, self.num_heads,
                                                                 self.head_dim)
        outs = []
        for i, start in enumerate(ctx.start_pos):
            a, b = ctx.cu_seqlens[i], ctx.cu_seqlens[i + 1]
            if start == 0:
                # The whole context is this chunk: use it directly, no gather.
                kc, vc = k[a:b], v[a:b]
            else:
                slots = ctx.context_slots[i]  # [start + T]
                kc, vc = self.k_cache[slots], self.v_cache[slots]
            outs.append(prefill_attention(q[a:b], kc, vc, start, self.scale))
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=0)
