"""The lease watchdog: incidents left `acting` by a gone run are re-announced (a new event, so a new triage run) at
most `max_reannounces` times, then escalated to a person; a failed send changes nothing; the receiver's outbox loop
runs it. Events go over HTTP to a stand-in of Prefect's POST /api/events (tests/receiver/conftest.py)."""

from __future__ import annotations

import time
from datetime import timedelta

from remedy.config import load_settings
from remedy.domain.model import Incident, IncidentStatus, utcnow
from remedy.platform.dispatcher import triage_key
from remedy.receiver.events import PrefectEventSink, event_id
from remedy.receiver.server import build_receiver
from remedy.receiver.watchdog import LeaseWatchdog

from .conftest import TOKEN


def strand(ledger, incident_id: int, run: str) -> None:
    """`run` claimed the incident a minute ago and its process died: its 30 s lease ran out."""
    ago = utcnow() - timedelta(seconds=60)
    ledger.start_lease(run, ttl_seconds=30, process="host:4242", at=ago)
    assert ledger.claim(incident_id, run, at=ago).claimed


def open_incident(ledger, node: str = "gpu003") -> int:
    rec, _ = ledger.open_incident(Incident(node=node, signal="xid", gpu=2, xid=79), window_seconds=600)
    return rec.id


def test_reannounce_then_escalate_after_the_limit(ledger, event_stub):
    sink = PrefectEventSink(event_stub.api_url)
    gone, told = [], []
    dog = LeaseWatchdog(ledger, sink.send, every_seconds=60, max_reannounces=2,
                        show_gone=lambda runs, why: gone.append((runs, why)), notify=told.append)
    inc = open_incident(ledger)
    live = open_incident(ledger, "gpu004")
    ledger.start_lease("alive", ttl_seconds=30, process="host:1")
    assert ledger.claim(live, "alive").claimed
    first = event_id(ledger.get_incident(inc))

    ids = []
    for n, run in enumerate(["run-1", "run-2"], start=1):
        strand(ledger, inc, run)
        [done] = dog.sweep()
        assert done == {"incident_id": inc, "action": "reannounced", "from": run, "event_id": done["event_id"],
                        "reannounce": n}
        event = event_stub.events[-1]
        assert event["id"] == done["event_id"] and event["payload"]["reannounce"] == n
        assert event["payload"]["previous_run"] == run and event["event"] == "remedy.incident.opened"
        rec = ledger.get_incident(inc)
        assert rec.status is IncidentStatus.OPEN and rec.flow_run_id == f"event:{done['event_id']}"
        assert run in gone[-1][0] and "re-announced" in gone[-1][1]
        ids.append(done["event_id"])
    assert len({first, *ids}) == 3  # each announcement its own event: Prefect starts a new run for each
    assert len({triage_key(e["payload"]) for e in event_stub.events}) == 2  # and so does the embedded stack

    strand(ledger, inc, "run-3")  # its runs keep dying: a person decides now
    [done] = dog.sweep()
    assert done["action"] == "escalated" and "re-announced 2 time(s) already" in done["why"]
    rec = ledger.get_incident(inc)
    assert rec.status is IncidentStatus.ESCALATED and "a person decides" in rec.detail
    assert len(told) == 1 and f"incident {inc} on gpu003 needs a person" in told[0]
    assert len(event_stub.events) == 2
    assert ledger.get_incident(live).status is IncidentStatus.ACTING  # a live run's incident is never touched
    assert dog.sweep() == []


def test_a_send_that_fails_changes_nothing_and_is_retried_as_the_same_event(ledger, event_stub):
    sink = PrefectEventSink(event_stub.api_url)
    dog = LeaseWatchdog(ledger, sink.send, every_seconds=60, max_reannounces=3, show_gone=None)
    inc = open_incident(ledger)
    strand(ledger, inc, "run-1")
    event_stub.fail = True
    assert dog.sweep() == []  # logged; the incident stays as it was for the next round
    rec = ledger.get_incident(inc)
    assert rec.status is IncidentStatus.ACTING and rec.flow_run_id == "run-1"
    event_stub.fail = False
    [done] = dog.sweep()
    assert done["reannounce"] == 1 and [e["id"] for e in event_stub.events] == [done["event_id"]]


def test_gone_runs_are_reaped_even_without_an_incident(ledger):
    gone = []
    dog = LeaseWatchdog(ledger, lambda events: None, every_seconds=60, max_reannounces=3,
                        show_gone=lambda runs, why: gone.append(runs))
    ledger.start_lease("subflow-of-a-dead-run", ttl_seconds=30, at=utcnow() - timedelta(seconds=60))
    ledger.start_lease("finished", ttl_seconds=30)
    ledger.end_lease("finished", reason="finished")
    assert dog.sweep() == []
    assert gone == [["subflow-of-a-dead-run"]]
    assert ledger.get_lease("subflow-of-a-dead-run").end_reason.startswith("gone: stopped renewing")
    dog.sweep()
    assert len(gone) == 1  # once


def test_the_receivers_outbox_loop_runs_the_watchdog(ledger, event_stub):
    settings = load_settings(db_url=ledger.url, receiver={"token": TOKEN},
                             leases={"ttl_seconds": 30, "renew_seconds": 5, "watchdog_seconds": 0.1})
    receiver = build_receiver(settings, ledger, api_url=event_stub.api_url)
    inc = open_incident(ledger)
    strand(ledger, inc, "run-1")
    receiver.announcer.start()
    try:
        deadline = time.monotonic() + 20
        while not any(e["payload"].get("reannounce") for e in event_stub.events):
            assert time.monotonic() < deadline, "the watchdog never re-announced the incident"
            time.sleep(0.05)
    finally:
        receiver.announcer.stop()
    assert ledger.get_incident(inc).status is IncidentStatus.OPEN
