"""The analytic model against seed 000's worked example and Meta's MTBF figures."""

from __future__ import annotations

import math

import pytest

from remedy.domain.durations import parse_duration
from remedy.goodput.model import (
    goodput,
    mtbf_hours_for_gpus,
    optimal_checkpoint_interval_minutes,
    published_percent,
)


def test_seed000_manual_remediation_is_81_percent():
    b = goodput(mtbf_hours=8, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1, remediation_minutes=60)
    assert b.failures_per_period == pytest.approx(3.0)
    assert b.checkpoint_minutes == pytest.approx(48.0)  # "48 checkpoints ... 48 minutes total"
    assert b.failure_loss_minutes == pytest.approx(45.0)  # "Three failures means 45 minutes lost"
    assert b.queue_wait_minutes == pytest.approx(180.0)  # "180 minutes in queue wait"
    assert b.queue_wait == pytest.approx(0.125)  # "about 12.5% of the period"
    assert b.lost_minutes == pytest.approx(273.0)  # "273 minutes, or 19% of time"
    assert round(b.lost_fraction * 100) == 19
    assert published_percent(b.goodput) == 81


def test_seed000_automatic_remediation_is_92_percent():
    b = goodput(mtbf_hours=8, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1, remediation_minutes=5)
    assert b.queue_wait_minutes == pytest.approx(15.0)  # "drops from 180 minutes to just 15 minutes"
    assert b.lost_minutes == pytest.approx(108.0)  # "just 108 minutes"
    assert b.goodput == pytest.approx(0.925)
    assert published_percent(b.goodput) == 92  # the article truncates 92.5 % to "92%"


def test_seed000_ten_hour_mtbf_with_optimal_interval_is_93_percent():
    interval = optimal_checkpoint_interval_minutes(1.0, 10.0)
    assert round(interval) == 35  # "The optimal checkpoint interval changes to 35 minutes"
    b = goodput(mtbf_hours=10, checkpoint_interval_minutes=round(interval), checkpoint_cost_minutes=1,
                remediation_minutes=5)
    assert published_percent(b.goodput) == 93
    # Young/Daly at 8 h gives 31 min: the article's "30" is the same optimum, rounded for prose.
    assert optimal_checkpoint_interval_minutes(1.0, 8.0) == pytest.approx(math.sqrt(2 * 480), rel=1e-12)


def test_published_percent_truncates():
    assert published_percent(0.925) == 92
    assert published_percent(0.8104) == 81
    assert published_percent(0.99999) == 99
    assert published_percent(1.0) == 100


def test_restart_loading_adds_to_failure_loss():
    base = goodput(mtbf_hours=56.2, checkpoint_interval_minutes=133.5, checkpoint_cost_minutes=0.3, remediation_minutes=5)
    loaded = goodput(mtbf_hours=56.2, checkpoint_interval_minutes=133.5, checkpoint_cost_minutes=0.3,
                     remediation_minutes=5, restart_loading_minutes=31)
    per_day = 24 / 56.2
    assert loaded.failure_loss_minutes - base.failure_loss_minutes == pytest.approx(per_day * 31)
    assert loaded.goodput < base.goodput


def test_efficiency_scales_goodput_and_loss_is_capped():
    b = goodput(mtbf_hours=8, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1, remediation_minutes=60,
                efficiency=0.5)
    assert b.goodput == pytest.approx(0.8104166666 * 0.5)
    worst = goodput(mtbf_hours=0.1, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1,
                    remediation_minutes=600)
    assert worst.goodput == 0.0


def test_meta_mtbf_points_and_interpolation():
    assert mtbf_hours_for_gpus(8) == pytest.approx(47 * 24)
    assert mtbf_hours_for_gpus(1024) == pytest.approx(8.0)
    assert mtbf_hours_for_gpus(16384) == pytest.approx(1.8)
    assert 8.0 < mtbf_hours_for_gpus(1000) < 8.5  # seed 000 calls 1,000 GPUs "a failure every 8 hours"
    sizes = [8, 64, 504, 1000, 1024, 4096, 16384, 100_000]
    mtbfs = [mtbf_hours_for_gpus(n) for n in sizes]
    assert all(a > b for a, b in zip(mtbfs, mtbfs[1:]))
    # log-log: the midpoint in log(GPUs) lands on the geometric mean of the neighbours' MTBF
    mid = int(round(math.sqrt(1024 * 16384)))
    assert mtbf_hours_for_gpus(mid) == pytest.approx(math.sqrt(8.0 * 1.8), rel=1e-3)


@pytest.mark.parametrize("text,seconds", [("8h", 28800), ("30m", 1800), ("45s", 45), ("1.5h", 5400), ("2d", 172800),
                                          ("30", 1800)])
def test_parse_duration(text, seconds):
    assert parse_duration(text, default_unit="m") == pytest.approx(seconds)  # the goodput CLI's bare minutes


@pytest.mark.parametrize("bad", ["", "8x", "h8", "-5m", "ten minutes"])
def test_parse_duration_rejects_with_the_input_named(bad):
    with pytest.raises(ValueError, match="cannot read"):
        parse_duration(bad, what="--mtbf", default_unit="m")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(mtbf_hours=0), "mtbf_hours must be a positive"),
        (dict(checkpoint_interval_minutes=-1), "checkpoint_interval_minutes"),
        (dict(checkpoint_cost_minutes=30), "must be shorter than the interval"),
        (dict(remediation_minutes=float("nan")), "remediation_minutes"),
        (dict(efficiency=1.5), "efficiency"),
    ],
)
def test_bad_inputs_say_what_is_wrong(kwargs, match):
    args = dict(mtbf_hours=8, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1, remediation_minutes=60)
    with pytest.raises(ValueError, match=match):
        goodput(**(args | kwargs))


@pytest.mark.parametrize("gpus", [0, -8, 2.5, True])
def test_gpu_count_must_be_a_positive_whole_number(gpus):
    with pytest.raises(ValueError, match="gpus must be a positive whole number"):
        mtbf_hours_for_gpus(gpus)
