"""remedy.spares.hot: a hot spare is held only while what it saves per hour beats its idle node."""

from __future__ import annotations

import pytest

from remedy.elastic import Elasticity
from remedy.spares.hot import size_hot_pool

MTBF = 47 * 24.0  # seed 000: an 8-GPU node fails every ≈ 47 days


def test_a_small_elastic_job_that_restarts_fast_holds_no_hot_spare():
    """16 nodes: a failure every ≈ 70 h; a swap saves 11 node-min over shrinking: 0.16 node-min/h for 60."""
    s = size_hot_pool(Elasticity(16, (12, 16), restart_minutes=1.0), MTBF, most=4, ready_warm=2)
    assert s.target == 0 and s.saving_per_failure == pytest.approx(35 - 24)
    assert s.rows[0][1] < s.rows[0][2]
    assert "hold 0 hot spare(s)" in s.explain()


def test_a_large_fixed_size_job_with_cold_reloads_holds_two():
    """1,000 nodes (8,000 GPUs), no elastic range: a swap saves 3.5 min × 1,000 nodes per failure, ≈ 0.9 failures/h."""
    s = size_hot_pool(Elasticity(1000, None), MTBF, most=3, ready_warm=5)
    assert s.saving_per_failure == pytest.approx(1000 * (4 + 31) - 1000 * (0.5 + 31))
    assert s.failures_per_hour == pytest.approx(1000 / MTBF)
    # the second is used when a failure lands within the 4-min refill after another (P ≈ 5.7 %): still worth it at
    # 3,500 node-min a swap; the third needs two such (P ≈ 0.17 %): not
    assert s.target == 2
    assert s.rows[2][1] < 60 < s.rows[1][1] < s.rows[0][1]


def test_the_kth_spare_pays_only_when_failures_bunch_within_a_refill():
    fast_fail = size_hot_pool(Elasticity(1000, None, join_minutes=240.0), 10.0, most=5, ready_warm=5)
    assert fast_fail.target >= 2
    benefits = [b for _, b, _ in fast_fail.rows]
    assert benefits == sorted(benefits, reverse=True)  # each further spare is used less often


def test_never_more_than_configured_or_ready():
    assert size_hot_pool(Elasticity(1000, None), MTBF, most=0, ready_warm=5).target == 0
    s = size_hot_pool(Elasticity(1000, None, join_minutes=240.0), 10.0, most=5, ready_warm=1)
    assert s.most == 1 and s.target == 1
