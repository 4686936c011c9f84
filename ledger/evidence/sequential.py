"""``ledger ab --until-decided``: run pairs until the verdict is decided, with the chance of
a wrong verdict over all the looks held at 5%.

Pure: the stopping rule and its confidences; :mod:`ledger.evidence.runner` runs the pairs
and asks :meth:`Sequential.look` after each round (one pair at every load point).

Looks.  The first look is after ``first`` pairs (``--runs``, the minimum), then one after
every further pair up to ``last`` (``--max-runs``): ``L = last - first + 1`` looks
planned.  At each look the runs so far are judged exactly as a fixed A/B of that many
pairs is (:func:`ledger.evidence.stats.analyze`, paired) but at the look's own
confidence, and the A/B stops at the first look whose entry verdict is ``gain``,
``regression`` or ``neutral``.  At ``last`` it stops regardless: ``inconclusive``, with
the pairs the last interval says would settle it.

The error over looks.  A verdict is wrong only when the interval it rests on misses the
true effect (``gain``/``regression`` need the interval clear of the tolerance band,
``neutral`` inside it).  Looking again and again gives the noise more chances to make
one interval miss; by the union bound (Bonferroni, whatever the dependence between
looks) the chance that *any* look's interval misses is at most the sum of the looks'
alphas.  The spending rule: the last look gets ``alpha / 2`` (97.5%), each earlier look
an equal share of the other half, ``alpha / (2 (L - 1))``; one planned look gets the whole
``alpha`` (a fixed A/B).  Sum: ``alpha`` = 5%.  Why not ``alpha / L`` at every look (plain
Bonferroni): the A/Bs that run to the end are the close ones, and they should be judged
almost as a fixed A/B of that many pairs is (97.5% rather than, with 9 looks, 99.4%); an
early look is there to stop a clear effect early, which a strict level does not prevent
(in the spirit of Haybittle and Peto's interim boundaries).

A strict early look often asks for more than the signed-rank interval can give with few
pairs (at 99.7%, fewer than 10 pairs have none): that look then uses the t interval at
its confidence (:mod:`ledger.evidence.verdict`), so every look has an interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Mapping

from ledger.errors import EvidenceError
from ledger.evidence.verdict import CONFIDENCE

DECIDED = ("gain", "regression", "neutral")


def look_confidences(first: int, last: int, alpha: float = 1 - CONFIDENCE) -> dict[int, float]:
    """Each look's confidence by the pairs it is made after (spending rule in the module
    docs); their alphas add up to ``alpha``."""
    if first < 1 or last < first:
        raise EvidenceError(f"a sequential A/B looks from {first} to {last} pairs: the "
                            "maximum must be at least the minimum, and both at least 1")
    looks = last - first + 1
    if looks == 1:
        return {last: 1 - alpha}
    early = alpha / 2 / (looks - 1)
    return {n: 1 - (alpha / 2 if n == last else early) for n in range(first, last + 1)}


@dataclass
class Sequential:
    """The looks of one sequential A/B, and what the last one found.

    ``judge(rows, confidence)`` returns the analysis of the runs so far at that confidence
    (the caller binds the metric, tolerance and guards)."""

    first: int
    last: int
    judge: Any
    looks: int = 0
    pairs: int = 0
    analysis: dict[str, Any] | None = None
    confidences: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.confidences = look_confidences(self.first, self.last)

    def look(self, rows: list[Mapping[str, Any]], pairs: int) -> bool:
        """True when the A/B should stop after ``pairs`` pairs (a round at each load point)."""
        self.pairs = pairs
        if pairs < self.first:
            return False
        self.looks += 1
        self.analysis = self.judge(rows, self.confidences[pairs])
        return self.analysis["verdict"] in DECIDED or pairs >= self.last

    @property
    def confidence(self) -> float:
        """The confidence of the look that stopped it (the last made)."""
        return self.confidences.get(self.pairs, CONFIDENCE)

    def record(self) -> dict[str, Any]:
        """What the evidence keeps of it: ``{"pairs", "looks", "planned_looks", "stopped",
        "confidence", "min_pairs", "max_pairs"}``, ``stopped`` being ``decided`` or
        ``max_runs``."""
        decided = self.analysis is not None and self.analysis["verdict"] in DECIDED
        return {"pairs": self.pairs, "looks": self.looks,
                "planned_looks": len(self.confidences),
                "stopped": "decided" if decided else "max_runs",
                "confidence": self.confidence,
                "min_pairs": self.first, "max_pairs": self.last}


def sequential_said(record: Mapping[str, Any] | None) -> str:
    """The headline's words for a sequential A/B: ``decided after 9 pairs`` or ``not
    decided in 16 pairs (--max-runs)``; empty for a fixed one."""
    if not record:
        return ""
    n = record.get("pairs")
    if record.get("stopped") == "decided":
        return f"decided after {n} pairs"
    return f"not decided in {n} pairs (--max-runs)"


def rows_of_first_pairs(rows: list[Mapping[str, Any]], pairs: int) -> list[Mapping[str, Any]]:
    """The rows of the first ``pairs`` repeats: what a sequential A/B had seen at that look
    (:mod:`benchmarks.ab_stability` replays the looks on runs already made)."""
    return [r for r in rows if int(r["repeat"]) < pairs]


def replay(rows: list[Mapping[str, Any]], first: int, last: int, judge: Any) -> Sequential:
    """The looks a sequential A/B would have made on ``rows`` (runs of ``last`` pairs or
    more, in the order ``ledger ab`` runs them), stopping where it would have stopped."""
    seq = Sequential(first, last, judge)
    for n in range(1, last + 1):
        if seq.look(rows_of_first_pairs(rows, n), n):
            break
    return seq


__all__ = ["DECIDED", "Sequential", "look_confidences", "replay", "rows_of_first_pairs",
           "sequential_said"]
