"""Continuous batching: admission by free pages, chunked prefill, preemption by recompute.

Pure Python (no torch), like nano-vllm's scheduler, so its policy is tested alone.
Each step is either a prefill step (prompt chunks of waiting sequences, at most
``prefill_chunk_tokens`` tokens in all) or a decode step (one token for every running
sequence).  Prefill goes first so new requests join the running batch quickly; a
sequence is admitted only when the pages for its next chunk are free.  When a decode
step needs a page and none is free, the most recently admitted sequence is preempted:
its pages are freed and it goes back to the head of the queue, to be recomputed
(prompt + tokens generated so far) when pages free up.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.core.block_manager import BlockManager
from engine.core.sequence import Sequence
from engine.core.sequence import SeqStatus


@dataclass
class ScheduledBatch:
    is_prefill: bool
    seqs: list[Sequence]
    num_new_tokens: list[int]  # tokens fed per sequence this step


class Scheduler:
    def __init__(self, blocks: BlockManager, max_running: int, prefill_chunk_tokens: int) -> None:
        self.blocks = blocks
        self.max_running = max_running
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        # Decode role: sequences whose KV arrived from a prefill worker, waiting for a slot.
        self.ready: deque[Sequence] = deque()
        self.finished: list[Sequence] = []

    @property
    def capacity_tokens(self) -> int:
        return self.blocks.num_pages * self.blocks.page_size

    def add(self, seq: Sequence) -> None:
        """Queue a new request; one that can never fit in the cache is finished with an error."""
        if seq.num_tokens + seq.params.max_new_tokens > self.capacity_tokens:
            self._finish(seq, error=(
                f"request needs {seq.num_tokens + seq.params.max_new_tokens} tokens of KV cache, "
                f"the cache holds {self.capacity_tokens}"))
            return
        seq.status = SeqStatus.WAITING
        self.waiting.append(seq)

    def add_prefilled(self, seq: Sequence) -> None:
        """A sequence whose prompt KV is already in its pages (decode role)."""
        self.ready.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.ready)

    def schedule(self) -> ScheduledBatch | None:
        while self.ready and len(self.running) < self.max_running:
            seq = self.ready.popleft()
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
        batch = self._schedule_prefill()
        if batch is None:
            batch = self._schedule_decode()
        if batch is None and self.waiting and not self.running:
            # Partially prefilled sequences behind the head hold pages the head needs:
            # release them (they will be recomputed) rather than stall.
            for seq in list(self.waiting)[1:]:
                if seq.block_table:
                    self.blocks.free(seq.block_table)
                    seq.num_computed = 0
                    seq.num_preemptions += 1
            batch = self._schedule_prefill()
        return batch

    def _schedule_prefill(self) -> ScheduledBatch | None:
        seqs: list[Sequence] = []
        sizes: list[int] = []
        budget = self.prefill_chunk_tokens
        for seq in self.waiting:
            if budget <= 0 or len(self.running) + len(seqs) >= self.max_running:
                break
            chunk = min(seq.num_pending, budget)
            need = self.blocks.pages_for(seq.num_computed + chunk) - len(seq.block_table)
            if not self.blocks.can_allocate(need):
                break  # admission by free pages; FIFO, so no overtaking
            self.blocks.grow(seq.block_table, seq.num_computed + chunk)
            seqs.append(seq)
            sizes.append(chunk)
            budget -= chunk
        return ScheduledBatch(True, seqs, sizes) if seqs else None

    def _schedule_decode(self) -> ScheduledBatch | None:
        scheduled: list[Sequence] = []
        for seq in list(self.running):
            if seq.status is not SeqStatus.RUNNING:
                continue  # preempted earlier in this loop
            while not self.blocks.can_allocate(
                    self.blocks.pages_for(seq.num_tokens) - len(seq.block_table)):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            if seq.status is SeqStatus.RUNNING:
                self.blocks.grow(seq.block_table, seq.num_tokens)
                scheduled.append(seq)
        if not scheduled:
            return None
        return ScheduledBatch(False, scheduled, [1] * len(scheduled))

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.free(seq.block_table)
        seq.num_computed = 0
        seq.num_preemptions += 1
        seq.status = SeqStatus.WAITING
        self.waiting.appendleft(seq)

    def postprocess(self, batch: ScheduledBatch, next_tokens: list[int], now: float) -> None:
        """Record a step's results: progress, sampled tokens, finished sequences."""
        for seq, fed, token in zip(batch.seqs, batch.num_new_tokens, next_tokens):
            seq.num_computed += fed
            if seq.num_computed < seq.num_tokens:
                continue  # a prompt chunk that is not the last: nothing sampled
            if batch.is_prefill:
                self.waiting.remove(seq)
                seq.status = SeqStatus.RUNNING
                self.running.append(seq)
            seq.output_ids.append(token)
            seq.token_times.append(now)
            if seq.hold_kv or seq.is_done():
                self.running.remove(seq)
                self._finish(seq)

    def abort(self, seq: Sequence, error: str) -> None:
        """Drop a request wherever it is, freeing its pages."""
        for queue in (self.waiting, self.ready):
            if seq in queue:
                queue.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
        seq.hold_kv = False
        self._finish(seq, error=error)

    def finish(self, seq: Sequence, error: str | None = None) -> None:
        """Mark a sequence finished (with ``error`` if given) and free its pages."""
        self._finish(seq, error)

    def _finish(self, seq: Sequence, error: str | None = None) -> None:
        seq.status = SeqStatus.FINISHED
        if error is not None:
            seq.error = error
            seq.finish_reason = "error"
        if not seq.hold_kv and seq.block_table:
            self.blocks.free(seq.block_table)
        self.finished.append(seq)
