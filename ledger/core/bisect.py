"""The search behind `ledger bisect`: which selected entries make a check fail.  Pure.

No files, no clock, no processes: :func:`search` is a generator that yields the
configuration to try next (a :class:`Probe`: which of the selected entries are applied,
the rest of the selection reverted, every other entry as it is) and receives whether the
check failed there (``True`` = bad).  Its return value is the :class:`Conclusion`.  The
driver (``ledger.commands.bisect``) applies each probe through the transactional path
and runs the check; tests drive the same generator with synthetic oracles
(:func:`solve`).  The search is deterministic: the same answers give the same probes.

The model
    Ledger entries are independent toggles, not a linear history, so the question is
    which entries must be *applied* for the failure to appear.  The search assumes the
    failure is monotone in the applied set (applying more entries never cures it) —
    what "this change causes that failure" means.

The steps
    1. *confirm*: everything selected applied.  Passes: **cannot reproduce**.
    2. *baseline*: everything selected reverted.  Fails: **not in these entries**
       (two checks, whatever the number of entries).
    3. *narrow* (adaptive group testing for one culprit): a binary search over prefixes
       of the selection, in record order, between a configuration known to pass (``M``
       plus a prefix) and one known to fail.  It ends at the entry ``x`` whose addition
       turns the check from passing to failing: ``x`` is necessary.  Every answer is
       kept verified at both ends, so no step rests on an untested inference.
    4. *alone*: ``M + x`` with the rest of the selection reverted.  Fails: done —
       **one culprit** when ``M`` was empty.  Passes: ``x`` needs company; the search
       keeps ``x`` and narrows again over the entries before it (the ddmin-style
       reduction for interacting sets), until the set found fails on its own: **a
       minimal set that fails only together** (1-minimal: dropping any one member
       passes, by monotonicity from a tested passing superset, see
       :func:`minimality_evidence`).

    When the narrowing is down to two candidates ``a``, ``b`` (``M`` + the entries
    before ``a`` passing, + ``a`` + ``b`` failing), ``M + a`` and then ``M + b`` are tried
    first: a failure there names the member *and* verifies the set in one check; only
    when both pass (the member needs company) does one more narrowing check decide.

    Cost: the two first checks, then ``ceil(log2 n)`` per member found plus at most one
    check of the set so far.  One culprit among 32: 7 checks for half the positions,
    8 for the other half (mean 7.5); a pair among 32: at most 15 (mean 13.9); "not in
    these entries": 2.  Seven for *every* position is not reachable without an
    unverified inference: a leaf concluding "culprit x" must hold a failing check of
    ``x`` alone; two sibling leaves of the last check cannot both have one (the passing
    side's failing singleton would be on the shared path, concluding earlier), so a
    tree of 32 verified leaves has depth ``log2 n + 1``.  ``benchmarks/bisect_cost.py``
    prints the counts.

Flaky checks
    With ``--runs N`` a configuration is bad when any of its N runs fails.  Failing
    verdicts are certain (a failure was seen); a passing verdict can hide a flaky
    failure.  :func:`confidence` estimates the failure rate from the failing
    configurations' runs and says how likely it is that no passing verdict hid one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

KINDS = ("culprit", "interaction", "not-in-entries", "cannot-reproduce")
PURPOSES = ("confirm", "baseline", "narrow", "alone", "together")


@dataclass(frozen=True)
class Probe:
    """One configuration to check: ``applied`` selected entries, the rest reverted."""

    applied: frozenset[str]
    purpose: str

    def __post_init__(self) -> None:
        if self.purpose not in PURPOSES:
            raise ValueError(f"unknown probe purpose {self.purpose!r}")


@dataclass(frozen=True)
class Conclusion:
    """What the search found, and the probes (by index) that show it."""

    kind: str
    entries: tuple[str, ...] = ()
    evidence: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown conclusion {self.kind!r}")


Search = Generator[Probe, bool, Conclusion]


def search(universe: Sequence[str]) -> Search:
    """Find the entries of ``universe`` (ids, in record order) that make the check fail.

    Yields :class:`Probe` s, receives ``True`` when the check failed there, returns the
    :class:`Conclusion`.  ``universe`` must be non-empty and free of repeats.
    """
    order = tuple(universe)
    if not order or len(set(order)) != len(order):
        raise ValueError("the selection must be non-empty and without repeats")
    asked: list[tuple[frozenset[str], bool]] = []

    def ask(applied: Iterable[str], purpose: str):
        applied = frozenset(applied)
        for known, bad in asked:  # never run the same configuration twice
            if known == applied:
                return bad
        bad = yield Probe(applied, purpose)
        asked.append((applied, bool(bad)))
        return bool(bad)

    if not (yield from ask(order, "confirm")):
        return Conclusion("cannot-reproduce", (), (0,))
    if (yield from ask((), "baseline")):
        return Conclusion("not-in-entries", order, (0, 1))
    found: list[str] = []  # members of the failing set, latest-in-order first
    pool = list(order)     # invariant: found + pool fails, found alone passes
    while True:
        low, high = 0, len(pool)  # found + pool[:low] passes, found + pool[:high] fails
        while high - low > 2:
            mid = (low + high) // 2
            if (yield from ask([*found, *pool[:mid]], "narrow")):
                high = mid
            else:
                low = mid
        alone = "alone" if not found else "together"
        if high - low == 2:
            # Two candidates left: try each with ``found`` alone first — a failure there
            # both names the member and verifies the set, one check sooner.
            a, b = pool[low], pool[low + 1]
            for x in (a, b):
                if (yield from ask([*found, x], alone)):
                    members = tuple(e for e in order if e in (*found, x))
                    kind = "culprit" if len(members) == 1 else "interaction"
                    return Conclusion(kind, members, _proof(frozenset(members), asked))
            if (yield from ask([*found, *pool[:low], a], "narrow")):
                high = low + 1
            else:
                low += 1
        found.append(pool[high - 1])
        pool = pool[: high - 1]
        if (yield from ask(found, "alone" if len(found) == 1 else "together")):
            break
    members = tuple(e for e in order if e in found)
    kind = "culprit" if len(members) == 1 else "interaction"
    return Conclusion(kind, members, _proof(frozenset(members), asked))


def _proof(members: frozenset[str], asked: Sequence[tuple[frozenset[str], bool]]) -> tuple[int, ...]:
    """The probes that show ``members`` fails and no member can be dropped."""
    fails = next(i for i, (s, bad) in enumerate(asked) if bad and s == members)
    keep = {fails}
    for i in minimality_evidence(members, asked).values():
        keep.add(i)
    if len(members) == 1:
        keep.add(1)  # the baseline: without it, nothing passes
    return tuple(sorted(keep))


def minimality_evidence(
    members: frozenset[str], asked: Sequence[tuple[frozenset[str], bool]]
) -> dict[str, int]:
    """For each member, a passing probe that contains every *other* member.

    By monotonicity such a probe shows that dropping that member passes.  Members
    without one are absent from the result (the search guarantees there are none).
    """
    out: dict[str, int] = {}
    for m in sorted(members):
        rest = members - {m}
        for i, (applied, bad) in enumerate(asked):
            if not bad and rest <= applied and m not in applied:
                out[m] = i
                break
    return out


def solve(universe: Sequence[str], fails: Callable[[frozenset[str]], bool]
          ) -> tuple[Conclusion, list[Probe]]:
    """Run :func:`search` against an oracle; return the conclusion and the probes asked."""
    probes: list[Probe] = []
    gen = search(universe)
    probe = next(gen)
    while True:
        probes.append(probe)
        try:
            probe = gen.send(fails(probe.applied))
        except StopIteration as stop:
            return stop.value, probes


@dataclass(frozen=True)
class Confidence:
    """How sure a conclusion is, given N runs per configuration.

    ``value`` is None when it cannot be estimated (one run per check and no flaky
    behaviour seen, or no failure seen at all); ``text`` says so in words.
    """

    value: float | None
    failure_rate: float | None
    passing_verdicts: int
    runs: int
    text: str
    runs_for_95: int | None = None
    flaky_steps: tuple[int, ...] = field(default_factory=tuple)


def confidence(steps: Sequence[tuple[int, int]], runs: int) -> Confidence:
    """Confidence from each step's ``(runs made, runs failed)``.

    Failing verdicts are certain.  The failure rate ``p`` is estimated over the runs of
    the failing configurations; a passing verdict hides a failure with probability
    ``(1-p)^N``; the conclusion holds if none did: ``(1 - (1-p)^N)^passing``.
    """
    bad = [(n, f) for n, f in steps if f > 0]
    passing = sum(1 for _, f in steps if f == 0)
    flaky = tuple(i for i, (n, f) in enumerate(steps) if 0 < f < n)
    if not bad:
        return Confidence(None, None, passing, runs,
                          f"no failure seen in {runs} run{'s' if runs != 1 else ''} per check",
                          flaky_steps=flaky)
    made = sum(n for n, _ in bad)
    p = sum(f for _, f in bad) / made
    if p >= 1.0 or passing == 0:
        what = ("every run of a failing configuration failed" if p >= 1.0
                else "the conclusion rests on failing checks only")
        return Confidence(1.0 if runs > 1 or passing == 0 else None, p, passing, runs,
                          what if runs > 1 or passing == 0 else
                          f"{what}; one run per check cannot show a flaky failure "
                          "(use --runs N)", flaky_steps=flaky)
    miss = (1 - p) ** runs
    value = (1 - miss) ** passing
    need = _runs_for(0.95, p, passing)
    text = (f"{value:.0%}: failing configurations failed in {p:.0%} of their runs; each of "
            f"{passing} passing verdict{'s' if passing != 1 else ''} could hide a failure "
            f"with probability {miss:.2f} at {runs} run{'s' if runs != 1 else ''} per check")
    if value < 0.95:
        text += f" (--runs {need} for 95%)"
    return Confidence(value, p, passing, runs, text, need, flaky)


def _runs_for(target: float, p: float, passing: int) -> int:
    """The smallest N with (1 - (1-p)^N)^passing >= target."""
    per_verdict = target ** (1 / max(passing, 1))
    return max(1, math.ceil(math.log(1 - per_verdict) / math.log(1 - p)))


def max_checks(n: int) -> int:
    """An upper bound of the checks :func:`search` makes for one culprit among ``n``."""
    return 2 + max(1, math.ceil(math.log2(n))) + 1 if n > 1 else 2


__all__ = [
    "KINDS",
    "Conclusion",
    "Confidence",
    "Probe",
    "confidence",
    "max_checks",
    "minimality_evidence",
    "search",
    "solve",
]
