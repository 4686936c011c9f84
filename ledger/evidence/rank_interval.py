"""The Hodges-Lehmann estimate and the Wilcoxon signed-rank confidence interval of paired
differences: the paired interval one slow run cannot drag along as far as it drags a mean.

Pure: numbers in, numbers out; numpy is imported inside the functions.

Derivation.  Let ``d_1 … d_n`` be the within-pair differences (here the log-ratios
``log(b_i / a_i)``), assumed independent and symmetric about an unknown shift ``θ``.  The
*Walsh averages* are ``(d_i + d_j) / 2`` for ``i <= j``: ``M = n(n+1)/2`` of them.  Tukey's
identity: the Wilcoxon signed-rank statistic ``T+`` of ``d - θ`` (the sum of the ranks of
``|d_i - θ|`` over the positive ``d_i - θ``) equals the number of Walsh averages above ``θ``.
Under ``θ`` the true shift, each sign is a fair coin, so ``T+`` is distributed as the sum
of a random subset of ``{1, …, n}``: symmetric on ``0 … M``, with ``P(T+ = t) = c_n(t) /
2^n`` where ``c_n(t)`` counts the subsets summing to ``t`` (``c_n(t) = c_{n-1}(t) +
c_{n-1}(t - n)``).  Let ``k`` be the largest integer with ``P(T+ <= k - 1) <= α/2``.  Then
``θ`` lies below the ``k``-th smallest Walsh average ``W_(k)`` exactly when ``T+(θ) >=
M - k + 1``, of probability ``P(T+ <= k - 1)``, and symmetrically above ``W_(M+1-k)``, so

    ``[W_(k), W_(M+1-k)]`` covers ``θ`` with probability ``1 - 2 P(T+ <= k - 1) >= 1 - α``,

and the Hodges-Lehmann estimate is the median of the Walsh averages (the ``θ`` that makes
``T+`` balance at ``M/2``).  When even ``k = 1`` is too wide a net -- ``2 / 2^n > α``, i.e.
fewer than 6 pairs at 95% -- no interval exists at that confidence and
:func:`signed_rank_interval` returns None (the caller falls back to the t interval).

The table ends at :data:`EXACT_MAX_N` = 50 pairs (scipy's own cut-off for the exact
signed-rank distribution): up to it ``k`` comes from the exact counts ``c_n`` (integers,
so the same pairs always give the same bounds); above it from the normal approximation
with continuity correction, ``T+ ~ N(M/2, n(n+1)(2n+1)/24)``, so ``k = floor(M/2 + 1/2 -
z_{1-α/2} σ)``; at 50 pairs the two agree to within one Walsh average.  Ties among the
``|d_i|`` make the exact level approximate (the bounds are still Walsh averages); a
bench's continuous throughputs seldom tie.

Robustness, said exactly: the bounds are order statistics of the Walsh averages, and the
``n`` Walsh averages that involve one pair are the only ones it moves.  So once ``k > n``
(12 pairs and more at 95%), one outlier pair, however far out, cannot carry a bound past
the other pairs' own Walsh averages: moving it from +20% to +200% leaves the interval
where it was, while the t interval grows with it.  With fewer pairs (``k <= n``: 8 pairs
at 95% have ``k = 4``) the far bound still moves by about half the outlier's distance:
a lone slow run in 8 pairs is better answered by more pairs (``ledger ab
--until-decided``) than by any interval of 8.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

EXACT_MAX_N = 50  # pairs up to which the exact signed-rank distribution is used


@lru_cache(maxsize=None)
def _cumulative_counts(n: int) -> tuple[int, ...]:
    """``C[t]`` = the number of subsets of ``{1..n}`` whose sum is ``<= t``, t = 0 … M."""
    counts = [1]
    for m in range(1, n + 1):
        grown = counts + [0] * m
        for t in range(m, len(grown)):
            grown[t] += counts[t - m]
        counts = grown
    out, running = [], 0
    for c in counts:
        running += c
        out.append(running)
    return tuple(out)


def critical_k(n: int, alpha: float) -> int | None:
    """The order ``k`` of the interval's lower bound ``W_(k)`` (1-based) at two-sided level
    ``alpha`` for ``n`` pairs, or None when no interval exists at that level."""
    if n < 1:
        return None
    m = n * (n + 1) // 2
    if n <= EXACT_MAX_N:
        cum, total = _cumulative_counts(n), 2 ** n
        k = 0
        # P(T+ <= k) <= alpha / 2, compared in integers scaled by 2^n (no rounding).
        while k < m and cum[k] * 2 <= alpha * total * (1 + 1e-12):
            k += 1
        return k or None
    from scipy import stats

    sigma = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    k = math.floor(m / 2 + 0.5 - float(stats.norm.ppf(1 - alpha / 2)) * sigma)
    return k if k >= 1 else None


def walsh_averages(d: Any) -> Any:
    """The ``n(n+1)/2`` averages ``(d_i + d_j) / 2``, ``i <= j``, sorted."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def signed_rank_interval(d: Any, confidence: float) -> dict[str, Any] | None:
    """``{"est", "lo", "hi", "k"}``: the Hodges-Lehmann estimate of ``d``'s centre and its
    signed-rank interval at ``confidence`` (derivation in the module docs); None when
    ``d`` has too few values for an interval at that confidence."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    k = critical_k(int(d.size), 1.0 - confidence)
    if k is None:
        return None
    w = walsh_averages(d)
    return {"est": float(np.median(w)), "lo": float(w[k - 1]), "hi": float(w[w.size - k]),
            "k": k}


def min_pairs(confidence: float) -> int:
    """The fewest pairs for which a signed-rank interval exists at ``confidence``."""
    n = 1
    while critical_k(n, 1.0 - confidence) is None:
        n += 1
    return n


def robust_sd(d: Any) -> float:
    """The spread of one pair's difference, read so that an outlier pair does not set it:
    1.4826 x the median absolute deviation (the standard deviation for normal data), or the
    plain standard deviation where more than half the values coincide."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    if d.size < 2:
        return 0.0
    mad = float(np.median(np.abs(d - np.median(d))))
    return 1.4826 * mad if mad > 0 else float(d.std(ddof=1))


__all__ = ["EXACT_MAX_N", "critical_k", "min_pairs", "robust_sd", "signed_rank_interval",
           "walsh_averages"]
