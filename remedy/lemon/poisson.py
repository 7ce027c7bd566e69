"""Exact Poisson upper tail, so lemon scoring needs no scipy (not in the venv).

P(X ≥ k | μ) is summed upward from k in log space: it stays accurate for the tiny p-values a real
lemon produces (1 − CDF would cancel to 0 there).
"""

from __future__ import annotations

import math


def poisson_pmf(k: int, mu: float) -> float:
    """P(X = k) for X ~ Poisson(mu)."""
    if k < 0:
        return 0.0
    if mu == 0:
        return 1.0 if k == 0 else 0.0
    return math.exp(-mu + k * math.log(mu) - math.lgamma(k + 1))


def poisson_sf(k: int, mu: float) -> float:
    """One-sided p-value P(X ≥ k) for X ~ Poisson(mu): chance of seeing k or more incidents if the node were average."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"poisson_sf: k must be an integer count, got {k!r}")
    if not (mu >= 0) or math.isinf(mu):
        raise ValueError(f"poisson_sf: mu must be a finite rate ≥ 0, got {mu!r}")
    if k <= 0:
        return 1.0
    if mu == 0:
        return 0.0
    if k < mu:
        # Lower side is the short sum here; 1 − CDF is well-conditioned when the answer is not small.
        return max(0.0, 1.0 - sum(poisson_pmf(i, mu) for i in range(k)))
    term = poisson_pmf(k, mu)
    total, i = 0.0, k
    while term > 0.0:
        total += term
        i += 1
        term *= mu / i
        if term < total * 1e-17:
            break
    return min(1.0, total)
