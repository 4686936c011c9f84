"""Names close to a mistyped one, for a "did you mean": pure, no files.

A knob, flag, target, id or slug typed wrong is most often a dropped or swapped
character, a case slip (``engine_num_pages``) or ``-`` for ``_``; difflib's ratio over
the lowered, ``-``/``_``-folded forms catches all three.  The shown form is the known
one, as the file or the ledger spells it.
"""

from __future__ import annotations

import difflib
from typing import Iterable


def _folded(name: str) -> str:
    return name.lower().replace("-", "_")


def close_names(typed: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``known`` names closest to ``typed``, best first; ``typed`` itself excluded.
    Only those as close as the best one (within 0.05 of its ratio): a typo has one
    intended name, and a list of every name sharing a prefix would bury it."""
    by_fold: dict[str, str] = {}
    for name in known:
        if name != typed:
            by_fold.setdefault(_folded(name), name)
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(_folded(typed))
    scored = []
    for fold, name in by_fold.items():
        matcher.set_seq1(fold)
        ratio = matcher.ratio()
        if ratio >= cutoff:
            scored.append((-ratio, fold, name))
    scored.sort()
    best = -scored[0][0] if scored else 0.0
    return [name for ratio, _, name in scored if -ratio >= best - 0.05][:n]


__all__ = ["close_names"]
