"""The pure search of `ledger bisect`, against synthetic monotone oracles.

An oracle is a family of minimal failing sets: the check fails when the applied
entries contain any of them.  Exhaustive over small selections, hypothesis beyond.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.core.bisect import confidence
from ledger.core.bisect import max_checks
from ledger.core.bisect import minimality_evidence
from ledger.core.bisect import search
from ledger.core.bisect import solve


def ids(n: int) -> list[str]:
    return [f"e{i:03d}" for i in range(n)]


def oracle(family):
    family = [frozenset(s) for s in family]
    return lambda applied: any(s <= applied for s in family)


def check_conclusion(universe, family, conclusion, probes):
    fails = oracle(family)
    answers = [(p.applied, fails(p.applied)) for p in probes]
    assert probes[0].applied == frozenset(universe) and probes[0].purpose == "confirm"
    if not fails(frozenset(universe)):
        assert conclusion.kind == "cannot-reproduce" and len(probes) == 1
        return
    assert probes[1].applied == frozenset() and probes[1].purpose == "baseline"
    if fails(frozenset()):
        assert conclusion.kind == "not-in-entries" and len(probes) == 2
        assert conclusion.entries == tuple(universe)
        return
    members = frozenset(conclusion.entries)
    assert conclusion.kind == ("culprit" if len(members) == 1 else "interaction")
    assert fails(members)                                       # it fails ...
    assert all(not fails(members - {m}) for m in members)      # ... and is 1-minimal
    # ... and the record shows both, by probes actually run (no untested inference).
    assert any(bad and s == members for s, bad in answers)
    assert set(minimality_evidence(members, answers)) == set(members)
    for i in conclusion.evidence:
        assert 0 <= i < len(probes)
    assert list(conclusion.entries) == [e for e in universe if e in members]


@pytest.mark.parametrize("n", range(1, 11))
def test_every_single_culprit_is_found_within_the_bound(n):
    universe = ids(n)
    for culprit in universe:
        conclusion, probes = solve(universe, oracle([{culprit}]))
        check_conclusion(universe, [{culprit}], conclusion, probes)
        assert conclusion.entries == (culprit,)
        assert len(probes) <= max_checks(n)


@pytest.mark.parametrize("n", range(2, 9))
def test_every_pair_is_found_as_an_interaction(n):
    universe = ids(n)
    for pair in itertools.combinations(universe, 2):
        conclusion, probes = solve(universe, oracle([set(pair)]))
        check_conclusion(universe, [set(pair)], conclusion, probes)
        assert conclusion.entries == pair and conclusion.kind == "interaction"
        assert len(probes) <= 2 + 2 * math.ceil(math.log2(n)) + 3


def test_every_family_over_four_entries():
    """All monotone failure functions on 4 entries (as antichains of failing sets)."""
    universe = ids(4)
    subsets = [frozenset(c) for k in range(5) for c in itertools.combinations(universe, k)]
    for mask in range(1 << len(subsets)):
        family = [s for i, s in enumerate(subsets) if mask >> i & 1]
        conclusion, probes = solve(universe, oracle(family))
        check_conclusion(universe, family, conclusion, probes)


def test_cost_goals_at_32():
    universe = ids(32)
    singles = [len(solve(universe, oracle([{c}]))[1]) for c in universe]
    # Verified conclusions need a failing check of the culprit alone: 7 checks for half
    # the positions, never more than 8 (see the module docs for why 7 everywhere cannot be).
    assert min(singles) == 7 and max(singles) == 8
    assert sum(1 for c in singles if c == 7) == 16
    pairs = [len(solve(universe, oracle([set(p)]))[1])
             for p in itertools.combinations(universe, 2)]
    assert max(pairs) <= 16
    assert len(solve(universe, oracle([set()]))[1]) == 2


family_strategy = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.sets(st.integers(0, n - 1), max_size=4), max_size=4),
    )
)


@settings(max_examples=300, deadline=None)
@given(family_strategy)
def test_any_monotone_failure_gives_a_verified_minimal_set(case):
    n, family = case
    universe = ids(n)
    named = [{universe[i] for i in s} for s in family]
    conclusion, probes = solve(universe, oracle(named))
    check_conclusion(universe, named, conclusion, probes)
    # No configuration is checked twice.
    assert len({p.applied for p in probes}) == len(probes)
    # Deterministic: the same answers, the same probes.
    assert solve(universe, oracle(named))[1] == probes


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.data())
def test_one_culprit_costs_at_most_two_plus_log2_plus_one(n, data):
    universe = ids(n)
    culprit = data.draw(st.sampled_from(universe))
    conclusion, probes = solve(universe, oracle([{culprit}]))
    assert conclusion.kind == "culprit" and conclusion.entries == (culprit,)
    assert len(probes) <= max_checks(n)


def test_bad_selection_is_refused():
    for bad in ([], ["a", "a"]):
        with pytest.raises(ValueError):
            next(search(bad))


def test_confidence_of_a_deterministic_search():
    c = confidence([(1, 1), (1, 0), (1, 1)], runs=1)
    assert c.value is None and "--runs" in c.text
    c = confidence([(3, 3), (3, 0), (3, 3)], runs=3)
    assert c.value == 1.0


def test_confidence_of_a_flaky_failure():
    # Fails 1 run in 3 where it fails; 5 passing verdicts at 3 runs each.
    steps = [(3, 1), (3, 0), (3, 1), (3, 0), (3, 0), (3, 1), (3, 0), (3, 0)]
    c = confidence(steps, runs=3)
    miss = (2 / 3) ** 3
    assert c.value == pytest.approx((1 - miss) ** 5)
    assert c.flaky_steps == (0, 2, 5)
    assert c.runs_for_95 is not None and c.runs_for_95 > 3
    # The suggested number of runs does reach 95%.
    assert (1 - (2 / 3) ** c.runs_for_95) ** 5 >= 0.95
    assert (1 - (2 / 3) ** (c.runs_for_95 - 1)) ** 5 < 0.95


def test_confidence_without_any_failure():
    c = confidence([(3, 0)], runs=3)
    assert c.value is None and "no failure" in c.text
