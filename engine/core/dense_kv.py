"""Decode KV kept dense across steps: gathered once per batch, then one token appended.

Unsplit decode attention wants each sequence's context as a dense head-major
``[B, Hkv, L, D]`` block (:func:`engine.model.attention_ops.decode_kv_index`).  Gathering
it from the paged cache every step re-reads and re-writes the whole context of every
layer (K and V) for one new token: measured at c32 on the 30M Llama, one thread, bf16,
the 16 gathers a step were 11% of the run.  Here the gathered blocks persist, all layers'
K and V in one tensor ``[layers, 2, B, Hkv, cap, D]``: the first step of a batch gathers
``cap`` positions (the context plus headroom) into it, in one ``index_select``; after
every step the runner writes the step's new K and V of every layer at position
``len - 1``, in one ``index_copy_`` (:attr:`DenseStep.rows`), next to its write into the
paged cache.  A following step of the *same* batch (same sequences in the same order,
each exactly one token longer, no other step in between) then needs no gather.

A step attends over the block's positions *before* its own token (``len - 1`` of them,
the rest masked) plus its own token's K and V, passed in directly
(:func:`engine.model.attention_ops.dense_decode_attention`): the model's decode step is
then a pure function of its inputs, with no cache write inside, and all layers' writes
are two ops after it instead of four per layer inside it.  Measured (benchmarks/
engine_vs_hf.py, 30M Llama, 2 threads): fp32 engine/HF 1.63x -> 1.70x at c16 and
1.42x -> 1.64x at c32; bf16 unchanged within noise (1.4-1.6x).  torch.compile of this
pure step was tried: 28% faster on fixed inputs, no gain inside generate, 40-75 s of
start-up; not kept.  What did pay is the fused CPU kernels of engine.model.kernels (the
attention over the block plus the own token among them): bf16 1.4-1.5x -> 1.9-2.1x
(2.35-2.61x at c32 with the later kernels, engine.model.kernels).

Exactness: the positions attention reads below ``len - 1`` hold the same values as the
gather would have produced (the same K/V rows), and the positions past it are masked
(-inf bias; finite values from the gather of page 0, of a stale slot or an earlier
token), so the outputs are those of the gather path; tests/engine compare the two token
for token in fp32, and in bf16 (which rounds the own-token column apart) within bf16's
error of the fp32 logits.

When not used: split-K steps on eager torch (several partitions: they gather into the
split layout; the fused CPU kernel splits over these blocks itself), a batch whose blocks
would exceed ``budget_bytes``,
and the first step after any change of batch or a prefill step (it gathers afresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

import torch

# Positions gathered past the longest context, so a batch appends this many tokens
# before its block is gathered again.  Eager attention runs over the whole block (masked
# past each length): the batched matmuls copy a strided view to contiguous memory first
# (measured 357 vs 96 us at c32), so a few masked positions are cheaper than a slice.
# One page: a gather every 16 steps, ~8 masked positions a step on average.
HEADROOM = 16
# The fused CPU kernel reads each sequence's length, not a mask over the block, so
# positions past it cost memory only: four pages, a gather every 64 steps (at c32 on the
# 30M Llama in bf16 the re-gathers every 16 steps were 1.5% of a run).
HEADROOM_BY_LENGTH = 64
# The blocks of every layer together; past it a step takes the gather path.
BUDGET_BYTES = 512 << 20


@dataclass
class DenseStep:
    """What one decode step does with the dense blocks."""

    fresh: bool  # gather the whole block first (True) or use it as it is (False)
    cap: int  # positions per (sequence, KV head) in the block
    # Where the step's new K/V go: rows of the blocks seen as [layers * 2 * B * Hkv * cap, D],
    # in the order of the model's ``[layers, 2, B, Hkv, D]`` output.
    rows: torch.Tensor


@dataclass
class DenseKV:
    """The persistent ``[layers, 2, B, Hkv, cap, D]`` K and V blocks of the decode batch."""

    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device
    budget_bytes: int = BUDGET_BYTES
    headroom: int = HEADROOM
    enabled: bool = True
    appended: int = 0  # steps that appended instead of gathering (tests, benchmarks)
    blocks: torch.Tensor | None = None  # [layers, 2, B, Hkv, cap, D] view of _storage
    _key: tuple = ()
    _lens: list[int] = field(default_factory=list)
    _cap: int = 0
    _storage: torch.Tensor | None = None
    _base: torch.Tensor | None = None  # rows of position 0: [layers * 2, B, Hkv]
    # Each layer's K and V block [B, Hkv, cap, D]: views of ``blocks`` made when it is
    # bound, not every step (16 views a step of the 30M Llama, ~25 us at c1).
    k: list[torch.Tensor] = field(default_factory=list)
    v: list[torch.Tensor] = field(default_factory=list)


    def invalidate(self) -> None:
        """Forget the batch (a prefill step ran, or anything else touched the cache)."""
        self._key = ()

    def plan(self, key: tuple, lens: list[int], positions: torch.Tensor | None = None
             ) -> DenseStep | None:
        """This step's use of the blocks, or None for the gather path (blocks forgotten).

        ``positions``: ``lens - 1`` as a tensor where the caller has it (the runner builds
        it for the model anyway), else made here."""
        if not self.enabled:
            return None
        max_len = max(lens)
        if (key == self._key and max_len <= self._cap
                and all(n == p + 1 for n, p in zip(lens, self._lens))):
            self._lens = lens
            self.appended += 1
            return DenseStep(False, self._cap, self._rows(lens, positions))
        cap = max_len + self.headroom
        shape = (self.num_layers, 2, len(lens), self.kv_heads, cap, self.head_dim)
        numel = shape[0] * shape[1] * shape[2] * shape[3] * shape[4] * shape[5]
        if numel * self.dtype.itemsize > self.budget_bytes:
            self.invalidate()
            return None
        self._bind(shape, numel)
        self._key, self._lens, self._cap = key, lens, cap
        return DenseStep(True, cap, self._rows(lens, positions))

    def _rows(self, lens: list[int], positions: torch.Tensor | None) -> torch.Tensor:
        assert self._base is not None
        if positions is None:
            positions = torch.tensor(lens).sub_(1)
        return (self._base + positions.view(1, -1, 1)).view(-1)

    def _bind(self, shape: tuple[int, ...], numel: int) -> None:
        """A view of ``shape`` over storage kept across batches (grown, never shrunk)."""
        if self._storage is None or self._storage.numel() < numel:
            self._storage = torch.empty(numel, dtype=self.dtype, device=self.device)
        self.blocks = self._storage[:numel].view(shape)
        self.k, self.v = list(self.blocks[:, 0]), list(self.blocks[:, 1])
        layers2, B, Hkv, cap = shape[0] * shape[1], shape[2], shape[3], shape[4]
        self._base = (torch.arange(layers2 * B * Hkv) * cap).view(layers2, B, Hkv)
