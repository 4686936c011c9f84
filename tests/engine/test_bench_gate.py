"""The throughput gate's stopping rule (ledger/demo_tools/bench_gate.py): a reading close to
the threshold is measured again, a far one decides at once.  The gate's runs themselves
are the engine's, exercised end to end by tests/engine/test_engine_upgrade_story.py."""

from __future__ import annotations

import pytest

from ledger.demo_tools.bench_gate import CLOSE
from ledger.demo_tools.bench_gate import decided


@pytest.mark.parametrize("ratio", [0.19, 0.33, 0.6 / CLOSE - 0.01, 0.6 * CLOSE, 1.0])
def test_a_reading_far_from_the_threshold_decides_after_the_first_rounds(ratio):
    assert decided(ratio, rounds=2, min_ratio=0.6, best_of=2, settle=2)


@pytest.mark.parametrize("ratio", [0.55, 0.6 / CLOSE, 0.6, 0.7])
def test_a_close_reading_takes_up_to_settle_more_rounds(ratio):
    # 0.55: a cured deployment read that beside a neighbour's burst (its cure reads ~1.0)
    assert [decided(ratio, rounds=r, min_ratio=0.6, best_of=2, settle=2)
            for r in (2, 3, 4)] == [False, False, True]
    assert decided(ratio, rounds=2, min_ratio=0.6, best_of=2, settle=0)
