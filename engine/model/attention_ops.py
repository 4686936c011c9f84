"""Attention over the paged KV cache: chunked prefill and split-K decode.

The KV cache of one layer is a flat slot array ``[num_pages * page_size, Hkv, D]``; a
sequence's token ``j`` lives in slot ``block_table[j // P] * P + j % P``.

Decode attention splits each sequence's KV into ``S`` partitions (split-K), computes a
normalised partial output and its log-sum-exp per partition, and merges them with the
exact combine ``o = sum_s w_s o_s / sum_s w_s``, ``w_s = exp(lse_s - max lse)``.  ``S``
comes from :func:`num_kv_splits`, the analogue of FlashInfer's split heuristic: when
``batch x kv_heads`` already reaches the target parallelism (``ENGINE_DECODE_TARGET_CTAS``)
there is no split, else the KV is cut into as many partitions as needed to reach it,
never shorter than ``MIN_SPLIT_TOKENS`` tokens each.  On CPU the target defaults to the
thread count: torch's batched GEMMs already spread ``batch x kv_heads`` over the cores,
so a split only pays where that product is below the core count (e.g. one sequence of an
MQA model); elsewhere each partition is more small ops and a combine (measured:
``benchmarks/ctas_sweep.py``).  An unsplit step does not gather at all after the first
step of its batch: each layer keeps the batch's context in dense blocks and appends the
new token (engine.core.dense_kv), and attention reads those blocks plus the step's own
token (:func:`dense_decode_attention`).  Where the fused CPU kernels are in use
(engine.model.kernels) that attention is their kernel, which also does split-K over the
blocks; the functions here are then the references it is tested against.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# A partition shorter than this costs more in combine overhead than it gains.
MIN_SPLIT_TOKENS = 16


@dataclass
class AttnContext:
    """What the attention layers need to know about the current step's batch.

    ``is_prefill``: one or more sequences' prompt chunks, flattened along tokens;
    ``cu_seqlens[i]:cu_seqlens[i+1]`` are sequence i's new tokens, which sit at positions
    ``start_pos[i] ..`` of a context whose slots are ``context_slots[i]``.
    Decode: one new token per sequence; each layer gathers its context through
    ``kv_index`` (see :func:`decode_kv_index`) into ``kv_buffers``, and ``decode_bias``
    masks the padding of that layout.
    """

    is_prefill: bool
    slot_mapping: torch.Tensor  # [N] where each new token's K/V is written
    context_lens: torch.Tensor  # [B] context length including the new tokens
    context_slots: list[torch.Tensor] | None = None  # prefill: each sequence's slots
    cu_seqlens: list[int] | None = None
    start_pos: list[int] | None = None
    num_splits: int = 1
    # Filled once per step and shared by every layer:
    decode_bias: torch.Tensor | None = None  # split-K padding as 0/-inf, see split_k_bias
    kv_index: torch.Tensor | None = None  # [B * Hkv * S * C] rows of the flat KV cache
    # Gather buffers [B, Hkv, S, C, D] every layer writes into (the runner keeps the
    # memory across steps: no per-layer or per-step allocation of the gathered KV).
    kv_buffers: tuple[torch.Tensor, torch.Tensor] | None = None
    cos: torch.Tensor | None = None  # RoPE tables [N, 1, D]
    sin: torch.Tensor | None = None

    def to(self, device: torch.device) -> AttnContext:
        """The same context with its tensors on ``device`` (a GPU run builds it on the host)."""
        def move(t):
            if isinstance(t, list):
                return [x.to(device, non_blocking=True) for x in t]
            return None if t is None else t.to(device, non_blocking=True)

        return dataclasses.replace(
            self, slot_mapping=move(self.slot_mapping), context_lens=move(self.context_lens),
            context_slots=move(self.context_slots), decode_bias=move(self.decode_bias),
            kv_index=move(self.kv_index), cos=move(self.cos), sin=move(self.sin))


def num_kv_splits(batch: int, kv_heads: int, max_len: int, target_ctas: int) -> int:
    """Split-K partition count for a decode step (1 = no split)."""
    work = batch * kv_heads
    if work >= target_ctas or max_len <= MIN_SPLIT_TOKENS:
        return 1
    wanted = math.ceil(target_ctas / work)
    return max(1, min(wanted, math.ceil(max_len / MIN_SPLIT_TOKENS)))


def split_layout(max_len: int, num_splits: int) -> tuple[int, int]:
    """(S, C): the effective partition count and the positions per partition (S*C >= L)."""
    S = max(1, min(num_splits, max_len))
    return S, math.ceil(max_len / S)


def paged_slots(block_tables: torch.Tensor, max_len: int, page_size: int) -> torch.Tensor:
    """Slot index of each context token: ``[B, max_blocks]`` pages -> ``[B, max_len]`` slots."""
    j = torch.arange(max_len, device=block_tables.device)
    pages = block_tables[:, j // page_size]  # [B, max_len]
    return pages * page_size + j % page_size


def decode_kv_index(block_tables: torch.Tensor, padded_len: int, page_size: int,
                    kv_heads: int) -> torch.Tensor:
    """Rows of a flat ``[slots * Hkv, D]`` KV cache, in ``[B, Hkv, padded_len]`` order.

    One ``index_select`` with this index turns the paged ``[slots, Hkv, D]`` cache into
    the head-major ``[B, Hkv, L, D]`` layout the attention GEMMs want (contiguous, so the
    batched matmuls take their fast path), with the split-K padding already in place:
    positions past a sequence's pages read page 0 and are masked.  Built once per step.
    block_tables: [B, >= ceil(padded_len / page_size)] -> [B * Hkv * padded_len].
    """
    slots = paged_slots(block_tables, padded_len, page_size)  # [B, Lp]
    heads = torch.arange(kv_heads, device=slots.device).view(1, kv_heads, 1)
    return (slots.unsqueeze(1) * kv_heads + heads).reshape(-1)


def gather_kv(cache: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """cache: [slots, Hkv, D] gathered by :func:`decode_kv_index` into ``out`` (any shape
    holding ``len(index) * D`` elements, e.g. [B, Hkv, S, C, D]); returns ``out``."""
    D = cache.shape[-1]
    torch.index_select(cache.view(-1, D), 0, index, out=out.view(-1, D))
    return out


def split_k_mask(lens: torch.Tensor, max_len: int, num_splits: int) -> torch.Tensor:
    """Padding mask of :func:`split_k_decode`: True where a position is past ``lens``.

    lens: [B] -> [B, 1, S, 1, C] with S = the effective split count, C = its chunk length.
    """
    S, C = split_layout(max_len, num_splits)
    B = lens.shape[0]
    pos = torch.arange(S * C, device=lens.device).view(1, S, C)
    return (pos >= lens.view(B, 1, 1)).view(B, 1, S, 1, C)


def split_k_bias(lens: torch.Tensor, max_len: int, num_splits: int) -> torch.Tensor:
    """:func:`split_k_mask` as an additive float32 bias: 0 at real positions, -inf at padding.

    Adding it to the scores replaces a separate scale, cast and masked_fill per layer.
    """
    return mask_to_bias(split_k_mask(lens, max_len, num_splits))


def mask_to_bias(mask: torch.Tensor) -> torch.Tensor:
    """Boolean padding mask (True = padding) -> float32 additive bias (0 / -inf)."""
    return torch.zeros(mask.shape, device=mask.device).masked_fill_(mask, float("-inf"))


def split_k_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor, num_splits: int,
    scale: float, mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode attention with ``num_splits`` KV partitions and the exact LSE combine.

    q: [B, H, D]; k, v: [B, L, Hkv, D] (positions >= lens[b] are padding); lens: [B];
    mask: :func:`split_k_mask` of the same arguments (computed here when not given).
    Returns [B, H, D].  The engine itself gathers the paged cache straight into the
    split layout and calls :func:`split_k_attention`; this is the same math on a
    token-major KV, for tests and callers holding one.
    """
    B, L, Hkv, D = k.shape
    S, C = split_layout(L, num_splits)
    if mask is None:
        mask = split_k_mask(lens, L, S)
    bias = mask_to_bias(mask)
    pad = S * C - L
    if pad:
        k = F.pad(k, (0, 0, 0, 0, 0, pad))
        v = F.pad(v, (0, 0, 0, 0, 0, pad))
    # [B, S*C, Hkv, D] -> [B, Hkv, S, C, D]
    k = k.transpose(1, 2).reshape(B, Hkv, S, C, D)
    v = v.transpose(1, 2).reshape(B, Hkv, S, C, D)
    return split_k_attention(q, k, v, bias, scale)


def split_k_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor,
                      scale: float) -> torch.Tensor:
    """Split-K decode attention on the head-major split layout.

    q: [B, H, D]; k, v: [B, Hkv, S, C, D]; bias: [B, 1, S, 1, C] float32, 0 at real
    positions and -inf at padding (:func:`split_k_bias`; every sequence has at least one
    real position). Returns [B, H, D].
    The G = H / Hkv query heads of a KV head are the rows of one small GEMM per
    (sequence, KV head, partition), so K/V are read once per group, never repeated.
    """
    B, H, D = q.shape
    _, Hkv, S, C, _ = k.shape
    G = H // Hkv
    if S == 1 and q.dtype == torch.float32:
        # Unsplit fp32: torch's fused CPU attention kernel beats the explicit path below;
        # each KV head's G query heads form the query rows (no GQA expansion).
        out = F.scaled_dot_product_attention(
            q.view(B, Hkv, G, D), k.view(B, Hkv, C, D), v.view(B, Hkv, C, D),
            attn_mask=bias.view(B, 1, 1, C), scale=scale)
        return out.view(B, H, D)  # [B, Hkv, G, D] is [B, H, D] in memory
    qg = q.view(B, Hkv, 1, G, D)
    # One op scales, masks and widens to float32 (bias is float32): [B, Hkv, S, G, C]
    scores = torch.add(bias, torch.matmul(qg, k.transpose(-1, -2)), alpha=scale)
    if S == 1:
        # No partition is all padding here, so a plain softmax is safe (and one kernel).
        p = torch.softmax(scores, dim=-1).to(v.dtype)
        return torch.matmul(p, v).view(B, H, D)  # [B, Hkv, 1, G, D]
    m = scores.amax(dim=-1, keepdim=True)  # [B, Hkv, S, G, 1]
    # An all-padding partition has m = -inf; any finite stand-in keeps exp() at 0, not NaN.
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(scores - m)
    z = p.sum(dim=-1, keepdim=True)
    o_s = torch.matmul(p.to(v.dtype), v).float() / z.clamp_min(1e-30)  # [B, Hkv, S, G, D]
    lse = (m + torch.log(z)).squeeze(-1)  # [B, Hkv, S, G]; -inf for empty partitions
    return combine_splits(o_s, lse).reshape(B, H, D).to(q.dtype)


def dense_decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kd: torch.Tensor,
                           vd: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """Decode attention over a dense context block plus the step's own token.

    q: [B, H, D]; k, v: [B, Hkv, D], the new token's own key and value (not yet in the
    block); kd, vd: [B, Hkv, cap, D], the context before it; bias: [B, 1, 1, cap] float32,
    0 at the ``len - 1`` positions before the new token and -inf past them
    (:func:`split_k_bias` of ``lens - 1``).  Returns [B, H, D].  No tensor is written: the
    caller stores k and v afterwards (engine.core.dense_kv), so a decode step built on it
    is a pure function of its inputs.  The own token's score is one more column of the
    softmax, so the normalisation is the same single pass as the unsplit path's.
    """
    B, H, D = q.shape
    Hkv, cap = kd.shape[1], kd.shape[2]
    qg = q.view(B, Hkv, H // Hkv, D)
    # [B, Hkv, G, cap] scaled and masked in float32, then the own token's column.
    context = torch.add(bias, torch.matmul(qg, kd.transpose(-1, -2)), alpha=scale)
    # One dot product per query head: a product and a sum in float32 (exact products,
    # like the GEMM's accumulation) cost a third of a batched matmul of [G, D] x [D, 1].
    own = (qg.float() * k.view(B, Hkv, 1, D).float()).sum(-1, keepdim=True).mul_(scale)
    p = torch.softmax(torch.cat((context, own), dim=-1), dim=-1).to(vd.dtype)
    out = torch.matmul(p[..., :cap], vd)  # [B, Hkv, G, D]
    return out.addcmul_(p[..., cap:], v.view(B, Hkv, 1, D)).view(B, H, D)


def combine_splits(o_s: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Exact merge of partial softmax outputs.

    o_s: [..., S, G, D] normalised partial outputs; lse: [..., S, G]. Returns [..., G, D].
    """
    big = lse.amax(dim=-2, keepdim=True)  # max over S: [..., 1, G]
    w = torch.exp(lse - big)  # [..., S, G]; 0 for empty partitions
    return (w.unsqueeze(-1) * o_s).sum(dim=-3) / w.sum(dim=-2).unsqueeze(-1)


def prefill_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int, scale: float
) -> torch.Tensor:
    """Causal attention of a prompt chunk over its whole context.

    q: [T, H, D] new tokens at positions start..start+T-1; k, v: [start+T, Hkv, D].
    Returns [T, H, D].
    """
    T = q.shape[0]
    ctx = k.shape[0]
    qh = q.transpose(0, 1)  # [H, T, D]
    kh = k.transpose(0, 1)  # [Hkv, ctx, D]; GQA heads shared inside the kernel
    vh = v.transpose(0, 1)
    if start == 0:
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=scale,
                                             enable_gqa=True)
    else:
        qpos = torch.arange(start, start + T, device=q.device).view(T, 1)
        kpos = torch.arange(ctx, device=q.device).view(1, ctx)
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=kpos <= qpos, scale=scale,
                                             enable_gqa=True)
    return out.transpose(0, 1)  # [T, H, D]


def batched_prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              scale: float) -> torch.Tensor:
    """Causal attention of B fresh prompts of equal length T.

    q: [B, T, H, D]; k, v: [B, T, Hkv, D]. Returns [B, T, H, D].
    """
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=True, scale=scale,
                                         enable_gqa=True)  # [B, H, T, D]
    return out.transpose(1, 2)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Plain (unsplit) masked decode attention, the oracle of the split-K tests.

    Shapes as in :func:`split_k_decode`; computed in float64.
    """
    B, H, _ = q.shape
    Hkv = k.shape[2]
    G = H // Hkv
    kk = k.double().repeat_interleave(G, dim=2).permute(0, 2, 3, 1)  # [B, H, D, L]
    vv = v.double().repeat_interleave(G, dim=2).permute(0, 2, 1, 3)  # [B, H, L, D]
    s = torch.matmul(q.double().unsqueeze(2), kk).squeeze(2) * scale  # [B, H, L]
    mask = torch.arange(k.shape[1], device=k.device).view(1, 1, -1) >= lens.view(B, 1, 1)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    return torch.matmul(p.unsqueeze(2), vv).squeeze(2)
