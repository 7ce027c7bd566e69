"""Actions (idempotent start, finish once), circuit-breaker events and approvals (first decision wins)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Action, ActionOutcome, Incident
from remedy.ledger import IdempotentReplay, Ledger, LedgerConflict, RecordNotFound

from .conftest import race

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def cordon(key: str | None = "run-1/cordon", **kw) -> Action:
    return Action(kind="cordon_node", node="gpu-001", requested_by="run-1", idempotency_key=key, **kw)


def test_start_action_is_idempotent_by_key(ledger: Ledger) -> None:
    first, created = ledger.start_action(cordon(detail={"taint": "remedy.io/quarantine"}))
    assert created and first.outcome is ActionOutcome.RUNNING and first.detail == {"taint": "remedy.io/quarantine"}
    again, created = ledger.start_action(cordon(detail={"different": True}))
    assert not created and again == first
    assert len(ledger.actions(node="gpu-001")) == 1
    with pytest.raises(IdempotentReplay, match="already used for cordon_node on gpu-001"):
        ledger.start_action(Action(kind="drain_node", node="gpu-001", idempotency_key="run-1/cordon"))
    # Without a key every start is its own row.
    ledger.start_action(cordon(key=None))
    ledger.start_action(cordon(key=None))
    assert len(ledger.actions(kind="cordon_node")) == 3


def test_find_by_key_and_key_prefix(ledger: Ledger) -> None:
    for key in ("incident-7:cordon_node:gpu-001", "incident-7:cordon_node:gpu-001#2", "incident-70:cordon_node:x",
                "incident-7_cordon"):
        ledger.start_action(Action(kind="cordon_node", node="gpu-001", idempotency_key=key))
    chain = ledger.actions(key_prefix="incident-7:cordon_node:gpu-001")
    assert [a.idempotency_key for a in chain] == ["incident-7:cordon_node:gpu-001", "incident-7:cordon_node:gpu-001#2"]
    # LIKE wildcards in the prefix are literal: "_" does not match ":".
    assert [a.idempotency_key for a in ledger.actions(key_prefix="incident-7_")] == ["incident-7_cordon"]
    assert ledger.find_action("incident-70:cordon_node:x").node == "gpu-001"
    assert ledger.find_action("nope") is None


def test_concurrent_starts_with_one_key_write_one_row(ledger: Ledger) -> None:
    results = race(6, lambda i: ledger.start_action(cordon()))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(created for _, created in results) == 1
    assert len({rec.id for rec, _ in results}) == 1 and len(ledger.actions()) == 1


def test_finish_action_once(ledger: Ledger) -> None:
    rec, _ = ledger.start_action(cordon(detail={"before": 1}))
    done = ledger.finish_action(rec.id, ActionOutcome.SUCCEEDED, detail={"after": 2}, at=T0 + timedelta(seconds=5))
    assert done.outcome is ActionOutcome.SUCCEEDED and done.finished_at == T0 + timedelta(seconds=5)
    assert done.detail == {"before": 1, "after": 2}
    assert ledger.finish_action(rec.id, ActionOutcome.SUCCEEDED) == done  # a retried task: unchanged
    with pytest.raises(LedgerConflict, match=f"action {rec.id} \\(cordon_node on gpu-001\\) already finished as succeeded"):
        ledger.finish_action(rec.id, ActionOutcome.FAILED, error="late")
    assert ledger.get_action(rec.id) == done
    with pytest.raises(ValueError, match="'running' is not a finishing outcome"):
        ledger.finish_action(rec.id, ActionOutcome.RUNNING)
    with pytest.raises(RecordNotFound, match="action not found: 999"):
        ledger.finish_action(999, ActionOutcome.FAILED)


def test_concurrent_finishes_one_outcome_wins(ledger: Ledger) -> None:
    rec, _ = ledger.start_action(cordon())
    outcomes = [ActionOutcome.SUCCEEDED, ActionOutcome.FAILED]
    results = race(2, lambda i: ledger.finish_action(rec.id, outcomes[i], detail={"by": i}))
    wins = [r for r in results if not isinstance(r, Exception)]
    assert len(wins) == 1 and isinstance([r for r in results if r not in wins][0], LedgerConflict), results
    assert ledger.get_action(rec.id).outcome is wins[0].outcome


def test_action_recorded_as_already_over_is_finished_at_start(ledger: Ledger) -> None:
    refused, _ = ledger.start_action(Action(kind="cordon_node", node="gpu-001", started_at=T0,
                                            outcome=ActionOutcome.SKIPPED, error="breaker open for rack r1"))
    assert refused.finished_at == T0 and refused.error == "breaker open for rack r1"
    with pytest.raises(LedgerConflict, match="already finished as skipped"):
        ledger.finish_action(refused.id, ActionOutcome.SUCCEEDED)
    running, _ = ledger.start_action(Action(kind="drain_node", node="gpu-001", started_at=T0))
    assert running.finished_at is None


def test_action_links_to_incident_and_dry_run(ledger: Ledger) -> None:
    inc, _ = ledger.open_incident(Incident("gpu-001", "xid", gpu=0, xid=79), window_seconds=600)
    rec, _ = ledger.start_action(Action(kind="drain_node", node="gpu-001", incident_id=inc.id, dry_run=True,
                                        outcome=ActionOutcome.PLANNED))
    assert rec.dry_run and rec.outcome is ActionOutcome.PLANNED
    assert [a.id for a in ledger.actions(incident_id=inc.id)] == [rec.id]
    with pytest.raises(RecordNotFound, match="incident not found: 4242"):
        ledger.start_action(Action(kind="drain_node", node="gpu-001", incident_id=4242))
    with pytest.raises(ValueError, match="action detail is not JSON-serialisable"):
        ledger.start_action(Action(kind="drain_node", node="gpu-001", detail={"when": datetime.now()}))
    with pytest.raises(ValueError, match="action kind must be a non-empty string"):
        ledger.start_action(Action(kind="", node="gpu-001"))
    assert len(ledger.actions()) == 1


def test_breaker_events_and_latest_states(ledger: Ledger) -> None:
    ledger.record_breaker_event("rack", "r1", "closed", "open", reason="3 failures in 10 min", by="replace/run-1",
                                at=T0)
    ledger.record_breaker_event("cluster", "cluster", "closed", "open", reason="5% down", by="run-2",
                                at=T0 + timedelta(minutes=1))
    ledger.record_breaker_event("rack", "r1", "open", "half-open", reason="cool-down over", by="run-3",
                                at=T0 + timedelta(minutes=30))
    ledger.record_breaker_event("pdu", "p1", "closed", "open", reason="power", by="run-4", at=T0 + timedelta(hours=1))
    assert ledger.latest_breaker_states() == {("rack", "r1"): "half-open", ("cluster", "cluster"): "open",
                                              ("pdu", "p1"): "open"}
    since = ledger.breaker_events(since=T0 + timedelta(minutes=1))
    assert [(e.scope_kind, e.to_state) for e in since] == [("cluster", "open"), ("rack", "half-open"), ("pdu", "open")]
    assert [e.to_state for e in ledger.breaker_events(scope_kind="rack", scope="r1")] == ["open", "half-open"]
    with pytest.raises(ValueError, match="breaker scope_kind: unknown value 'row'"):
        ledger.record_breaker_event("row", "x", "closed", "open", reason="r", by="b")
    with pytest.raises(ValueError, match="reason must be a non-empty string"):
        ledger.record_breaker_event("rack", "r1", "closed", "open", reason="", by="b")
    assert len(ledger.breaker_events()) == 4


def test_first_approval_decision_wins(ledger: Ledger) -> None:
    inc, _ = ledger.open_incident(Incident("gpu-001", "xid", gpu=0, xid=79), window_seconds=600)
    req = ledger.request_approval(incident_id=inc.id, flow_run_id="run-1", kind="replace_node")
    assert req.pending and req.decision is None
    ledger.set_approval_slack_ts(req.id, "1732262400.000100")
    done = ledger.decide_approval(req.id, decision="approve", decided_by="U123", reason="looks right")
    assert (done.decision, done.decided_by, done.slack_ts) == ("approve", "U123", "1732262400.000100")
    with pytest.raises(LedgerConflict, match=f"approval {req.id} already decided: approve by U123"):
        ledger.decide_approval(req.id, decision="timeout", decided_by="flow")
    assert ledger.get_approval(req.id) == done
    with pytest.raises(ValueError, match="approval decision: unknown value 'maybe'"):
        ledger.decide_approval(req.id, decision="maybe", decided_by="U1")
    with pytest.raises(RecordNotFound, match="approval not found: 77"):
        ledger.decide_approval(77, decision="deny", decided_by="U1")


def test_racing_decisions_one_wins(ledger: Ledger) -> None:
    req = ledger.request_approval(incident_id=None, flow_run_id="run-1", kind="retire_node")
    decisions = ["approve", "deny", "timeout"]
    results = race(3, lambda i: ledger.decide_approval(req.id, decision=decisions[i], decided_by=f"u{i}"))
    wins = [r for r in results if not isinstance(r, Exception)]
    assert len(wins) == 1 and sum(isinstance(r, LedgerConflict) for r in results) == 2, results
    assert ledger.get_approval(req.id).decision == wins[0].decision


def test_pending_filter(ledger: Ledger) -> None:
    inc, _ = ledger.open_incident(Incident("gpu-001", "xid", gpu=0, xid=79), window_seconds=600)
    a = ledger.request_approval(incident_id=inc.id, flow_run_id="run-1", kind="replace_node")
    b = ledger.request_approval(incident_id=None, flow_run_id="run-2", kind="retire_node")
    ledger.decide_approval(b.id, decision="deny", decided_by="U9")
    assert [x.id for x in ledger.approvals(pending=True)] == [a.id]
    assert [x.id for x in ledger.approvals(pending=False)] == [b.id]
    assert [x.id for x in ledger.approvals(incident_id=inc.id)] == [a.id]
    with pytest.raises(RecordNotFound, match="incident not found: 31337"):
        ledger.request_approval(incident_id=31337, flow_run_id="run-3", kind="replace_node")
