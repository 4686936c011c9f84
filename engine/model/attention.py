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
from engine.model.linear import Linear
from engine.model.rope import RotaryEmbedding


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding) -> None:
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
        self.rope = rope
        # Flat slot arrays [num_slots, Hkv, D], bound by the model runner.
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None
        # This layer's dense decode blocks [B, Hkv, cap, D] (engine.core.dense_kv).
        self.k_dense: torch.Tensor | None = None
        self.v_dense: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, ctx: AttnContext) -> torch.Tensor:
        N = x.shape[0]
        qkv = self.qkv_proj(x)  # [N, q + 2kv]
        qk, v = qkv.split((self.q_size + self.kv_size, self.kv_size), dim=-1)
        # q and k heads rotated in one pass: [N, H + Hkv, D]
        qk = self.rope(qk.reshape(N, self.num_heads + self.num_kv_heads, self.head_dim),
                       ctx.cos, ctx.sin)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=1)
        v = v.reshape(N, self.num_kv_heads, self.head_dim)
        if self.k_cache is None or self.v_cache is None:
            raise RuntimeError("attention layer has no KV cache bound")
        # index_copy_ is a plain row scatter (index_put_ goes through the generic
        # advanced-indexing machinery, several times slower for these sizes).
        self.k_cache.index_copy_(0, ctx.slot_mapping, k)
        self.v_cache.index_copy_(0, ctx.slot_mapping, v)
        if ctx.is_prefill:
            out = self._prefill(q, k, v, ctx)
        elif ctx.dense_len:
            out = self._decode_dense(q, k, v, ctx)
        else:
            out = self._decode(q, ctx)
        return self.o_proj(out.reshape(N, self.q_size))

    def _decode(self, q: torch.Tensor, ctx: AttnContext) -> torch.Tensor:
        if ctx.kv_index is None or ctx.kv_buffers is None or ctx.decode_bias is None:
            raise RuntimeError("decode context without kv_index/kv_buffers/decode_bias")
        kbuf, vbuf = ctx.kv_buffers  # shared by every layer of the step
        k = gather_kv(self.k_cache, ctx.kv_index, kbuf)  # [B, Hkv, S, C, D]
        v = gather_kv(self.v_cache, ctx.kv_index, vbuf)
        return split_k_attention(q, k, v, ctx.decode_bias, self.scale)  # [B, H, D]

    def _decode_dense(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      ctx: AttnContext) -> torch.Tensor:
        kd, vd = self.k_dense, self.v_dense  # [B, Hkv, cap, D]
        if kd is None or vd is None or ctx.decode_bias is None:
            raise RuntimeError("dense decode without bound blocks or decode_bias")
        if ctx.kv_index is not None:  # the batch's first step: the whole context
            gather_kv(self.k_cache, ctx.kv_index, kd)
            gather_kv(self.v_cache, ctx.kv_index, vd)
        elif ctx.dense_rows is not None:  # later steps: the new token only
            D = self.head_dim
            kd.view(-1, D).index_copy_(0, ctx.dense_rows, k.reshape(-1, D))
            vd.view(-1, D).index_copy_(0, ctx.dense_rows, v.reshape(-1, D))
        # The first dense_len positions (bf16: the whole, contiguous block); past each
        # sequence's length masked by decode_bias.
        L = ctx.dense_len
        return split_k_attention(q, kd[:, :, None, :L], vd[:, :, None, :L], ctx.decode_bias,
                                 self.scale)  # [B, H, D]

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
