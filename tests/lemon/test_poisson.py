"""Exact Poisson tail vs p-values worked out by hand."""

from __future__ import annotations

import math

import pytest

from remedy.lemon.poisson import poisson_pmf, poisson_sf


def test_small_tail_matches_hand_arithmetic() -> None:
    # P(X ≥ 3 | μ = 1) = 1 − e^−1·(1 + 1 + 1/2) = 1 − 2.5/e = 1 − 0.9196986029286058 = 0.0803013970713942
    assert poisson_sf(3, 1.0) == pytest.approx(0.0803013970713942, rel=1e-12)
    # P(X ≥ 1 | μ = 2) = 1 − e^−2 = 1 − 0.1353352832366127 = 0.8646647167633873
    assert poisson_sf(1, 2.0) == pytest.approx(0.8646647167633873, rel=1e-12)
    # P(X ≥ 2 | μ = 0.5) = 1 − e^−0.5·(1 + 0.5) = 1 − 1.5 × 0.6065306597126334 = 0.09020401043104986
    assert poisson_sf(2, 0.5) == pytest.approx(0.09020401043104986, rel=1e-12)


def test_lemon_sized_tail() -> None:
    # A node with 9 incidents where the fleet rate × its exposure expects 2:
    # P(X ≥ 9 | 2) = 1 − e^−2·Σ_{i=0..8} 2^i/i!
    #   Σ = 1 + 2 + 2 + 4/3 + 2/3 + 4/15 + 4/45 + 8/315 + 2/315 = 2327/315 = 7.387301587301587
    #   e^−2 × Σ = 0.1353352832366127 × 7.387301587301587 = 0.9997625527 → p = 2.3745e-4
    assert poisson_sf(9, 2.0) == pytest.approx(1 - math.exp(-2) * 2327 / 315, rel=1e-9)
    assert poisson_sf(9, 2.0) == pytest.approx(2.3745e-4, rel=1e-3)


def test_far_tail_does_not_cancel_to_zero() -> None:
    # P(X ≥ 30 | 1) ≈ e^−1/30! · (1 + 1/31 + 1/(31·32) + …) = 1.386e-33 · 1.0333… ; 1 − CDF would print 0.0.
    head = math.exp(-1) / math.factorial(30)
    assert poisson_sf(30, 1.0) == pytest.approx(head * (1 + 1 / 31 + 1 / (31 * 32) + 1 / (31 * 32 * 33)), rel=1e-5)
    assert poisson_sf(30, 1.0) > 0


def test_edges_and_bad_input() -> None:
    assert poisson_sf(0, 3.0) == 1.0
    assert poisson_sf(2, 0.0) == 0.0
    assert poisson_pmf(0, 0.0) == 1.0
    # Around the mean the 1 − CDF branch is used: P(X ≥ 50 | 50) = 1 − P(X ≤ 49 | 50) = 1 − 0.4812 (tables).
    assert poisson_sf(50, 50.0) == pytest.approx(0.5188, abs=1e-4)
    with pytest.raises(ValueError, match="mu must be"):
        poisson_sf(1, -1.0)
    with pytest.raises(ValueError, match="k must be an integer"):
        poisson_sf(1.5, 1.0)  # type: ignore[arg-type]
