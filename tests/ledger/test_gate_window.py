"""The gate reads a bounded window of the ledger (remedy.safety.history) and decides exactly as if it had read the
whole history; old history does not change a decision. On SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from remedy.config import CapacityBudget
from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, Node, Topology
from remedy.ledger import Ledger
from remedy.ledger.recent import latest_actions, latest_outcomes, live_claims, unfinished
from remedy.safety import history
from remedy.safety.board import BreakerBoard
from remedy.safety.breaker import decide
from remedy.safety.history import CLAIM_KIND, GATE_KIND, OUTCOME_KIND, load_board, spare_claims
from remedy.safety.scopes import BreakerState, BreakerTransition, Decision, FailureEvent, FleetView, SkipReason
from remedy.settings.safety import BreakerSettings

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SETTINGS = BreakerSettings()  # rack/switch/PDU: 2 nodes per 60 s, 1 h cool-down; cluster: 6 per 10 min, by hand
BUDGET = CapacityBudget()
NODES = [Node(f"gpu-{r}-{i}", gpu_count=8, topology=Topology(zone="z1", rack=f"rack-{r}", switch=f"sw-{r}",
                                                             pdu=f"pdu-{r}"))
         for r in range(16) for i in range(8)]
TOPO = {n.name: n.topology for n in NODES}


def fleet(ready_spares: int = 8, claims: set[str] = frozenset()) -> FleetView:
    return FleetView.from_nodes(NODES, ready_spares=ready_spares, spare_claims=claims)


def whole_history_board(led: Ledger) -> BreakerBoard:
    """The board rebuilt from every row, as the gate did before its reads were bounded: the reference."""
    decisions = [Decision.from_dict(a.detail["decision"]) for a in led.actions(kind=GATE_KIND)
                 if not a.dry_run and a.detail.get("decision")]
    transitions = [BreakerTransition(e.scope_kind, e.scope, BreakerState(e.from_state), BreakerState(e.to_state),
                                     e.reason, e.at, e.by) for e in led.breaker_events()]
    outcomes = [(a.node, a.finished_at or a.started_at) for a in led.actions(kind=OUTCOME_KIND) if not a.dry_run]
    return BreakerBoard.rebuild(decisions, transitions, outcomes, SETTINGS, BUDGET)


def record(led: Ledger, d: Decision, cooled=(), incident_id: int | None = None) -> None:
    """What tasks.gate.check_breaker writes for one decision (at the decision's own time)."""
    detail = {"act": d.acted, "skip": d.skip.reason.value if d.skip else None,
              "scope": d.skip.scope if d.skip else None, "decision": d.to_dict()}
    led.start_action(Action(kind=GATE_KIND, node=d.node, started_at=d.at, detail=detail, incident_id=incident_id,
                            outcome=ActionOutcome.SUCCEEDED if d.acted else ActionOutcome.SKIPPED))
    record_transitions(led, [*cooled, *d.transitions])


def record_transitions(led: Ledger, transitions) -> None:
    for t in transitions:
        led.record_breaker_event(t.scope_kind, t.scope, t.from_state.value, t.to_state.value, reason=t.reason,
                                 by=t.by, at=t.at)


def finish(led: Ledger, node: str, succeeded: bool, at: datetime) -> None:
    """What tasks.gate.record_remediation_outcome writes."""
    board = load_board(led, SETTINGS, BUDGET, at)
    transitions = board.record_outcome(node, succeeded, at) if board.is_active(node) else []
    led.start_action(Action(kind=OUTCOME_KIND, node=node, started_at=at, outcome=ActionOutcome.SUCCEEDED,
                            detail={"succeeded": succeeded}))
    record_transitions(led, transitions)


def gate(led: Ledger, failure: FailureEvent, now: datetime, fv: FleetView | None = None,
         incident_id: int | None = None) -> Decision:
    """One gate decision from the bounded board, checked against the whole-history board, then recorded."""
    fv = fv or fleet()
    full, bounded = whole_history_board(led), load_board(led, SETTINGS, BUDGET, now, failure.at)
    cooled_full, cooled = full.cool_downs(now), bounded.cool_downs(now)
    want, got = decide(failure, full, fv, now), decide(failure, bounded, fv, now)
    assert cooled == cooled_full
    assert (got.verdict, got.skip, got.transitions, got.probe_for, got.note) == \
        (want.verdict, want.skip, want.transitions, want.probe_for, want.note), failure
    # quiet_since may differ where it cannot matter (half-open; or older than the cool-down): the cool-downs agree
    assert bounded.active == full.active and _states(bounded) == _states(full)
    record(led, got, cooled, incident_id)
    return got


def _states(board: BreakerBoard) -> dict:
    return {k: (s.state, s.since, s.reason, s.manual, s.probe_node) for k, s in board.status.items()}


def seed_nodes(led: Ledger) -> None:
    for n in NODES:
        led.upsert_node(n)


def test_bounded_board_decides_like_the_whole_history_through_storms_probes_and_closes(ledger: Ledger) -> None:
    seed_nodes(ledger)
    rng = random.Random(18)
    t = NOW - timedelta(days=2)
    in_flight: list[tuple[str, datetime]] = []
    decided = 0
    rack, burst = 0, 0
    while t < NOW:
        # a quiet fleet with bursts: now and then several nodes of one rack fail within a minute
        if burst:
            burst -= 1
            t += timedelta(seconds=rng.choice([5, 10, 20]))
        else:
            rack, burst = rng.randrange(16), rng.choice([0, 0, 1, 3, 4])
            t += timedelta(seconds=rng.choice([120, 900, 1800, 3600, 7200]))
        node = f"gpu-{rack}-{rng.randrange(8)}"
        late = timedelta(seconds=rng.choice([0, 0, 0, 30, 3 * 3600]))  # some failures are reported late
        d = gate(ledger, FailureEvent(node, t - late, TOPO[node], needs_spare=rng.random() < 0.7), t)
        decided += 1
        if d.acted:
            in_flight.append((node, t))
        # remediations end after a while, most of them; a few stay in flight for days
        for n, since in list(in_flight):
            if t - since > timedelta(minutes=rng.choice([10, 60, 600])) and rng.random() < 0.6:
                finish(ledger, n, succeeded=rng.random() < 0.8, at=t + timedelta(seconds=1))
                in_flight.remove((n, since))
        # a person re-closes an open breaker now and then
        open_now = whole_history_board(ledger).not_closed()
        if open_now and rng.random() < 0.05:
            board = load_board(ledger, SETTINGS, BUDGET, t)
            record_transitions(ledger, board.approve_close(open_now[0], "alice", t + timedelta(seconds=2)))
    events = ledger.breaker_events()
    assert decided > 100
    assert {e.to_state for e in events} >= {"open", "half-open", "closed"}  # the walk went through every state


def storm(led: Ledger, rack: int, at: datetime, nodes: int) -> None:
    """An old rack storm, fully settled: failures, the trip, every remediation finished, the breaker re-closed."""
    for i in range(nodes):
        gate(led, FailureEvent(f"gpu-{rack}-{i}", at + timedelta(seconds=i), TOPO[f"gpu-{rack}-{i}"]),
             at + timedelta(seconds=i))
    for i in range(nodes):
        finish(led, f"gpu-{rack}-{i}", succeeded=True, at=at + timedelta(minutes=30))
    board = load_board(led, SETTINGS, BUDGET, at + timedelta(hours=1))
    for scope in board.not_closed():
        record_transitions(led, board.approve_close(scope, "bob", at + timedelta(hours=1)))


def test_old_history_does_not_change_a_decision(db_url: str, tmp_path) -> None:
    # Two ledgers with the same last hour; one also holds a week of old storms in the same rack.
    decisions = []
    for old in (False, True):
        with Ledger(db_url if old else f"sqlite:///{tmp_path / 'fresh.db'}") as led:
            if not old:
                led.migrate()
            seed_nodes(led)
            if old:
                for day in range(7, 0, -1):
                    storm(led, 3, NOW - timedelta(days=day), nodes=5)
            gate(led, FailureEvent("gpu-3-6", NOW - timedelta(seconds=30), TOPO["gpu-3-6"]),
                 NOW - timedelta(seconds=30))
            decisions.append(gate(led, FailureEvent("gpu-3-7", NOW, TOPO["gpu-3-7"]), NOW))
    fresh, with_history = decisions
    assert fresh.acted and with_history.acted
    assert (fresh.verdict, fresh.skip, fresh.transitions, fresh.note) == \
        (with_history.verdict, with_history.skip, with_history.transitions, with_history.note)


def test_the_window_reaches_back_from_a_late_failure_not_from_now(ledger: Ledger) -> None:
    seed_nodes(ledger)
    two_hours_ago = NOW - timedelta(hours=2)
    for i in range(2):  # two nodes of rack 5 failed two hours ago
        gate(ledger, FailureEvent(f"gpu-5-{i}", two_hours_ago + timedelta(seconds=i), TOPO[f"gpu-5-{i}"]),
             two_hours_ago + timedelta(seconds=i))
    # a third failure from that same minute, reported only now: it trips the rack, as the whole history would say
    late = gate(ledger, FailureEvent("gpu-5-2", two_hours_ago + timedelta(seconds=5), TOPO["gpu-5-2"]), NOW)
    assert late.skip is not None and late.skip.reason is SkipReason.BREAKER_TRIPPED


def test_a_remediation_in_flight_for_days_still_counts(ledger: Ledger) -> None:
    seed_nodes(ledger)
    week_ago = NOW - timedelta(days=7)
    for i in range(4):  # four remediations a week ago, never finished: they still hold the capacity budget (4)
        gate(ledger, FailureEvent(f"gpu-{i}-0", week_ago, TOPO[f"gpu-{i}-0"]), week_ago + timedelta(minutes=i))
    held = gate(ledger, FailureEvent("gpu-9-0", NOW, TOPO["gpu-9-0"]), NOW)
    assert held.skip is not None and held.skip.reason is SkipReason.CAPACITY_BUDGET
    assert {a.node for a in unfinished(ledger, GATE_KIND, OUTCOME_KIND)} == {f"gpu-{i}-0" for i in range(4)}
    finish(ledger, "gpu-2-0", succeeded=True, at=NOW + timedelta(seconds=1))
    assert gate(ledger, FailureEvent("gpu-9-1", NOW, TOPO["gpu-9-1"]), NOW + timedelta(seconds=2)).acted


def test_a_spare_claimed_for_an_earlier_remediation_of_the_node_is_not_this_ones(ledger: Ledger) -> None:
    seed_nodes(ledger)
    # gpu-1-1 was replaced last month (its spare promoted), came back, and fails again now
    ledger.start_action(Action(kind=CLAIM_KIND, node="spare-1", started_at=NOW - timedelta(days=30),
                               outcome=ActionOutcome.SUCCEEDED, detail={"replaces": "gpu-1-1"}))
    gate(ledger, FailureEvent("gpu-1-1", NOW, TOPO["gpu-1-1"]), NOW)
    board = load_board(ledger, SETTINGS, BUDGET, NOW)
    assert spare_claims(ledger, board) == set()  # this remediation's spare is still promised
    ledger.start_action(Action(kind=CLAIM_KIND, node="spare-2", started_at=NOW + timedelta(seconds=5),
                               outcome=ActionOutcome.SUCCEEDED, detail={"replaces": "gpu-1-1"}))
    assert spare_claims(ledger, board) == {"gpu-1-1"}


def test_held_on_reads_only_the_recent_decisions(ledger: Ledger) -> None:
    seed_nodes(ledger)

    def fails(i: int, at: datetime) -> None:
        inc, _ = ledger.open_incident(Incident(f"gpu-4-{i}", "xid", xid=79, first_seen=at, last_seen=at),
                                      window_seconds=600)
        gate(ledger, FailureEvent(f"gpu-4-{i}", at, TOPO[f"gpu-4-{i}"]), at, incident_id=inc.id)

    for i in range(3):  # two days ago: two act, the third trips rack-4
        fails(i, NOW - timedelta(days=2, seconds=-i))
    for i in range(3, 6):  # now: the rack cooled down, gpu-4-3 is its probe, the next two wait on it
        fails(i, NOW + timedelta(seconds=i))
    assert history.held_on(ledger, "rack:rack-4", NOW - timedelta(hours=24)) == ["gpu-4-5", "gpu-4-4"]
    assert history.held_on(ledger, "rack:rack-4", NOW - timedelta(days=3)) == ["gpu-4-5", "gpu-4-4", "gpu-4-2"]


def test_latest_actions_keeps_the_newest_finished_real_ones(ledger: Ledger) -> None:
    seed_nodes(ledger)
    for i in range(10):  # old failures, then newer successes, a dry run and one still running
        ledger.start_action(Action(kind="fix_reboot", node="gpu-0-0", started_at=NOW - timedelta(days=30, minutes=i),
                                   outcome=ActionOutcome.FAILED, detail={"xid": 79}))
    for i in range(3):
        ledger.start_action(Action(kind="fix_reboot", node="gpu-0-1", started_at=NOW + timedelta(minutes=i),
                                   outcome=ActionOutcome.SUCCEEDED, detail={"xid": 79}))
    ledger.start_action(Action(kind="fix_reboot", node="gpu-0-2", started_at=NOW + timedelta(minutes=5),
                               outcome=ActionOutcome.SUCCEEDED, dry_run=True, detail={"xid": 79}))
    ledger.start_action(Action(kind="fix_reboot", node="gpu-0-3", started_at=NOW + timedelta(minutes=6)))
    got = latest_actions(ledger, "fix_reboot", 4, outcomes=(ActionOutcome.SUCCEEDED, ActionOutcome.FAILED))
    assert [(a.node, a.outcome) for a in got] == [("gpu-0-0", ActionOutcome.FAILED)] + \
        [("gpu-0-1", ActionOutcome.SUCCEEDED)] * 3
    assert got == sorted(got, key=lambda a: a.started_at)
    assert latest_outcomes(ledger, "fix_reboot", 4) == [(False, {"xid": 79})] + [(True, {"xid": 79})] * 3


def test_spares_claimed_by_live_incidents_only(ledger: Ledger) -> None:
    seed_nodes(ledger)

    def claim(node: str, spare: str, status: IncidentStatus | None) -> int | None:
        inc_id = None
        if status is not None:
            inc, _ = ledger.open_incident(Incident(node, "xid", xid=79), window_seconds=600)
            inc_id = inc.id
            if status is not IncidentStatus.OPEN:
                ledger.set_incident_status(inc.id, status)
        ledger.start_action(Action(kind=CLAIM_KIND, node=spare, incident_id=inc_id, outcome=ActionOutcome.SUCCEEDED,
                                   detail={"replaces": node}))
        return inc_id

    mine = claim("gpu-0-0", "spare-a", IncidentStatus.ACTING)
    claim("gpu-0-1", "spare-b", IncidentStatus.ACTING)
    claim("gpu-0-2", "spare-c", IncidentStatus.RESOLVED)  # settled long ago: its spare is a node like any other
    claim("gpu-0-3", "spare-d", None)  # claimed outside any incident: stays taken
    ledger.start_action(Action(kind=CLAIM_KIND, node="spare-e", dry_run=True, outcome=ActionOutcome.PLANNED))
    assert live_claims(ledger, CLAIM_KIND, except_incident=mine) == {"spare-b", "spare-d"}
    assert live_claims(ledger, CLAIM_KIND) == {"spare-a", "spare-b"}
