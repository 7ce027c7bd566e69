"""Lease expiry is judged on the database server's clock, never on the clock of the host that asks (issue 32,
residual risk: "lease expiry compares different hosts' clocks"). On SQLite and PostgreSQL.

A host's wall clock is `remedy.domain.model.utcnow` (what a ledger without a test clock stamps records with); the
tests set it an hour off, as a host with a broken NTP would be, and show that no lease decision moves with it.
`Ledger.lease_offset` moves the database's time for one Ledger object: how a test gets past a lease without
waiting it out while the database's clock is still the one read."""

from __future__ import annotations

from datetime import timedelta

import pytest

from remedy.domain import model
from remedy.domain.model import Action, ActionOutcome, Incident
from remedy.ledger import Fence, LeaseLost, Ledger
from remedy.ledger.base import database_now
from remedy.ledger.leases import TAKEOVER_KIND

TTL = 30.0
HOUR = timedelta(hours=1)


def _host_clock_off(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    real = model.utcnow
    monkeypatch.setattr(model, "utcnow", lambda: real() + by)


def _db_now(led: Ledger):
    with led.engine.connect() as conn:
        return database_now(conn)


def _held(led: Ledger, run: str) -> int:
    rec, _ = led.open_incident(Incident(node="gpu-001", signal="xid", gpu=3, xid=79), window_seconds=600)
    led.start_lease(run, ttl_seconds=TTL, process="host-a:1")
    assert led.claim(rec.id, run).claimed
    return rec.id


def test_a_host_whose_clock_runs_ahead_takes_over_no_live_run(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger(db_url) as host_a:
        inc = _held(host_a, "run-a")
    _host_clock_off(monkeypatch, HOUR)  # host B's wall clock is an hour ahead: run-a's lease looks long expired
    with Ledger(db_url) as host_b:
        assert host_b.run_gone("run-a") is None
        assert host_b.stranded_incidents() == [] and host_b.gone_runs() == []
        taken = host_b.claim(inc, "run-b")
        assert not taken.claimed and taken.holder == "run-a"
        assert not host_b.reannounce_incident(inc, "run-a", "event:e1", reason="looks gone", by="watchdog")
        # a lease B starts is on the database's clock too, not an hour ahead
        lease = host_b.start_lease("run-b", ttl_seconds=TTL, process="host-b:1")
        assert abs(lease.expires_at - (_db_now(host_b) + timedelta(seconds=TTL))) < timedelta(seconds=10)
    assert host_b.get_incident(inc).flow_run_id == "run-a"


def test_a_host_whose_clock_runs_behind_cannot_write_on_a_lease_that_ran_out(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger(db_url) as host_a:
        inc = _held(host_a, "run-a")
        _host_clock_off(monkeypatch, -HOUR)  # run-a's host runs an hour behind: its lease looks fresh to it
        host_a.lease_offset = timedelta(seconds=TTL + 1)  # ... while on the database's clock it has run out
        with pytest.raises(LeaseLost, match="its lease has expired"):
            host_a.start_action(Action(kind="drain_node", node="gpu-001", incident_id=inc, requested_by="run-a"),
                                fence=Fence.of("run-a"))
        with pytest.raises(LeaseLost, match="its lease has expired"):
            host_a.check_fence(inc, Fence.of("run-a"))
        assert not host_a.renew_lease("run-a", ttl_seconds=TTL)  # a renewal after expiry does not revive it
        assert host_a.actions(incident_id=inc, kind="drain_node") == []


def test_tests_move_the_database_clock_with_lease_offset(db_url: str) -> None:
    with Ledger(db_url) as led:
        inc = _held(led, "run-a")
        led.start_action(Action(kind="cordon_node", node="gpu-001", incident_id=inc, requested_by="run-a"),
                         fence=Fence.of("run-a"))
        other = Ledger(db_url)
        try:
            other.lease_offset = timedelta(seconds=TTL - 5)
            assert other.run_gone("run-a") is None and not other.claim(inc, "run-b").claimed
            other.lease_offset = timedelta(seconds=TTL + 1)
            assert other.run_gone("run-a") is not None
            taken = other.claim(inc, "run-b")
            assert taken.claimed and taken.took_over_from == "run-a"
            [note] = other.actions(incident_id=inc, kind=TAKEOVER_KIND)
            # stamped on the database's clock, moved by the offset
            assert abs(note.started_at - (_db_now(other) + other.lease_offset)) < timedelta(seconds=10)
        finally:
            other.close()
        # the ledger whose clock did not move sees run-b's fresh lease-less claim and run-a refused
        with pytest.raises(LeaseLost, match="held by run-b"):
            led.start_action(Action(kind="drain_node", node="gpu-001", incident_id=inc, requested_by="run-a",
                                    outcome=ActionOutcome.RUNNING), fence=Fence.of("run-a"))


def test_a_ledger_with_a_test_clock_keeps_its_leases_on_it(db_url: str) -> None:
    """The simulator and the crash tests give the ledger a clock: then leases follow it, not the database."""
    base = model.utcnow() - timedelta(days=3)
    now = [base]
    with Ledger(db_url, clock=lambda: now[0]) as led:
        lease = led.start_lease("run-t", ttl_seconds=TTL)
        assert lease.acquired_at == base
        now[0] = base + timedelta(seconds=TTL + 1)
        assert led.run_gone("run-t") is not None
