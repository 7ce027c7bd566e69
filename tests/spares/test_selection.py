"""Spare selection: matching model, freshness, lemons, correlated failures, deterministic ties, NoSpare."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Node, NodeState, Topology
from remedy.settings.safety import SpareSettings
from remedy.spares.selection import NoSpare, SpareCandidate, SpareChoice, select_spare

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def node(name, rack, model="H100", state=NodeState.SPARE, **kw) -> Node:
    return Node(name, gpu_model=model, gpu_count=8, topology=Topology(rack=rack, switch=f"sw-{rack}", pdu=f"pdu-{rack}"), state=state, **kw)


FAILED = node("gpu-3-1", "r3", state=NodeState.ACTIVE)


def cand(name, rack, hours_ago: float | None = 1.0, **kw) -> SpareCandidate:
    return SpareCandidate(node(name, rack, **kw), None if hours_ago is None else NOW - hours_ago * H)


def test_freshest_matching_spare_wins_then_name():
    pool = [cand("s-b", "r5", 2.0), cand("s-a", "r6", 2.0), cand("s-c", "r7", 1.0)]
    choice = select_spare(FAILED, pool, NOW)
    assert isinstance(choice, SpareChoice)
    assert choice.name == "s-c" and not choice.needs_validation
    assert choice.ranked == ("s-c", "s-a", "s-b")  # equal freshness: name decides
    assert "validated 1 h ago (within the 72-h freshness window)" in choice.explain()


def test_correlated_failure_prefers_another_rack_even_if_less_fresh():
    pool = [cand("s-same-rack", "r3", 0.5), cand("s-far", "r9", 10.0)]
    assert select_spare(FAILED, pool, NOW, correlated=False).name == "s-same-rack"
    choice = select_spare(FAILED, pool, NOW, correlated=True)
    assert choice.name == "s-far"
    assert "different rack, switch and PDU" in choice.explain()
    # if the only usable spare shares the rack, it is still used, and the explanation says so
    only = select_spare(FAILED, [pool[0]], NOW, correlated=True)
    assert only.name == "s-same-rack" and "shares rack r3, switch sw-r3, pdu pdu-r3" in only.explain()


def test_stale_spare_needs_validation_and_is_usable_only_when_allowed():
    stale = cand("s-old", "r5", 100.0)  # 100 h > 72 h window
    out = select_spare(FAILED, [stale], NOW)
    assert isinstance(out, NoSpare)
    assert "needs validation: validated 4.2 d ago, outside the 72-h freshness window" in out.explain()
    ok = select_spare(FAILED, [stale], NOW, allow_validate_on_promote=True)
    assert ok.name == "s-old" and ok.needs_validation
    # a fresh one is preferred over a stale one even when the caller allows validation
    both = select_spare(FAILED, [stale, cand("s-new", "r6", 80.0, )], NOW, SpareSettings(validation_freshness_hours=90), allow_validate_on_promote=True)
    assert both.name == "s-new" and not both.needs_validation
    never = select_spare(FAILED, [cand("s-never", "r5", None)], NOW, allow_validate_on_promote=True)
    assert never.needs_validation and "never validated" in never.explain()


def test_lemon_wrong_model_and_non_spares_are_excluded_with_reasons():
    pool = [
        cand("s-lemon", "r5"),
        cand("s-b200", "r5", model="B200"),
        cand("s-active", "r5", state=NodeState.ACTIVE),
        cand("s-notready", "r5", ready=False),
        cand("s-good", "r8", 30.0),
    ]
    choice = select_spare(FAILED, pool, NOW, lemons={"s-lemon"})
    assert choice.name == "s-good"
    reasons = {r.name: r.reason for r in choice.rejected}
    assert reasons == {
        "s-lemon": "it is a lemon candidate",
        "s-b200": "it has B200, the failed node has H100",
        "s-active": "it is active, not a spare",
        "s-notready": "it is NotReady",
    }


def test_no_spare_lists_every_reason():
    out = select_spare(FAILED, [cand("s-lemon", "r5"), cand("s-b200", "r5", model="B200")], NOW, lemons=["s-lemon"])
    assert isinstance(out, NoSpare)
    assert out.reason == "none of the 2 ready spare(s) may take its place: 1 a lemon candidate, 1 another GPU model"
    assert out.explain().splitlines() == [
        "no spare: none of the 2 ready spare(s) may take its place: 1 a lemon candidate, 1 another GPU model",
        "not s-lemon: it is a lemon candidate",
        "not s-b200: it has B200, the failed node has H100",
    ]
    assert select_spare(FAILED, [], NOW).reason == "there is no ready spare in the pool"


def test_no_spare_says_when_none_is_validated():
    never = [cand("s-a", "r5", None), cand("s-b", "r6", None)]
    out = select_spare(FAILED, never, NOW)
    assert isinstance(out, NoSpare)
    assert out.reason == "none of the 2 ready spare(s) is validated (validate-on-promote is off)"


def test_the_reserve_counts_only_validated_spares():
    from remedy.spares.selection import validated_for_work

    s = SpareSettings(validation_freshness_hours=72)
    assert validated_for_work(NOW - timedelta(hours=1), NOW, s)
    assert not validated_for_work(None, NOW, s), "never validated: no reserve to rely on"
    assert not validated_for_work(NOW - timedelta(hours=100), NOW, s), "stale, and validate-on-promote is off"
    assert validated_for_work(NOW - timedelta(hours=100), NOW, SpareSettings(validate_on_promote=True))


def test_bad_inputs():
    with pytest.raises(ValueError, match="no GPU model label"):
        select_spare(Node("x"), [], NOW)
    with pytest.raises(ValueError, match="listed twice: s-a"):
        select_spare(FAILED, [cand("s-a", "r1"), cand("s-a", "r2")], NOW)
    with pytest.raises(ValueError, match="timezone-aware"):
        select_spare(FAILED, [SpareCandidate(node("s", "r1"), datetime(2026, 1, 1))], NOW)


def test_recently_fixed_spare_is_used_after_clean_record_spares():
    """A lemon passes its fix and the checks idle and fails again under load (seed 000): a spare fixed in place
    within spares.recently_fixed_days ranks after every spare with a clean record, even a less fresh one."""
    fixed = SpareCandidate(node("s-fixed", "r5"), NOW - 0.5 * H, fixed_at=NOW - 2 * 24 * H)
    clean = cand("s-clean", "r6", 30.0)
    choice = select_spare(FAILED, [fixed, clean], NOW)
    assert choice.name == "s-clean" and choice.ranked == ("s-clean", "s-fixed")
    # it is still used when it is the only one, and the explanation says why it came last
    only = select_spare(FAILED, [fixed], NOW)
    assert only.name == "s-fixed" and "fixed in place 2 d ago (within 14 d)" in only.explain()
    # outside the window, or with the preference switched off, freshness decides again
    old_fix = SpareCandidate(node("s-fixed", "r5"), NOW - 0.5 * H, fixed_at=NOW - 15 * 24 * H)
    assert select_spare(FAILED, [old_fix, clean], NOW).name == "s-fixed"
    assert select_spare(FAILED, [fixed, clean], NOW, SpareSettings(recently_fixed_days=0)).name == "s-fixed"


def test_fewest_incidents_first_then_the_other_rules():
    """A spare that has failed is likelier to be a lemon not yet proven: the fewest incidents in the lookback window
    (counted by the caller) go first, before freshness and before the recently-fixed rule; equals fall back to them."""
    twice = SpareCandidate(node("s-twice", "r5"), NOW - 0.5 * H, incidents=2)
    once = SpareCandidate(node("s-once", "r6"), NOW - 1 * H, incidents=1)
    never = SpareCandidate(node("s-never", "r7"), NOW - 40 * H, fixed_at=NOW - 2 * 24 * H)  # fixed, then clean
    choice = select_spare(FAILED, [twice, once, never], NOW)
    assert choice.ranked == ("s-never", "s-once", "s-twice")
    assert select_spare(FAILED, [twice, once], NOW).name == "s-once"
    only = select_spare(FAILED, [twice], NOW)
    assert only.name == "s-twice" and "2 incident(s) in the lemon lookback window: used after spares with fewer" \
        in only.explain()
    # equal counts: the older rules decide (fresher first)
    a = SpareCandidate(node("s-a", "r5"), NOW - 3 * H, incidents=1)
    b = SpareCandidate(node("s-b", "r6"), NOW - 1 * H, incidents=1)
    assert select_spare(FAILED, [a, b], NOW).name == "s-b"
