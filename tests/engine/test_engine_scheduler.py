"""Block manager and scheduler policy (pure Python, no model)."""

from __future__ import annotations

import pytest

from engine.core.block_manager import BlockManager
from engine.core.block_manager import OutOfPages
from engine.core.scheduler import Scheduler
from engine.core.sequence import SamplingParams
from engine.core.sequence import Sequence


def _run(sched: Scheduler, max_steps: int = 10_000) -> list:
    """Drive the scheduler with a fake model that emits token 7; returns the batches."""
    batches = []
    for _ in range(max_steps):
        if not sched.has_work():
            return batches
        batch = sched.schedule()
        assert batch is not None, "scheduler stalled"
        batches.append((batch.is_prefill, [s.seq_id for s in batch.seqs],
                        list(batch.num_new_tokens)))
        sched.postprocess(batch, [7] * len(batch.seqs), 0.0)
    raise AssertionError("did not finish")


def test_block_manager_allocates_and_refuses_double_free():
    bm = BlockManager(4, 8)
    table: list[int] = []
    bm.grow(table, 17)
    assert len(table) == 3 and bm.num_free == 1
    with pytest.raises(OutOfPages):
        bm.allocate(2)
    pages = list(table)
    bm.free(table)
    assert table == [] and bm.num_free == 4
    with pytest.raises(ValueError):
        bm.free(pages[:1])


def test_chunked_prefill_respects_the_token_budget():
    sched = Scheduler(BlockManager(64, 4), max_running=8, prefill_chunk_tokens=5)
    seq = Sequence(list(range(12)), SamplingParams(3))
    sched.add(seq)
    batches = _run(sched)
    assert [b[2] for b in batches if b[0]] == [[5], [5], [2]]
    assert seq.output_ids == [7, 7, 7] and sched.blocks.num_free == 64


def test_admission_waits_for_free_pages_and_preemption_recomputes():
    # 6 pages of 2 tokens: two sequences needing 4+4 tokens cannot both fit at the end.
    sched = Scheduler(BlockManager(6, 2), max_running=4, prefill_chunk_tokens=64)
    a = Sequence([1, 2, 3], SamplingParams(6))
    b = Sequence([4, 5, 6], SamplingParams(6))
    sched.add(a)
    sched.add(b)
    _run(sched)
    assert a.output_ids == [7] * 6 and b.output_ids == [7] * 6
    assert a.num_preemptions + b.num_preemptions >= 1
    assert sched.blocks.num_free == 6


def test_max_running_caps_the_decode_batch():
    sched = Scheduler(BlockManager(100, 4), max_running=2, prefill_chunk_tokens=100)
    for i in range(5):
        sched.add(Sequence([i, i], SamplingParams(3)))
    batches = _run(sched)
    assert max(len(ids) for pre, ids, _ in batches if not pre) == 2


def test_request_larger_than_the_cache_is_finished_with_an_error():
    sched = Scheduler(BlockManager(2, 2), max_running=2, prefill_chunk_tokens=8)
    seq = Sequence([1, 2, 3], SamplingParams(4))
    sched.add(seq)
    assert seq.error and "KV cache" in seq.error and not sched.has_work()


def test_partial_prefills_do_not_deadlock_a_full_cache():
    # 4 pages of 2 tokens. ``a`` decodes until it needs the page ``b``'s first prompt chunk
    # holds, is preempted, and then sits at the head of the queue needing that page: ``b``
    # must give it back (and be recomputed later) or nothing can run.
    sched = Scheduler(BlockManager(4, 2), max_running=4, prefill_chunk_tokens=4)
    a = Sequence([1, 2, 3], SamplingParams(5))
    b = Sequence([4, 5, 6, 7, 8, 9], SamplingParams(1))
    sched.add(a)
    sched.add(b)
    _run(sched)
    assert len(a.output_ids) == 5 and len(b.output_ids) == 1
    assert a.num_preemptions >= 1 and b.num_preemptions >= 1
    assert sched.blocks.num_free == 4
