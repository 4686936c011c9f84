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


def close_matches(typed: str, known: dict[str, str], n: int = 3) -> list[str]:
    """The shown forms of the ``known`` names closest to ``typed`` (a typo, a case slip),
    best first, for a "did you mean"."""
    lowered = {k.lower(): k for k in known}
    found = difflib.get_close_matches(typed.lower(), list(lowered), n=n, cutoff=0.6)
    return list(dict.fromkeys(known[lowered[f]] for f in found))


def close_slug_parts(typed: str, entries, n: int = 3) -> list[str]:
    """Entries whose slug holds a run of words close to ``typed``: an operator types the
    part of a slug they remember (``targte-ctas`` for ``decode-target-ctas-2``), which is
    too short against the whole slug for :func:`close_matches`.  ``entries``: anything
    with a ``slug`` and an ``id``."""
    want = typed.lower().replace("_", "-")
    parts = want.count("-") + 1
    scored = []
    for e in entries:
        words = e.slug.split("-")
        runs = ["-".join(words[i:i + parts]) for i in range(max(len(words) - parts + 1, 1))]
        best = max(difflib.SequenceMatcher(None, want, r).ratio() for r in runs)
        if best >= 0.75:
            scored.append((-best, e.slug, f"{e.slug} ({e.id})"))
    return [shown for *_, shown in sorted(scored)][:n]


__all__ = ["close_matches", "close_names", "close_slug_parts"]
