"""Split-K decode attention and the exact log-sum-exp combine."""

from __future__ import annotations

import pytest
import torch

from engine.model.attention_ops import MIN_SPLIT_TOKENS
from engine.model.attention_ops import num_kv_splits
from engine.model.attention_ops import prefill_attention
from engine.model.attention_ops import reference_attention
from engine.model.attention_ops import split_k_decode


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (6, 1)])
def test_split_k_equals_unsplit_for_every_split_count_and_ragged_lengths(heads, kv_heads):
    torch.manual_seed(heads * 10 + kv_heads)
    B, L, D = 4, 53, 16
    q = torch.randn(B, heads, D) * 2
    k = torch.randn(B, L, kv_heads, D) * 2
    v = torch.randn(B, L, kv_heads, D)
    lens = torch.tensor([53, 1, 17, 32])
    ref = reference_attention(q, k, v, lens, D ** -0.5)
    for splits in range(1, L + 2):
        out = split_k_decode(q, k, v, lens, splits, D ** -0.5)
        assert (out.double() - ref).abs().max().item() < 1e-5, splits


@pytest.mark.parametrize("splits", [1, 3, 64])
def test_paged_gather_into_split_layout_equals_token_major_attention(splits):
    """The engine's decode path (one index_select of the paged cache straight into the
    head-major split layout, shared buffers) computes what split_k_decode computes on a
    plainly gathered KV, for scattered pages and ragged lengths."""
    from engine.model.attention_ops import decode_kv_index
    from engine.model.attention_ops import gather_kv
    from engine.model.attention_ops import split_k_attention
    from engine.model.attention_ops import split_k_bias
    from engine.model.attention_ops import split_layout

    torch.manual_seed(splits)
    P, Hkv, H, D, num_pages = 4, 2, 6, 8, 40
    lens = torch.tensor([13, 1, 30, 7])
    B, L = len(lens), int(lens.max())
    perm = torch.randperm(num_pages).tolist()  # pages scattered over the cache
    tables = [perm[i * 8:i * 8 + -(-int(n) // P)] for i, n in enumerate(lens)]
    k_cache = torch.randn(num_pages * P, Hkv, D)
    v_cache = torch.randn(num_pages * P, Hkv, D)
    S, C = split_layout(L, splits)
    width = -(-(S * C) // P)
    table_t = torch.zeros(B, width, dtype=torch.long)
    for i, t in enumerate(tables):
        table_t[i, :len(t)] = torch.tensor(t)
    index = decode_kv_index(table_t, S * C, P, Hkv)
    kbuf = torch.full((B, Hkv, S, C, D), float("nan"))  # every used element is written
    vbuf = torch.full((B, Hkv, S, C, D), float("nan"))
    k = gather_kv(k_cache, index, kbuf)
    v = gather_kv(v_cache, index, vbuf)
    q = torch.randn(B, H, D)
    out = split_k_attention(q, k, v, split_k_bias(lens, L, splits), D ** -0.5)

    # Oracle: gather each sequence's tokens one by one, then the float64 reference.
    kt = torch.zeros(B, L, Hkv, D)
    vt = torch.zeros(B, L, Hkv, D)
    for i, t in enumerate(tables):
        for j in range(int(lens[i])):
            kt[i, j] = k_cache[t[j // P] * P + j % P]
            vt[i, j] = v_cache[t[j // P] * P + j % P]
    ref = reference_attention(q, kt, vt, lens, D ** -0.5)
    assert (out.double() - ref).abs().max().item() < 1e-5


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (6, 1)])
def test_dense_block_plus_own_token_equals_unsplit_attention(heads, kv_heads):
    """dense_decode_attention: the context block before each new token (stale values
    past it, finite as every value a cache holds: masked) plus the token's own K/V,
    against the float64 oracle."""
    from engine.model.attention_ops import dense_decode_attention
    from engine.model.attention_ops import split_k_bias

    torch.manual_seed(heads + kv_heads)
    B, cap, D = 4, 40, 16
    lens = torch.tensor([40, 1, 17, 32])  # context before the new token
    q = torch.randn(B, heads, D) * 2
    ctx_k = torch.randn(B, kv_heads, cap, D) * 2
    ctx_v = torch.randn(B, kv_heads, cap, D)
    own_k, own_v = torch.randn(B, kv_heads, D) * 2, torch.randn(B, kv_heads, D)
    kd, vd = ctx_k.clone(), ctx_v.clone()
    for b, n in enumerate(lens.tolist()):  # what a stale block holds past the context
        kd[b, :, n:] = 1e30
        vd[b, :, n:] = -1e30
    # The oracle's token-major KV: the context, then the own token at position len.
    k = torch.zeros(B, cap + 1, kv_heads, D)
    v = torch.zeros(B, cap + 1, kv_heads, D)
    for b, n in enumerate(lens.tolist()):
        k[b, :n], v[b, :n] = ctx_k[b, :, :n].transpose(0, 1), ctx_v[b, :, :n].transpose(0, 1)
        k[b, n], v[b, n] = own_k[b], own_v[b]
    ref = reference_attention(q, k, v, lens + 1, D ** -0.5)
    bias = split_k_bias(lens, cap, 1).view(B, 1, 1, cap)
    out = dense_decode_attention(q, own_k, own_v, kd, vd, bias, D ** -0.5)
    assert out.shape == (B, heads, D)
    assert (out.double() - ref).abs().max().item() < 1e-5


def test_split_count_follows_target_parallelism():
    # batch x kv heads already fills the target: no split.
    assert num_kv_splits(batch=32, kv_heads=4, max_len=4096, target_ctas=64) == 1
    # Fewer work items than the target: split to reach it.
    assert num_kv_splits(batch=1, kv_heads=4, max_len=4096, target_ctas=64) == 16
    assert num_kv_splits(batch=2, kv_heads=4, max_len=4096, target_ctas=64) == 8
    # ... never into partitions shorter than MIN_SPLIT_TOKENS.
    assert num_kv_splits(1, 4, 3 * MIN_SPLIT_TOKENS, 64) == 3
    assert num_kv_splits(1, 4, MIN_SPLIT_TOKENS, 64) == 1


def test_chunked_prefill_attention_equals_whole_prompt():
    torch.manual_seed(0)
    T, H, Hkv, D = 20, 4, 2, 8
    q, k, v = torch.randn(T, H, D), torch.randn(T, Hkv, D), torch.randn(T, Hkv, D)
    whole = prefill_attention(q, k, v, 0, D ** -0.5)
    part = prefill_attention(q[12:], k, v, 12, D ** -0.5)
    assert torch.allclose(whole[12:], part, atol=1e-6)


def test_batched_prefill_equals_per_sequence():
    from engine.model.attention_ops import batched_prefill_attention

    torch.manual_seed(1)
    B, T, H, Hkv, D = 3, 9, 4, 2, 8
    q, k, v = torch.randn(B, T, H, D), torch.randn(B, T, Hkv, D), torch.randn(B, T, Hkv, D)
    batched = batched_prefill_attention(q, k, v, 0.3)
    for b in range(B):
        assert torch.allclose(batched[b], prefill_attention(q[b], k[b], v[b], 0, 0.3),
                              atol=1e-6)
