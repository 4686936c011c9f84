"""Decode KV kept dense across steps: gathered once per batch, then one token appended.

Unsplit decode attention wants each sequence's context as a dense head-major
``[B, Hkv, L, D]`` block (:func:`engine.model.attention_ops.decode_kv_index`).  Gathering
it from the paged cache every step re-reads and re-writes the whole context of every
layer (K and V) for one new token: measured at c32 on the 30M Llama, one thread, bf16,
the 16 gathers a step were 11% of the run.  Here the gathered block of each layer
persists: the first step of a batch gathers ``cap`` positions (the context plus headroom)
into it; each following step of the *same* batch (same sequences in the same order, each
exactly one token longer, no other step in between) writes only the new token's K and V
into it, at position ``len - 1``, next to its write into the paged cache.

Exactness: the positions attention reads below a sequence's length hold the same values
as the gather would have produced (the same K/V rows), and the positions past it are
masked (-inf bias; finite values from the gather of page 0 or an earlier token), so the
outputs are those of the gather path; tests/engine compare the two token for token.

When not used: split-K steps (several partitions: the long-context, low-batch case keeps
the gather into the split layout), a batch whose buffers would exceed ``budget_bytes``,
and the first step after any change of batch or a prefill step (it gathers afresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

import torch

# Positions gathered past the longest context, so a batch appends this many tokens
# before its block is gathered again.  bf16 attention runs over the whole block (masked
# past each length): its batched matmuls copy a strided view to contiguous memory first
# (measured 357 vs 96 us at c32), so a few masked positions are cheaper than a slice;
# fp32 attention (torch's fused kernel) takes the slice of the longest context as it is.
# One page: a gather every 16 steps, ~8 masked positions a step on average.
HEADROOM = 16
# Both buffers of every layer together; past it a step takes the gather path.
BUDGET_BYTES = 512 << 20


@dataclass
class DenseStep:
    """What one decode step does with the dense blocks."""

    fresh: bool  # gather the whole block (True) or append the new token (False)
    cap: int  # positions per (sequence, KV head) in the block
    rows: torch.Tensor | None = None  # append: row of each (seq, KV head) in [B*Hkv*cap]
    dtype: torch.dtype = torch.float32

    def attend(self, max_len: int) -> int:
        """Positions attention reads: the longest context (fp32) or the whole block."""
        return max_len if self.dtype == torch.float32 else self.cap


@dataclass
class DenseKV:
    """The persistent per-layer ``[B, Hkv, cap, D]`` K and V blocks of the decode batch."""

    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device
    budget_bytes: int = BUDGET_BYTES
    enabled: bool = True
    appended: int = 0  # steps that appended instead of gathering (tests, benchmarks)
    k: list[torch.Tensor] = field(default_factory=list)
    v: list[torch.Tensor] = field(default_factory=list)
    _key: tuple = ()
    _lens: list[int] = field(default_factory=list)
    _cap: int = 0
    _storage: list[torch.Tensor] = field(default_factory=list)

    def invalidate(self) -> None:
        """Forget the batch (a prefill step ran, or anything else touched the cache)."""
        self._key = ()

    def plan(self, key: tuple, lens: list[int]) -> DenseStep | None:
        """This step's use of the blocks, or None for the gather path (blocks forgotten)."""
        if not self.enabled:
            return None
        max_len = max(lens)
        if (key == self._key and max_len <= self._cap
                and all(n == p + 1 for n, p in zip(lens, self._lens))):
            self._lens = lens
            self.appended += 1
            cap = self._cap
            rows = [(b * self.kv_heads + h) * cap + n - 1
                    for b, n in enumerate(lens) for h in range(self.kv_heads)]
            return DenseStep(False, cap, torch.tensor(rows), self.dtype)
        cap = max_len + HEADROOM
        shape = (len(lens), self.kv_heads, cap, self.head_dim)
        per_block = shape[0] * shape[1] * shape[2] * shape[3]
        if 2 * self.num_layers * per_block * self.dtype.itemsize > self.budget_bytes:
            self.invalidate()
            return None
        self._bind(shape, per_block)
        self._key, self._lens, self._cap = key, lens, cap
        return DenseStep(True, cap, dtype=self.dtype)

    def _bind(self, shape: tuple[int, int, int, int], per_block: int) -> None:
        """Views of ``shape`` over storage kept across batches (grown, never shrunk)."""
        if not self._storage or self._storage[0].numel() < 2 * per_block:
            self._storage = [torch.empty(2 * per_block, dtype=self.dtype, device=self.device)
                             for _ in range(self.num_layers)]
        self.k = [s[:per_block].view(shape) for s in self._storage]
        self.v = [s[per_block:2 * per_block].view(shape) for s in self._storage]
