"""The model runner: turns a scheduled batch into tensors, runs the model, samples."""

from __future__ import annotations

import math

import torch

from engine.model.attention_ops import AttnContext
from engine.model.attention_ops import decode_kv_index
from engine.model.attention_ops import num_kv_splits
from engine.model.attention_ops import split_k_bias
from engine.model.attention_ops import split_layout
from engine.config import ModelConfig
from engine.knobs import EngineKnobs
from engine.model.llama import LlamaForCausalLM
from engine.core.dense_kv import HEADROOM
from engine.core.dense_kv import HEADROOM_BY_LENGTH
from engine.core.dense_kv import DenseKV
from engine.core.scheduler import ScheduledBatch


class ModelRunner:
    """Owns the model and the paged KV cache of one worker."""

    def __init__(self, model: LlamaForCausalLM, cfg: ModelConfig, knobs: EngineKnobs) -> None:
        self.model = model
        self.cfg = cfg
        self.knobs = knobs
        self.page_size = knobs.page_size
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device
        slots = knobs.num_pages * knobs.page_size
        self.num_slots = slots
        # The paged KV of every layer in one tensor [layers, 2 (K, V), slots, Hkv, D], so a
        # dense decode step stores its new K/V of all layers in one index_copy_; each
        # layer's attention holds views of its two flat slot arrays [slots, Hkv, D].
        self.kv_cache = torch.zeros(cfg.num_layers, 2, slots, cfg.num_kv_heads, cfg.head_dim,
                                    dtype=self.dtype, device=self.device)
        self.k_caches = list(self.kv_cache[:, 0])
        self.v_caches = list(self.kv_cache[:, 1])
        # Row of slot 0 of each (layer, K|V) in the flat cache [layers * 2 * slots, Hkv * D]:
        # a decode step adds its new tokens' slots to it (kept, not rebuilt every step).
        self._layer_slot_rows = torch.arange(cfg.num_layers * 2).view(-1, 1) * slots
        for layer, k, v in zip(model.layers, self.k_caches, self.v_caches):
            layer.self_attn.k_cache = k
            layer.self_attn.v_cache = v
        self.generator = torch.Generator(device=self.device).manual_seed(knobs.seed)
        self.last_num_splits = 1
        # ENGINE_DECODE_TARGET_CTAS=0: a GPU's share of SMs, a CPU's threads (see knobs).
        self.auto_target_ctas = 16 if self.device.type == "cuda" else torch.get_num_threads()
        # Decode gathers each layer's context into this memory (grown on demand, kept):
        # a fresh multi-MB tensor per step would cost page faults on every step.
        self._kv_workspace = torch.empty(0, dtype=self.dtype, device=self.device)
        # Unsplit decode keeps the batch's gathered context across its steps.
        headroom = HEADROOM if model.ops.reads_decode_bias else HEADROOM_BY_LENGTH
        self.dense = DenseKV(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, self.dtype,
                             self.device, headroom=headroom)

    def _slots(self, block_table: list[int], start: int, end: int) -> torch.Tensor:
        pos = torch.arange(start, end)
        pages = torch.tensor(block_table, dtype=torch.long)[pos // self.page_size]
        return pages * self.page_size + pos % self.page_size

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[int]:
        """One forward step; returns the sampled next token of each sequence in the batch."""
        if batch.is_prefill:
            self.dense.invalidate()
            ids, positions, ctx = self._prepare_prefill(batch)
            rows = torch.tensor(ctx.cu_seqlens[1:]) - 1  # last fed token of each sequence
            logits = self._forward(ids, positions, ctx, rows)
        else:
            logits = self._decode(batch)
        temps = [s.params.temperature for s in batch.seqs]
        return self.sample(logits, temps)

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, ctx: AttnContext,
                 rows: torch.Tensor | None) -> torch.Tensor:
        if self.device.type != "cpu":
            # Batches are assembled on the host (small index tensors), then moved once.
            ids, positions, rows = (None if t is None else self._to_device(t)
                                    for t in (ids, positions, rows))
            ctx = ctx.to(self.device)
        return self.model(ids, positions, ctx, rows)  # [B, vocab]

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=True)

    def _decode(self, batch: ScheduledBatch) -> torch.Tensor:
        """Logits of a decode step: on the dense blocks when unsplit, else split-K."""
        seqs = batch.seqs
        lens = [s.num_tokens for s in seqs]
        splits = num_kv_splits(len(seqs), self.cfg.num_kv_heads, max(lens),
                               self.knobs.decode_target_ctas or self.auto_target_ctas)
        self.last_num_splits = splits
        if splits == 1 or self.model.ops.splits_dense_decode:
            # The fused kernel splits over the dense blocks itself; eager torch splits only
            # on the gather path.
            key = tuple((s.seq_id, s.num_preemptions) for s in seqs)
        else:
            self.dense.invalidate()
            return self._forward(*self._prepare_decode(batch, lens, splits), None)
        # The step's integers in one host tensor [3, B]: each sequence's last token, its
        # position (len - 1: the block positions before it) and the cache slot it goes to
        # (one conversion, not one per row; each row is contiguous).
        host = torch.tensor([self._last_token_ids(seqs), [n - 1 for n in lens],
                             self._last_slots(seqs, lens)])
        ids, positions, slots = host[0], host[1], host[2]
        step = self.dense.plan(key, lens, positions)
        if step is None:
            return self._forward(*self._prepare_decode(batch, lens, splits), None)
        D, Hkv = self.cfg.head_dim, self.cfg.num_kv_heads
        blocks = self.dense.blocks
        assert blocks is not None
        if step.fresh:
            self._gather_blocks(seqs, step.cap, blocks)
        ops = self.model.ops
        # Attention reads the len - 1 positions before each new token, plus the token
        # (the eager path as a mask over the block, the fused kernel from the lengths).
        bias = None
        if ops.reads_decode_bias:
            bias = self._to_device(split_k_bias(positions, step.cap, 1).view(
                len(seqs), 1, 1, step.cap))
        ids, positions = self._to_device(ids), self._to_device(positions)
        logits, new_kv = self.model.decode_dense(ids, positions, self.dense.k, self.dense.v,
                                                 bias, splits)
        # The new K/V of every layer: into the paged cache and the dense blocks.
        where = self._layer_slot_rows + slots  # [layers * 2, B]
        ops.copy_rows_(self.kv_cache.view(-1, Hkv * D), self._to_device(where.view(-1)),
                       new_kv.view(-1, Hkv * D))
        ops.copy_rows_(blocks.view(-1, D), self._to_device(step.rows), new_kv.view(-1, D))
        return logits

    def _gather_blocks(self, seqs, cap: int, blocks: torch.Tensor) -> None:
        """All layers' K and V context into the dense blocks in one gather: row
        (layer, k|v) of the flat cache is offset by its slot array's rows."""
        P, D, Hkv = self.page_size, self.cfg.head_dim, self.cfg.num_kv_heads
        index = decode_kv_index(self._block_tables(seqs, -(-cap // P)), cap, P, Hkv)
        offsets = torch.arange(blocks.shape[0] * 2) * (self.num_slots * Hkv)
        index = self._to_device((offsets.view(-1, 1) + index.view(1, -1)).view(-1))
        torch.index_select(self.kv_cache.view(-1, D), 0, index, out=blocks.view(-1, D))

    def _last_slots(self, seqs, lens: list[int]) -> list[int]:
        """The cache slot of each sequence's newest token (position ``len - 1``).

        Built as a Python list and converted once: a tensor op per sequence costs more
        than the whole conversion at decode batch sizes."""
        P = self.page_size
        return [s.block_table[(n - 1) // P] * P + (n - 1) % P for s, n in zip(seqs, lens)]

    @staticmethod
    def _last_token_ids(seqs) -> list[int]:
        # The last token of each sequence (``Sequence.tokens`` would copy the whole list).
        return [s.output_ids[-1] if s.output_ids else s.prompt_ids[-1] for s in seqs]

    @staticmethod
    def _block_tables(seqs, width: int) -> torch.Tensor:
        """[B, width] page tables, padded with page 0 (masked wherever it is read)."""
        rows = [s.block_table[:width] + [0] * (width - len(s.block_table[:width]))
                for s in seqs]
        return torch.tensor(rows, dtype=torch.long)

    def _prepare_prefill(self, batch: ScheduledBatch
                         ) -> tuple[torch.Tensor, torch.Tensor, AttnContext]:
        ids: list[int] = []
        cu = [0]
        starts: list[int] = []
        slot_parts: list[torch.Tensor] = []
        ctx_slots: list[torch.Tensor] = []
        for seq, n in zip(batch.seqs, batch.num_new_tokens):
            start = seq.num_computed
            ids.extend(seq.tokens[start:start + n])
            cu.append(cu[-1] + n)
            starts.append(start)
            all_slots = self._slots(seq.block_table, 0, start + n)  # [start + n]
            slot_parts.append(all_slots[start:])
            ctx_slots.append(all_slots)
        positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts,
                                                                        batch.num_new_tokens)])
        ctx = AttnContext(is_prefill=True, slot_mapping=torch.cat(slot_parts),
                          context_lens=torch.tensor([s + n for s, n in
                                                     zip(starts, batch.num_new_tokens)]),
                          context_slots=ctx_slots, cu_seqlens=cu, start_pos=starts)
        return torch.tensor(ids), positions, ctx

    def _prepare_decode(self, batch: ScheduledBatch, lens: list[int], splits: int
                        ) -> tuple[torch.Tensor, torch.Tensor, AttnContext]:
        """The gather path: each layer gathers its context into the split-K layout."""
        seqs = batch.seqs
        P = self.page_size
        S, C = split_layout(max(lens), splits)
        # The gather covers the split-K padded length S*C; padding reads page 0 (masked).
        lens_t = torch.tensor(lens)
        Hkv = self.cfg.num_kv_heads
        ctx = AttnContext(is_prefill=False,
                          slot_mapping=torch.tensor(self._last_slots(seqs, lens)),
                          context_lens=lens_t, num_splits=splits,
                          decode_bias=split_k_bias(lens_t, S * C, S))
        ctx.kv_index = decode_kv_index(self._block_tables(seqs, -(-(S * C) // P)), S * C, P,
                                       Hkv)
        ctx.kv_buffers = self._kv_buffers((len(seqs), Hkv, S, C, self.cfg.head_dim))
        return torch.tensor(self._last_token_ids(seqs)), lens_t - 1, ctx

    def _kv_buffers(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """Two [B, Hkv, S, C, D] views of the persistent decode gather workspace."""
        n = math.prod(shape)
        if self._kv_workspace.numel() < 2 * n:
            # Grow with headroom so a batch growing by a token a step does not reallocate.
            self._kv_workspace = torch.empty(3 * n, dtype=self.dtype, device=self.device)
        return self._kv_workspace[:n].view(shape), self._kv_workspace[n:2 * n].view(shape)

    def sample(self, logits: torch.Tensor, temperatures: list[float]) -> list[int]:
        """Greedy for temperature 0, else seeded multinomial sampling. logits: [B, V]."""
        greedy = self.model.ops.argmax(logits)
        if all(t == 0 for t in temperatures):
            return greedy.tolist()
        t = torch.tensor([max(x, 1e-5) for x in temperatures], device=logits.device).unsqueeze(1)
        probs = torch.softmax(logits / t, dim=-1)
        sampled = torch.multinomial(probs, 1, generator=self.generator).squeeze(1)
        use_greedy = torch.tensor([x == 0 for x in temperatures], device=logits.device)
        return torch.where(use_greedy, greedy, sampled).tolist()

    # KV transfer (PD): copy a sequence's KV out of / into its pages.
    def export_kv(self, block_table: list[int], num_tokens: int) -> torch.Tensor:
        """KV of the first ``num_tokens`` tokens: [layers, 2, num_tokens, Hkv, D]."""
        slots = self._slots(block_table, 0, num_tokens).to(self.device)
        return torch.stack([torch.stack((k[slots], v[slots]))
                            for k, v in zip(self.k_caches, self.v_caches)]).cpu()

    def import_kv(self, block_table: list[int], kv: torch.Tensor) -> None:
        slots = self._slots(block_table, 0, kv.shape[2]).to(self.device)
        kv = kv.to(device=self.device, dtype=self.dtype)
        for layer, (k, v) in enumerate(zip(self.k_caches, self.v_caches)):
            k[slots] = kv[layer, 0]
            v[slots] = kv[layer, 1]
