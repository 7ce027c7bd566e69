"""remedy.elastic: hot swap vs shrink-and-continue vs stop-and-replace by expected cost; the job's contract."""

from __future__ import annotations

import pytest

from remedy.elastic import (
    CHECKPOINT_ON_FAILURE,
    CHECKPOINT_ON_FAILURE_WAIT,
    ELASTIC_RESTART,
    FULL_SIZE,
    MAX_CHECKPOINT_WAIT_SECONDS,
    Continuation,
    Elasticity,
    checkpoint_on_failure,
    choose_continuation,
    full_size_to_note,
    grow_back_to,
    parse_elastic_nodes,
    restart_minutes,
)


def test_a_job_that_restarts_fast_continues_one_node_short():
    """16 nodes, 1-min elastic restart, a warm spare joining in 4 min: 16 + 3 + 16 = 35 node-min against
    16 × (4 + 31) = 560 for stopping the gang."""
    c = choose_continuation(Elasticity(desired=16, elastic=(12, 16), restart_minutes=1.0))
    assert c.choice is Continuation.SHRINK
    assert c.costs[Continuation.SHRINK] == pytest.approx(35.0)
    assert c.costs[Continuation.STOP_AND_REPLACE] == pytest.approx(560.0)
    assert (c.shrink_to, c.grow_to, c.hot_spare) == (15, 16, None)
    assert c.shrinks and "shrink" in c.why


def test_a_cold_reload_on_every_restart_makes_shrinking_cost_more_than_waiting_for_a_warm_spare():
    """Two elastic restarts of 31 min each lose more than one 4-min wait: stop and replace."""
    c = choose_continuation(Elasticity(desired=16, elastic=(12, 16), restart_minutes=31.0))
    assert c.choice is Continuation.STOP_AND_REPLACE
    assert c.costs[Continuation.SHRINK] > c.costs[Continuation.STOP_AND_REPLACE]
    assert c.shrink_to is None


def test_with_no_warm_spare_the_repair_lead_time_makes_shrinking_pay_even_with_cold_reloads():
    c = choose_continuation(Elasticity(desired=16, elastic=(12, 16), spare_ready=False, restart_minutes=31.0))
    assert c.choice is Continuation.SHRINK
    # the gang would idle for the whole lead time
    assert c.costs[Continuation.STOP_AND_REPLACE] == pytest.approx(16 * (48 * 60 + 31))


def test_the_crossover_is_where_the_spare_join_outlasts_one_restart():
    """shrink − stop = (N − 1)(restart − join) when reload = restart: shrink wins exactly when join > restart."""
    # shrink − stop = N·r + (join − r) − N·join = (N − 1)(r − join) for join > r
    for join, expected in ((40.0, Continuation.SHRINK), (31.0, Continuation.STOP_AND_REPLACE),  # a tie: one restart
                           (20.0, Continuation.STOP_AND_REPLACE)):
        c = choose_continuation(Elasticity(desired=8, elastic=(4, 8), join_minutes=join, restart_minutes=31.0))
        assert c.choice is expected, (join, c.arithmetic)


def test_a_fixed_size_job_or_one_at_its_minimum_never_shrinks():
    fixed = choose_continuation(Elasticity(desired=16, elastic=None, restart_minutes=1.0, spare_ready=False))
    assert fixed.choice is Continuation.STOP_AND_REPLACE and "fixed size" in fixed.why
    at_min = choose_continuation(Elasticity(desired=12, elastic=(12, 16), restart_minutes=1.0, spare_ready=False))
    assert at_min.choice is Continuation.STOP_AND_REPLACE and "under the job's minimum 12" in at_min.why
    assert Continuation.SHRINK not in at_min.costs


def test_a_hot_spare_beats_both_and_names_the_node():
    c = choose_continuation(Elasticity(desired=16, elastic=(12, 16), hot_spares=("gpu017", "gpu018"),
                                       restart_minutes=1.0))
    assert c.choice is Continuation.HOT_SWAP and c.hot_spare == "gpu017"
    assert c.costs[Continuation.HOT_SWAP] == pytest.approx(16 * 1.5)
    assert not c.shrinks and c.shrink_to is None
    d = c.as_dict()
    assert d["choice"] == "hot-swap" and d["costs"]["shrink"] == 35.0 and len(d["arithmetic"]) == 3


def test_a_fixed_size_job_swaps_its_hot_spare_too():
    c = choose_continuation(Elasticity(desired=16, elastic=None, hot_spares=("gpu017",)))
    assert c.choice is Continuation.HOT_SWAP


@pytest.mark.parametrize("text,expected", [("12:16", (12, 16)), ("1:1", (1, 1)), ("16:12", None), ("0:4", None),
                                           ("x:4", None), ("16", None), (None, None), ("", None)])
def test_elastic_nodes_reads_torchruns_min_max(text, expected):
    assert parse_elastic_nodes(text) == expected


def test_restart_minutes_come_from_the_job_or_default_to_a_cold_reload():
    assert restart_minutes({ELASTIC_RESTART: "90"}, 31.0) == pytest.approx(1.5)
    for bad in ("-5", "0", "soon", "nan", "inf"):
        assert restart_minutes({ELASTIC_RESTART: bad}, 31.0) == 31.0, bad
    assert restart_minutes(None, 31.0) == 31.0


def test_checkpoint_on_failure_contract():
    assert not checkpoint_on_failure(None).asked
    declared = checkpoint_on_failure({CHECKPOINT_ON_FAILURE: "annotation"})
    assert declared.asked and declared.wait_seconds == 120.0 and declared.mode == "annotation"
    bounded = checkpoint_on_failure({CHECKPOINT_ON_FAILURE: "annotation", CHECKPOINT_ON_FAILURE_WAIT: "36000"})
    assert bounded.wait_seconds == MAX_CHECKPOINT_WAIT_SECONDS
    unknown = checkpoint_on_failure({CHECKPOINT_ON_FAILURE: "sigusr1"})
    assert not unknown.asked and "'sigusr1'" in unknown.why and "annotation" in unknown.why


def test_grow_back_to_the_noted_size_inside_the_range():
    assert grow_back_to({FULL_SIZE: "16"}, 15, (12, 16)) == 16
    # two failures, two shrinks: each spare that joins brings one node back; the second failure keeps the note
    assert full_size_to_note({FULL_SIZE: "16"}, 15) == 16 and full_size_to_note({}, 15) == 15
    assert grow_back_to({FULL_SIZE: "16"}, 14, (12, 16)) == 15
    assert grow_back_to({FULL_SIZE: "20"}, 15, (12, 16)) == 16  # never above the controller's maximum
    assert grow_back_to({FULL_SIZE: "16"}, 16, (12, 16)) is None  # grown already
    assert grow_back_to({}, 15, (12, 16)) is None
    assert grow_back_to({FULL_SIZE: "many"}, 15, None) is None
