"""An incident whose run stood down for the operator's change (recorded `respect_drift`) and then died is closed
as such by the watchdog, never re-announced for a new run that would re-cordon the node (issue 32, item 3). The
close is a compare-and-swap like the watchdog's other moves. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, utcnow
from remedy.ledger.operator import RESPECT_DRIFT_KIND
from remedy.receiver.watchdog import LeaseWatchdog


def _stranded(ledger, run: str, *, stood_down: bool, node: str = "gpu003") -> int:
    rec, _ = ledger.open_incident(Incident(node=node, signal="xid", gpu=2, xid=145), window_seconds=600)
    ago = utcnow() - timedelta(seconds=60)
    ledger.start_lease(run, ttl_seconds=30, process="host:4242", at=ago)
    assert ledger.claim(rec.id, run, at=ago).claimed
    if stood_down:
        ledger.start_action(Action(kind=RESPECT_DRIFT_KIND, node=node, requested_by=run, incident_id=rec.id,
                                   outcome=ActionOutcome.SKIPPED, error="gpu003: uncordoned by hand"))
    return rec.id


def test_a_stood_down_incident_of_a_gone_run_is_closed_not_reannounced(ledger):
    stood = _stranded(ledger, "run-a", stood_down=True)
    other = _stranded(ledger, "run-b", stood_down=False, node="gpu004")
    sent: list = []
    dog = LeaseWatchdog(ledger, sent.extend, every_seconds=60, max_reannounces=3, show_gone=None)
    done = {d["incident_id"]: d["action"] for d in dog.sweep()}
    assert done == {stood: "closed-stood-down", other: "reannounced"}
    assert [e["payload"]["incident_id"] for e in sent] == [other]  # no new run for the stood-down one
    rec = ledger.get_incident(stood)
    assert rec.status is IncidentStatus.IGNORED and "operator's change stands" in rec.detail
    assert [a.kind for a in ledger.actions(incident_id=stood, kind="close_stood_down")] == ["close_stood_down"]
    assert dog.sweep() == []  # settled: nothing more to do


def test_closing_a_stood_down_incident_is_a_compare_and_swap(ledger):
    stood = _stranded(ledger, "run-a", stood_down=True)
    ledger.start_lease("run-new", ttl_seconds=30, process="host:1")
    assert ledger.claim(stood, "run-new").claimed  # a live run took it over first
    assert not ledger.close_stood_down(stood, "run-a", reason="late", by="watchdog")
    assert ledger.get_incident(stood).status is IncidentStatus.ACTING
