"""The lease fence on SQLite and PostgreSQL: every acting write of a run (action rows: cordon, drain, spare claim,
gate decision; incident status; approval requests; node lifecycle transitions, validations, breaker events) is checked inside its own transaction against the run still
holding the incident. A run that stalled past its lease and was taken over or re-announced is refused at its next
write, whatever its own process believes; a subflow writes under its parent's claim; a takeover racing a write
either refuses it or settles it, never leaves it running."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, NodeState
from remedy.ledger import Fence, LeaseLost, Ledger

from .conftest import race

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TTL = 30.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    """These tests give every time themselves (`at=`, an action's started_at): the ledger is on their clock, not
    the database's (a ledger without one judges leases by the database server's clock: test_lease_clock.py)."""
    with Ledger(db_url, clock=lambda: T0) as led:
        yield led


def held_by(ledger: Ledger, run: str, node: str = "gpu-001") -> int:
    rec, _ = ledger.open_incident(Incident(node=node, signal="xid", gpu=3, xid=79, first_seen=T0, last_seen=T0),
                                  window_seconds=600)
    ledger.start_lease(run, ttl_seconds=TTL, process="host:1", at=at(0))
    assert ledger.claim(rec.id, run, at=at(0)).claimed
    return rec.id


def action(inc: int, kind: str, run: str, s: float, **kw) -> Action:
    return Action(kind=kind, node="gpu-001", incident_id=inc, requested_by=run, started_at=at(s), **kw)


def test_a_run_taken_over_is_refused_at_every_acting_write(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    old, new = Fence.of("run-a"), Fence.of("run-b")
    ledger.start_action(action(inc, "cordon_node", "run-a", 1, outcome=ActionOutcome.SUCCEEDED), fence=old)
    # run-a stalls past its lease (SIGSTOP, a frozen VM); run-b takes the incident over
    ledger.start_lease("run-b", ttl_seconds=TTL, at=at(40))
    assert ledger.claim(inc, "run-b", at=at(40)).took_over_from == "run-a"
    before = len(ledger.actions(incident_id=inc))

    writes = {
        "spare claim": lambda: ledger.start_action(action(inc, "claim_spare", "run-a", 41,
                                                          outcome=ActionOutcome.SUCCEEDED,
                                                          detail={"spare": "gpu-015"}), fence=old),
        "gate decision": lambda: ledger.start_action(action(inc, "gate_decision", "run-a", 41,
                                                            idempotency_key=f"incident-{inc}:gate_decision"), fence=old),
        "drain": lambda: ledger.start_action(action(inc, "drain_node", "run-a", 41), fence=old),
        "incident status": lambda: ledger.set_incident_status(inc, IncidentStatus.RESOLVED, detail="replaced",
                                                              at=at(41), fence=old),
        "approval request": lambda: ledger.request_approval(incident_id=inc, flow_run_id="run-a",
                                                            kind="breaker:rack:r1", at=at(41), fence=old),
    }
    for _what, write in writes.items():
        with pytest.raises(LeaseLost, match="no longer holds incident .* held by run-b"):
            write()
    assert len(ledger.actions(incident_id=inc)) == before  # nothing of run-a's written
    assert ledger.approvals(incident_id=inc) == []
    rec = ledger.get_incident(inc)
    assert (rec.status, rec.flow_run_id) == (IncidentStatus.ACTING, "run-b")
    # the run that took over writes as usual
    claim, new_row = ledger.start_action(action(inc, "claim_spare", "run-b", 42, outcome=ActionOutcome.SUCCEEDED,
                                                detail={"spare": "gpu-015"}), fence=new)
    assert new_row and claim.requested_by == "run-b"


def test_a_run_whose_lease_ran_out_is_refused_before_anyone_takes_over(ledger: Ledger) -> None:
    """Nobody has the incident yet, but the watchdog may re-announce it any moment: the stalled run stops."""
    inc = held_by(ledger, "run-a")
    with pytest.raises(LeaseLost, match="its lease has expired"):
        ledger.start_action(action(inc, "claim_spare", "run-a", 31, outcome=ActionOutcome.SUCCEEDED), fence=Fence.of("run-a"))
    ledger.end_lease("run-a", reason="finished", at=at(5))
    with pytest.raises(LeaseLost, match="its lease has ended"):
        ledger.set_incident_status(inc, IncidentStatus.RESOLVED, at=at(6), fence=Fence.of("run-a"))
    assert ledger.actions(incident_id=inc, kind="claim_spare") == []
    assert ledger.get_incident(inc).status is IncidentStatus.ACTING


def test_a_reannounced_incident_refuses_the_run_it_was_taken_from(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    assert ledger.reannounce_incident(inc, "run-a", "event:e1", reason="run-a is gone", by="watchdog", at=at(31))
    ledger.renew_lease("run-a", ttl_seconds=TTL, at=at(32))  # fails: ended by the re-announce; a restart would not help
    ledger.start_lease("run-a", ttl_seconds=TTL, at=at(33))  # even a lease started again does not give it back
    with pytest.raises(LeaseLost, match="held by event:e1"):
        ledger.start_action(action(inc, "uncordon_node", "run-a", 34), fence=Fence.of("run-a"))


def test_a_subflow_writes_under_its_parents_claim_and_keeps_it(ledger: Ledger) -> None:
    inc = held_by(ledger, "triage-1")
    sub = Fence.of("replace-1", "triage-1")
    ledger.start_lease("replace-1", ttl_seconds=TTL, at=at(1))
    row, _ = ledger.start_action(action(inc, "cordon_node", "replace-1", 2), fence=sub)
    assert row.outcome is ActionOutcome.RUNNING
    rec = ledger.set_incident_status(inc, IncidentStatus.ESCALATED, detail="no spare", at=at(3), fence=sub)
    assert (rec.status, rec.flow_run_id) == (IncidentStatus.ESCALATED, "triage-1")  # the parent's claim stays
    # the parent closes it afterwards: its own fence still holds
    assert ledger.set_incident_status(inc, IncidentStatus.ESCALATED, at=at(4), fence=Fence.of("triage-1"))
    # an incident nobody claimed (a run by hand, an escalation) becomes the writer's
    free, _ = ledger.open_incident(Incident(node="gpu-002", signal="xid", gpu=0, xid=79), window_seconds=600)
    assert ledger.set_incident_status(free.id, IncidentStatus.ESCALATED, fence=Fence.of("esc-1")).flow_run_id == "esc-1"
    # without a fence (the receiver, a person's CLI) nothing is checked
    assert ledger.start_action(action(inc, "note", "cli", 5))[1]


def test_a_takeover_racing_a_write_never_leaves_the_old_runs_action_running(ledger: Ledger) -> None:
    """The old run writes with a clock on which its lease is still live (it checked just in time), the new run
    takes over on a clock past it: in either order the old run's drain is refused or recorded abandoned. Without
    the row lock, PostgreSQL lets the write commit after the takeover's settling: a drain left running forever."""
    for round_ in range(12):
        node = f"gpu-{round_:03d}"
        run_a, run_b = f"a-{round_}", f"b-{round_}"
        rec, _ = ledger.open_incident(Incident(node=node, signal="xid", gpu=3, xid=79, first_seen=T0, last_seen=T0),
                                      window_seconds=600)
        ledger.start_lease(run_a, ttl_seconds=TTL, at=at(0))
        assert ledger.claim(rec.id, run_a, at=at(0)).claimed

        def one(i: int, node=node, rec=rec, run_a=run_a, run_b=run_b):  # this round's, bound now
            if i == 0:
                return ledger.start_action(Action(kind="drain_node", node=node, incident_id=rec.id,
                                                  requested_by=run_a, started_at=at(29)), fence=Fence.of(run_a))
            return ledger.claim(rec.id, run_b, at=at(31))

        wrote, took = race(2, one)
        assert took.claimed and took.took_over_from == run_a, took
        drains = ledger.actions(incident_id=rec.id, kind="drain_node")
        if isinstance(wrote, LeaseLost):
            assert drains == []
        else:
            assert not isinstance(wrote, Exception), wrote
            [drain] = drains
            assert drain.outcome is ActionOutcome.FAILED and drain.error.startswith("abandoned:"), drain
            assert took.abandoned == (drain.id,)


RACK_OPENS = {"scope_kind": "rack", "scope": "r1", "from_state": "closed", "to_state": "open",
              "reason": "3 failures in 10 min", "by": "gate"}
CLUSTER_OPENS = RACK_OPENS | {"scope_kind": "cluster", "scope": "cluster", "reason": "5% down"}


def node_writes(ledger: Ledger, inc: int, fence: Fence, s: float) -> dict:
    """What a run writes about a node and the breakers while it acts for incident `inc`."""
    return {
        "quarantine": lambda: ledger.transition("gpu-001", NodeState.QUARANTINED, reason="xid 79", requested_by="r",
                                                at=at(s), incident_id=inc, fence=fence),
        "validation": lambda: ledger.record_validation("gpu-001", level="quick", passed=True, summary={}, at=at(s),
                                                       requested_by="r", incident_id=inc, fence=fence),
        "breaker events": lambda: ledger.record_breaker_events([RACK_OPENS, CLUSTER_OPENS], at=at(s),
                                                               incident_id=inc, fence=fence),
        "breaker event": lambda: ledger.record_breaker_event("rack", "r1", "closed", "open", reason="3 in 10 min",
                                                             by="gate", at=at(s), incident_id=inc, fence=fence),
    }


def test_a_run_taken_over_moves_no_node_and_no_breaker(ledger: Ledger, add_node) -> None:
    add_node("gpu-001", NodeState.ACTIVE)
    inc = held_by(ledger, "run-a")
    ledger.start_lease("run-b", ttl_seconds=TTL, at=at(40))
    assert ledger.claim(inc, "run-b", at=at(40)).took_over_from == "run-a"
    moves_before = ledger.transitions("gpu-001")

    for _what, write in node_writes(ledger, inc, Fence.of("run-a"), 41).items():
        with pytest.raises(LeaseLost, match="no longer holds incident .* held by run-b"):
            write()
    node = ledger.get_node("gpu-001")
    assert (node.state, node.validated_at) == (NodeState.ACTIVE, None)  # nothing of run-a's written
    assert ledger.transitions("gpu-001") == moves_before
    assert ledger.validations("gpu-001") == [] and ledger.breaker_events() == []

    # the run that took over writes as usual, every breaker event of one decision together
    done = {what: write() for what, write in node_writes(ledger, inc, Fence.of("run-b"), 42).items()}
    assert ledger.get_node("gpu-001").state is NodeState.QUARANTINED
    assert done["quarantine"].from_state is NodeState.ACTIVE
    assert [(e.scope_kind, e.scope) for e in done["breaker events"]] == [("rack", "r1"), ("cluster", "cluster")]
    assert len(ledger.breaker_events()) == 3 and len(ledger.validations("gpu-001")) == 1


def test_a_node_move_after_the_runs_lease_ran_out_is_refused(ledger: Ledger, add_node) -> None:
    """Stalled past its lease, nobody has taken over yet: the run still moves nothing (the watchdog may hand the
    incident on any moment)."""
    add_node("gpu-001", NodeState.ACTIVE)
    inc = held_by(ledger, "run-a")
    for _what, write in node_writes(ledger, inc, Fence.of("run-a"), TTL + 1).items():
        with pytest.raises(LeaseLost, match="its lease has expired"):
            write()
    assert ledger.get_node("gpu-001").state is NodeState.ACTIVE and ledger.breaker_events() == []


def test_a_subflow_moves_nodes_and_breakers_under_its_parents_claim(ledger: Ledger, add_node) -> None:
    add_node("gpu-001", NodeState.ACTIVE)
    inc = held_by(ledger, "triage-1")
    ledger.start_lease("replace-1", ttl_seconds=TTL, at=at(1))
    for _what, write in node_writes(ledger, inc, Fence.of("replace-1", "triage-1"), 2).items():
        write()
    assert ledger.get_node("gpu-001").state is NodeState.QUARANTINED
    assert len(ledger.breaker_events()) == 3
    assert ledger.get_incident(inc).flow_run_id == "triage-1"  # moving a node never touches the claim
    # a run that is not in the lineage is refused even while the holder is alive
    with pytest.raises(LeaseLost, match="held by triage-1"):
        ledger.transition("gpu-001", NodeState.REPAIR, reason="replaced", requested_by="x", at=at(3),
                          incident_id=inc, fence=Fence.of("replace-2"))
    # without a fence (the operator's CLI, the spare cycle) nothing is checked, lease or no lease
    assert ledger.transition("gpu-001", NodeState.REPAIR, reason="by hand", requested_by="alice",
                             at=at(TTL + 10)).to_state is NodeState.REPAIR
    assert ledger.record_breaker_event("rack", "r1", "open", "closed", reason="approved", by="alice",
                                       at=at(TTL + 10)).to_state == "closed"


def test_a_refused_batch_of_breaker_events_writes_none(ledger: Ledger) -> None:
    """All or none: a bad event in the batch leaves the good ones unwritten too."""
    with pytest.raises(ValueError):
        ledger.record_breaker_events([RACK_OPENS, RACK_OPENS | {"scope_kind": "row"}])
    assert ledger.breaker_events() == []
    assert ledger.record_breaker_events([]) == []
