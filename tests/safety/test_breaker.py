"""Circuit breaker: rack storms, percentage limits on small scopes, caps, reserve, half-open probes, persistence."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.config import CapacityBudget
from remedy.domain.model import Node, Topology
from remedy.safety.breaker import BreakerBoard, BreakerError, decide
from remedy.safety.scopes import BreakerState, FailureEvent, FleetView, SkipReason, Verdict
from remedy.settings.safety import BreakerSettings, ScopeLimit

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def fleet_nodes(racks: int = 8, per_rack: int = 8) -> list[Node]:
    """racks × per_rack nodes; each rack has its own leaf switch and PDU (the common layout)."""
    return [
        Node(f"gpu-{r}-{i}", gpu_model="H100", topology=Topology(rack=f"rack-{r}", switch=f"sw-{r}", pdu=f"pdu-{r}"))
        for r in range(racks)
        for i in range(per_rack)
    ]


NODES = fleet_nodes(racks=16)  # 128 nodes: cluster allows 6 per 10 min, budget 4 out
TOPO = {n.name: n.topology for n in NODES}


def fail(name: str, seconds: float, needs_spare: bool = True) -> FailureEvent:
    return FailureEvent(name, T0 + timedelta(seconds=seconds), TOPO[name], needs_spare=needs_spare)


def fleet(**kw) -> FleetView:
    kw.setdefault("ready_spares", 8)
    return FleetView.from_nodes(NODES, **kw)


def run(board: BreakerBoard, events, fv: FleetView | None = None):
    fv = fv or fleet()
    return [decide(e, board, fv, e.at) for e in events]


def test_rack_storm_acts_on_first_two_holds_rest_with_one_transition():
    board = BreakerBoard()  # defaults: rack limit 2 nodes / 60 s (seed 000)
    storm = [fail(f"gpu-3-{i}", 10 * i) for i in range(5)]  # 5 nodes of rack-3 within 40 s
    ds = run(board, storm)
    assert [d.verdict for d in ds] == [Verdict.ACT, Verdict.ACT, Verdict.HOLD, Verdict.HOLD, Verdict.HOLD]
    assert [d.node for d in ds if d.acted] == ["gpu-3-0", "gpu-3-1"]  # first come
    transitions = [t for d in ds for t in d.transitions]
    assert len(transitions) == 1
    t = transitions[0]
    assert (t.scope_kind, t.scope, t.from_state, t.to_state, t.node) == (
        "rack", "rack-3", BreakerState.CLOSED, BreakerState.OPEN, "gpu-3-2"
    )
    assert ds[2].skip.reason is SkipReason.BREAKER_TRIPPED
    assert "rack rack-3: 3 nodes failed within 1 min, over the limit of 2" in ds[2].skip.detail
    assert "a human must look" in ds[2].skip.detail
    assert all(d.skip.reason is SkipReason.BREAKER_OPEN for d in ds[3:])
    assert board.state_of("rack:rack-3") is BreakerState.OPEN
    assert board.state_of("cluster:cluster") is BreakerState.CLOSED  # contained: the cluster keeps healing
    # the rest of the fleet still heals while rack-3 is paused
    other = decide(fail("gpu-5-0", 50), board, fleet(), T0 + timedelta(seconds=50))
    assert other.acted


def test_failures_in_different_racks_within_a_minute_all_act():
    board = BreakerBoard()
    ds = run(board, [fail(f"gpu-{r}-0", 5 * r) for r in range(4)])  # 4 racks, 1 node each, 15 s
    assert all(d.acted for d in ds)
    assert not any(d.transitions for d in ds)


def test_failures_spread_slower_than_the_window_do_not_trip():
    board = BreakerBoard()
    ds = run(board, [fail(f"gpu-3-{i}", 61 * i) for i in range(3)])
    assert [d.verdict for d in ds[:2]] == [Verdict.ACT, Verdict.ACT]
    # third is 122 s after the first: only 2 distinct nodes in the 60-s window
    assert ds[2].skip is None or ds[2].skip.reason is not SkipReason.BREAKER_TRIPPED


def test_percentage_limit_is_stricter_on_a_small_rack():
    nodes = [Node(f"n{i}", topology=Topology(rack="tiny" if i < 4 else f"big-{i // 8}")) for i in range(68)]
    fv = FleetView.from_nodes(nodes, ready_spares=10)
    settings = BreakerSettings(rack=ScopeLimit(max_failures=3, max_percent=25.0))
    board = BreakerBoard(settings, CapacityBudget(max_nodes_in_remediation=10, max_percent_in_remediation=50))
    # rack "tiny" has 4 nodes: 25 % of 4 = 1 allowed, although the count limit is 3
    first = decide(FailureEvent("n0", T0, nodes[0].topology), board, fv, T0)
    second = decide(FailureEvent("n1", T0 + timedelta(seconds=5), nodes[1].topology), board, fv, T0 + timedelta(seconds=5))
    assert first.acted and not second.acted
    assert second.skip.reason is SkipReason.BREAKER_TRIPPED
    assert "over the limit of 1 (min of 3 nodes and 25% of 4)" in second.skip.detail
    # a 2-node scope at 25 % still lets ONE failure act (never below 1)
    assert board.allowed("rack:x", 2) == (1, "min of 3 nodes and 25% of 2")


def test_absolute_cap_on_nodes_in_remediation():
    board = BreakerBoard(budget=CapacityBudget(max_nodes_in_remediation=2, max_percent_in_remediation=50))
    ds = run(board, [fail(f"gpu-{r}-0", r) for r in range(3)])
    assert [d.verdict for d in ds] == [Verdict.ACT, Verdict.ACT, Verdict.HOLD]
    assert ds[2].skip.reason is SkipReason.CAPACITY_BUDGET
    assert "2 nodes already out of service, budget 2 = min(2 nodes, 50% of 128)" in ds[2].skip.detail
    # a finished remediation frees a slot
    board.record_outcome("gpu-0-0", True, T0 + timedelta(seconds=10))
    again = decide(fail("gpu-2-0", 11), board, fleet(), T0 + timedelta(seconds=11))
    assert again.acted


def test_percent_budget_counts_nodes_already_out_from_the_fleet_view():
    # 128 nodes, 10 % → 12; absolute cap 4 is stricter → 4; three are already out per the ledger
    board = BreakerBoard()
    fv = fleet(in_remediation=frozenset({"gpu-7-1", "gpu-7-2", "gpu-7-3"}))
    ds = [decide(e, board, fv, e.at) for e in [fail("gpu-0-0", 0), fail("gpu-1-0", 1)]]
    assert [d.verdict for d in ds] == [Verdict.ACT, Verdict.HOLD]
    assert ds[1].skip.reason is SkipReason.CAPACITY_BUDGET


def test_no_ready_spare_is_no_reserve_question_the_no_spare_path_decides():
    """With nothing to spend the reserve gate does not ask; the node is taken out (budgets still apply) and the
    flow's no-spare path (preempt with approval, shrink, escalate) decides — one question, not two."""
    board = BreakerBoard(BreakerSettings(spare_reserve=1))
    d = decide(fail("gpu-0-0", 0), board, fleet(ready_spares=0), T0)
    assert d.acted and "no validated spare ready (after 0 already promised): the no-spare path decides" in d.note
    # two spares promised to earlier failures and two ready: nothing left for a third either
    board = BreakerBoard(BreakerSettings(spare_reserve=0))
    fv = fleet(ready_spares=2)
    ds = [decide(e, board, fv, e.at) for e in [fail(f"gpu-{r}-0", r) for r in range(3)]]
    assert [d.acted for d in ds] == [True, True, True]
    assert "spare pool 2 → 1" in ds[0].note and "no validated spare ready (after 2 already promised)" in ds[2].note


def test_detector_flagging_too_many_nodes_holds_everything():
    flagged = frozenset(f"gpu-{r}-{i}" for r in range(6) for i in range(1))  # 6 flagged > budget 4
    board = BreakerBoard()
    d = decide(fail("gpu-0-0", 0), board, fleet(flagged=flagged), T0)
    assert d.skip.reason is SkipReason.DETECTOR_SUSPECT
    assert "6 of 128 nodes look unhealthy at once" in d.skip.detail
    assert not board.active


def test_spare_reserve_is_never_spent_by_automation():
    board = BreakerBoard(BreakerSettings(spare_reserve=1))
    fv = fleet(ready_spares=3)
    ds = [decide(e, board, fv, e.at) for e in [fail(f"gpu-{r}-0", r) for r in range(3)]]
    assert [d.verdict for d in ds] == [Verdict.ACT, Verdict.ACT, Verdict.HOLD]
    assert ds[2].skip.reason is SkipReason.SPARE_RESERVE
    assert "only 1 ready spare (after 2 already promised) and the reserve is 1" in ds[2].skip.detail
    # an in-place fix takes no spare, so it still goes ahead
    inplace = decide(fail("gpu-4-0", 4, needs_spare=False), board, fv, T0 + timedelta(seconds=4))
    assert inplace.acted
    # once the fleet view shows the promoted spares, the board does not count them twice
    fv2 = fleet(ready_spares=1, spare_claims=frozenset({"gpu-0-0", "gpu-1-0"}))
    assert decide(fail("gpu-5-0", 5), board, fv2, T0 + timedelta(seconds=5)).skip.reason is SkipReason.SPARE_RESERVE
    fv3 = fleet(ready_spares=2, spare_claims=frozenset({"gpu-0-0", "gpu-1-0"}))
    assert decide(fail("gpu-5-0", 6), board, fv3, T0 + timedelta(seconds=6)).acted


def test_duplicate_report_of_a_node_in_remediation_is_held_not_counted():
    board = BreakerBoard()
    a = decide(fail("gpu-3-0", 0), board, fleet(), T0)
    b = decide(fail("gpu-3-0", 5), board, fleet(), T0 + timedelta(seconds=5))
    assert a.acted and b.skip.reason is SkipReason.ALREADY_IN_REMEDIATION
    assert board.failures_in_window("rack:rack-3") == 1


@pytest.mark.parametrize("state", ["repair", "retired"])
def test_a_node_another_incident_already_took_out_is_held_not_counted(state):
    """Two alerts for one fault (XID 64 and its row-remap failure) open two incidents: when the second one's gate
    comes after the first replacement finished, the node is in repair, not quarantined — still nothing to do."""
    board = BreakerBoard()
    fv = fleet(out_of_service={"gpu-3-0": state})
    d = decide(fail("gpu-3-0", 0), board, fv, T0)
    assert not d.acted and d.skip.reason is SkipReason.ALREADY_OUT_OF_SERVICE
    assert state in d.explain() and "already out of service" in d.explain()
    assert board.failures_in_window("rack:rack-3") == 0 and board.failures_in_window("cluster:cluster") == 0
    rebuilt = BreakerBoard.rebuild([d], [], [])
    assert rebuilt.failures_in_window("rack:rack-3") == 0 and not rebuilt.active
    assert decide(fail("gpu-3-1", 1), board, fv, T0 + timedelta(seconds=1)).acted  # its neighbours are unaffected


def storm_then_open(settings: BreakerSettings | None = None) -> BreakerBoard:
    board = BreakerBoard(settings)
    run(board, [fail(f"gpu-3-{i}", i) for i in range(3)])
    for n in ("gpu-3-0", "gpu-3-1"):
        board.record_outcome(n, True, T0 + timedelta(seconds=30))
    assert board.state_of("rack:rack-3") is BreakerState.OPEN
    return board


def test_cool_down_half_open_probe_success_closes():
    board = storm_then_open()  # rack cool-down 3600 s by default
    early = decide(fail("gpu-3-5", 1800), board, fleet(), T0 + timedelta(seconds=1800))
    assert early.skip.reason is SkipReason.BREAKER_OPEN  # and it restarts the quiet period
    t_probe = T0 + timedelta(seconds=1800 + 3600)
    probe = decide(fail("gpu-3-6", 5400), board, fleet(), t_probe)
    assert probe.acted and probe.probe_for == ("rack:rack-3",)
    assert [(t.from_state, t.to_state) for t in probe.transitions] == [(BreakerState.OPEN, BreakerState.HALF_OPEN)]
    waiting = decide(fail("gpu-3-7", 5401), board, fleet(), t_probe + timedelta(seconds=1))
    assert waiting.skip.reason is SkipReason.PROBE_IN_FLIGHT and "gpu-3-6" in waiting.skip.detail
    closed = board.record_outcome("gpu-3-6", True, t_probe + timedelta(minutes=5))
    assert [(t.to_state, t.node) for t in closed] == [(BreakerState.CLOSED, "gpu-3-6")]
    assert board.state_of("rack:rack-3") is BreakerState.CLOSED


def test_half_open_probe_failure_reopens():
    board = storm_then_open()
    t_probe = T0 + timedelta(hours=2)
    assert decide(fail("gpu-3-6", 7200), board, fleet(), t_probe).acted
    reopened = board.record_outcome("gpu-3-6", False, t_probe + timedelta(minutes=5))
    assert [(t.from_state, t.to_state) for t in reopened] == [(BreakerState.HALF_OPEN, BreakerState.OPEN)]
    held = decide(fail("gpu-3-7", 7500), board, fleet(), t_probe + timedelta(minutes=6))
    assert held.skip.reason is SkipReason.BREAKER_OPEN


def test_approve_close_and_no_cooldown_means_manual_only():
    settings = BreakerSettings(rack=ScopeLimit(cooldown_seconds=None))
    board = storm_then_open(settings)
    much_later = T0 + timedelta(days=3)
    assert decide(fail("gpu-3-6", 3 * 86400), board, fleet(), much_later).skip.reason is SkipReason.BREAKER_OPEN
    with pytest.raises(BreakerError, match="approver's name"):
        board.approve_close("rack:rack-3", "", much_later)
    ts = board.approve_close("rack-3", "alice", much_later)  # bare name resolves to rack:rack-3
    assert [(t.to_state, t.by) for t in ts] == [(BreakerState.CLOSED, "alice")]
    assert board.approve_close("rack:rack-3", "alice", much_later) == []  # already closed
    assert decide(fail("gpu-3-7", 3 * 86400 + 1), board, fleet(), much_later + timedelta(seconds=1)).acted


def test_manual_open_ignores_cooldown():
    board = BreakerBoard()
    board.open("rack:rack-1", "bob", "PDU maintenance", T0)
    d = decide(fail("gpu-1-0", 86400), board, fleet(), T0 + timedelta(days=1))
    assert d.skip.reason is SkipReason.BREAKER_OPEN and "opened by bob: PDU maintenance" in d.skip.detail
    with pytest.raises(BreakerError, match="unknown breaker scope"):
        board.approve_close("rack-99", "bob", T0)


def test_cluster_breaker_counts_spread_failures_and_needs_a_person():
    big = fleet_nodes(racks=32, per_rack=8)  # 256 nodes: cluster allows min(6, 5 % of 256 = 12) = 6 per 10 min
    topo = {n.name: n.topology for n in big}
    fv = FleetView.from_nodes(big, ready_spares=50)
    board = BreakerBoard(budget=CapacityBudget(max_nodes_in_remediation=50, max_percent_in_remediation=50))
    ds = [
        decide(FailureEvent(f"gpu-{r}-0", T0 + timedelta(seconds=60 * r), topo[f"gpu-{r}-0"]), board, fv, T0 + timedelta(seconds=60 * r))
        for r in range(8)
    ]
    assert [d.acted for d in ds] == [True] * 6 + [False] * 2
    assert ds[6].skip.reason is SkipReason.BREAKER_TRIPPED and ds[6].skip.scope == "cluster:cluster"
    assert "the cluster: 7 nodes failed within 10 min, over the limit of 6" in ds[6].skip.detail
    assert ds[7].skip.reason is SkipReason.BREAKER_OPEN and "a person must approve" in ds[7].skip.detail


def test_serialise_restore_and_rebuild_from_ledger_equal_live_board():
    board = BreakerBoard()
    decisions, transitions, outcomes = [], [], []

    def step(e, now, fv=None):
        d = decide(e, board, fv or fleet(), now)
        decisions.append(d)
        transitions.extend(d.transitions)
        return d

    for i in range(4):
        step(fail(f"gpu-3-{i}", i), T0 + timedelta(seconds=i))
    step(fail("gpu-5-1", 10), T0 + timedelta(seconds=10))
    step(fail("gpu-5-1", 11), T0 + timedelta(seconds=11))  # duplicate
    for n, ok in (("gpu-3-0", True), ("gpu-3-1", False)):
        transitions.extend(board.record_outcome(n, ok, T0 + timedelta(minutes=2)))
        outcomes.append((n, T0 + timedelta(minutes=2)))
    step(fail("gpu-3-7", 7200), T0 + timedelta(hours=2))  # becomes the half-open probe
    step(fail("gpu-3-6", 7201), T0 + timedelta(hours=2, seconds=1))  # waits for the probe
    transitions.extend(board.approve_close("rack:rack-1", "carol", T0 + timedelta(hours=3)))  # no-op
    transitions.extend(board.record_outcome("gpu-3-7", True, T0 + timedelta(hours=3)))  # probe closes rack-3
    outcomes.append(("gpu-3-7", T0 + timedelta(hours=3)))
    step(fail("gpu-3-6", 7201), T0 + timedelta(hours=3, seconds=1))  # a late report from before the close
    step(fail("gpu-3-2", 10900), T0 + timedelta(hours=3, minutes=2))

    data = json.loads(json.dumps(board.to_dict()))
    restored = BreakerBoard.from_dict(data)
    assert restored == board and restored.to_dict() == board.to_dict()
    # ledger round trip of the records themselves
    from remedy.safety.scopes import BreakerTransition, Decision

    decisions = [Decision.from_dict(json.loads(json.dumps(d.to_dict()))) for d in decisions]
    transitions = [BreakerTransition.from_dict(t.to_dict()) for t in transitions]
    rebuilt = BreakerBoard.rebuild(decisions, transitions, outcomes)
    assert rebuilt.to_dict() == board.to_dict()
    assert board.state_of("rack:rack-3") is BreakerState.CLOSED and board.failures_in_window("rack:rack-3") == 1
    # and the rebuilt board decides the next events exactly like the live one
    for e in (fail("gpu-3-5", 10910), fail("gpu-3-4", 10920)):
        assert decide(e, rebuilt, fleet(), e.at).to_dict() == decide(e, board, fleet(), e.at).to_dict()
    assert rebuilt.to_dict() == board.to_dict() and board.state_of("rack:rack-3") is BreakerState.OPEN


def test_rebuild_keeps_a_half_open_probe():
    board = storm_then_open()
    decisions = []
    d = decide(fail("gpu-3-7", 7200), board, fleet(), T0 + timedelta(hours=2))
    assert d.acted and d.probe_for == ("rack:rack-3",)
    # the storm's decisions are what the ledger would hold; replay them into a fresh board
    replay = BreakerBoard()
    for e in [fail(f"gpu-3-{i}", i) for i in range(3)]:
        decisions.append(decide(e, replay, fleet(), e.at))
    transitions = [t for x in decisions for t in x.transitions] + list(d.transitions)
    outcomes = [("gpu-3-0", T0 + timedelta(seconds=30)), ("gpu-3-1", T0 + timedelta(seconds=30))]
    rebuilt = BreakerBoard.rebuild(decisions + [d], transitions, outcomes)
    assert rebuilt.status["rack:rack-3"].probe_node == "gpu-3-7"
    assert rebuilt.to_dict() == board.to_dict()


def test_approval_forgets_the_storm_so_the_next_single_failure_acts():
    board = storm_then_open(BreakerSettings(rack=ScopeLimit(cooldown_seconds=None)))
    assert board.failures_in_window("rack:rack-3") == 3
    board.approve_close("rack:rack-3", "dana", T0 + timedelta(seconds=40))
    assert board.failures_in_window("rack:rack-3") == 0
    # 50 s after the storm: inside its 60-s window, yet a single new failure must not re-trip the rack
    d = decide(fail("gpu-3-5", 50), board, fleet(), T0 + timedelta(seconds=50))
    assert d.acted, d.explain()


def test_same_inputs_same_order_same_board():
    events = [fail(f"gpu-{r % 3}-{i}", 7 * i + r) for i in range(4) for r in range(3)]
    a, b = BreakerBoard(), BreakerBoard()
    run(a, events)
    run(b, events)
    assert a == b


def test_bad_inputs_fail_with_clear_messages():
    board = BreakerBoard()
    with pytest.raises(ValueError, match="timezone-aware"):
        FailureEvent("x", datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="after decision time"):
        decide(fail("gpu-0-0", 10), board, fleet(), T0)
    stranger = FailureEvent("z", T0, Topology(rack="rack-99"))
    with pytest.raises(ValueError, match="no node count for rack:rack-99"):
        decide(stranger, board, fleet(), T0)
    with pytest.raises(BreakerError, match="no remediation of gpu-0-0 is in flight"):
        board.record_outcome("gpu-0-0", True, T0)
    with pytest.raises(BreakerError, match="unsupported format version"):
        BreakerBoard.from_dict({"version": 7})


def test_periodic_cool_down_check_and_status_rows():
    board = storm_then_open()
    assert board.cool_downs(T0 + timedelta(minutes=30)) == []
    [row] = board.describe()
    assert (row["scope"], row["state"], row["probe"]) == ("rack:rack-3", "open", "")
    [t] = board.cool_downs(T0 + timedelta(minutes=62))
    assert (t.key, t.to_state) == ("rack:rack-3", BreakerState.HALF_OPEN)
    assert board.describe()[0]["state"] == "half-open"


def test_breaker_settings_load_from_yaml_and_environment(tmp_path, monkeypatch):
    from remedy.config import ConfigError, load_settings

    cfg = tmp_path / "remedy.yaml"
    cfg.write_text("breaker:\n  rack:\n    max_failures: 3\n    window_seconds: 120\n  spare_reserve: 2\n")
    monkeypatch.setenv("REMEDY_BREAKER__PDU__COOLDOWN_SECONDS", "900")
    s = load_settings(cfg)
    assert (s.breaker.rack.max_failures, s.breaker.rack.window_seconds, s.breaker.spare_reserve) == (3, 120, 2)
    assert s.breaker.pdu.cooldown_seconds == 900
    assert s.breaker.cluster.cooldown_seconds is None  # the cluster breaker stays manual by default
    cfg.write_text("breaker:\n  rack:\n    max_percent: 150\n")
    with pytest.raises(ConfigError, match="breaker.rack.max_percent"):
        load_settings(cfg)


@pytest.mark.parametrize("seed", range(6))
def test_rebuild_from_ledger_matches_live_board_over_random_histories(seed):
    """Random storms, outcomes, approvals and cool-downs; the ledger replay must land on the same board."""
    import random

    rng = random.Random(seed)
    settings = BreakerSettings(rack=ScopeLimit(cooldown_seconds=600), switch=ScopeLimit(cooldown_seconds=900))
    budget = CapacityBudget(max_nodes_in_remediation=30, max_percent_in_remediation=30)
    board = BreakerBoard(settings, budget)
    decisions, transitions, outcomes = [], [], []
    now = T0
    for _ in range(300):
        now += timedelta(seconds=rng.choice([1, 2, 5, 10, 120, 900]))
        roll = rng.random()
        if roll < 0.6:
            rack = rng.choice([1, 2, 3]) if rng.random() < 0.7 else rng.randrange(16)
            name = f"gpu-{rack}-{rng.randrange(8)}"
            late = timedelta(seconds=rng.choice([0, 0, 0, 3, 30]))
            spare = rng.random() < 0.5
            e = FailureEvent(name, now - late, TOPO[name], spare, takes_node_out=spare or rng.random() < 0.5)
            d = decide(e, board, fleet(ready_spares=20), now)
            decisions.append(d)
            transitions.extend(d.transitions)
        elif roll < 0.9 and board.active:
            node = rng.choice(sorted(board.active))
            transitions.extend(board.record_outcome(node, rng.random() < 0.7, now))
            outcomes.append((node, now))
        elif roll < 0.94 and board.status:
            transitions.extend(board.approve_close(rng.choice(sorted(board.status)), "op", now))
        else:
            transitions.extend(board.cool_downs(now))
    assert any(t.to_state is BreakerState.OPEN for t in transitions)  # the history did exercise the breakers
    rebuilt = BreakerBoard.rebuild(decisions, transitions, outcomes, settings, budget)
    assert rebuilt.to_dict() == board.to_dict()
    assert BreakerBoard.from_dict(board.to_dict(), settings, budget) == board


def test_job_restart_uses_no_capacity_but_still_counts_for_correlation():
    board = BreakerBoard(budget=CapacityBudget(max_nodes_in_remediation=1, max_percent_in_remediation=50))
    assert decide(fail("gpu-0-0", 0), board, fleet(), T0).acted  # budget of 1 now used
    restart = FailureEvent("gpu-1-0", T0 + timedelta(seconds=1), TOPO["gpu-1-0"], needs_spare=False, takes_node_out=False)
    d = decide(restart, board, fleet(), restart.at)
    assert d.acted and "stays in service" in d.explain()
    # a replacement would not fit: the restart did not use the slot, the first replacement did
    held = decide(fail("gpu-2-0", 2), board, fleet(), T0 + timedelta(seconds=2))
    assert held.skip.reason is SkipReason.CAPACITY_BUDGET and "1 node already out of service" in held.skip.detail
    # restarts still count toward a rack storm
    r = [FailureEvent(f"gpu-4-{i}", T0 + timedelta(seconds=i), TOPO[f"gpu-4-{i}"], False, takes_node_out=False) for i in range(3)]
    assert [decide(e, board, fleet(), e.at).verdict for e in r] == [Verdict.ACT, Verdict.ACT, Verdict.HOLD]
