"""Run leases on SQLite and PostgreSQL: a gone run's incident is taken over once, its leftovers settled; a live
holder keeps it; the watchdog's re-announce and escalation are compare-and-swaps; the keeper renews from a thread
and notices a lost lease."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus
from remedy.ledger import LeaseKeeper, LeaseLost, Ledger
from remedy.ledger.leases import REANNOUNCE_KIND, STRANDED_KIND, TAKEOVER_KIND

from .conftest import race

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TTL = 30.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def incident(ledger: Ledger, node: str = "gpu-001") -> int:
    rec, _ = ledger.open_incident(Incident(node=node, signal="xid", gpu=3, xid=79, first_seen=T0, last_seen=T0),
                                  window_seconds=600)
    return rec.id


def held_by(ledger: Ledger, run: str, *, at_s: float = 0.0, node: str = "gpu-001") -> int:
    inc = incident(ledger, node)
    ledger.start_lease(run, ttl_seconds=TTL, process="host:1", at=at(at_s))
    assert ledger.claim(inc, run, at=at(at_s)).claimed
    return inc


def test_a_live_lease_keeps_the_incident_and_renewal_extends_it(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    assert ledger.renew_lease("run-a", ttl_seconds=TTL, at=at(25))
    refused = ledger.claim(inc, "run-b", at=at(50))  # 25 s after the renewal: still alive
    assert not refused.claimed and refused.holder == "run-a"
    assert refused.holder_lease is not None and refused.holder_lease.expires_at == at(55)
    assert ledger.get_incident(inc).flow_run_id == "run-a"
    assert ledger.claim(inc, "run-a", at=at(50)).claimed  # the holder asking again


def test_an_expired_lease_is_taken_over_once_with_its_leftovers_settled(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    cordon, _ = ledger.start_action(Action(kind="cordon_node", node="gpu-001", incident_id=inc, requested_by="run-a",
                                           outcome=ActionOutcome.SUCCEEDED, started_at=at(1)))
    drain, _ = ledger.start_action(Action(kind="drain_node", node="gpu-001", incident_id=inc, requested_by="run-a",
                                          started_at=at(2)))
    asked = ledger.request_approval(incident_id=inc, flow_run_id="run-a", kind="breaker:rack:r1", at=at(3))
    # a renewal after expiry fails: the run is gone and must stop
    assert not ledger.renew_lease("run-a", ttl_seconds=TTL, at=at(31))

    results = race(4, lambda i: ledger.claim(inc, f"run-{i}", at=at(31)))
    winners = [r for r in results if r.claimed]
    assert len(winners) == 1, results
    won = winners[0]
    assert won.took_over_from == "run-a" and won.abandoned == (drain.id,) and won.reaped == ("run-a",)
    rec = ledger.get_incident(inc)
    assert rec.status is IncidentStatus.ACTING and rec.flow_run_id == won.holder
    assert "taken over by" in rec.detail and "run-a" in rec.detail
    left = ledger.get_action(drain.id)
    assert left.outcome is ActionOutcome.FAILED and left.error.startswith("abandoned: taken over by")
    assert ledger.get_action(cordon.id).outcome is ActionOutcome.SUCCEEDED  # finished steps stay: they replay
    closed = ledger.get_approval(asked.id)
    assert (closed.decision, closed.decided_by) == ("timeout", "gpu-remedy") and "is gone" in closed.reason
    gone = ledger.get_lease("run-a")
    assert gone.ended_at == at(31) and gone.end_reason.startswith("gone:")
    [note] = ledger.actions(incident_id=inc, kind=TAKEOVER_KIND)
    assert note.requested_by == won.holder and note.detail["from"] == "run-a"
    assert note.detail["abandoned"] == [drain.id]


def test_a_holder_without_a_lease_is_left_to_the_caller(ledger: Ledger) -> None:
    inc = incident(ledger)
    assert ledger.claim_incident(inc, "cli")
    refused = ledger.claim(inc, "run-b", at=at(3600))
    assert not refused.claimed and refused.holder == "cli" and refused.holder_lease is None
    left, _ = ledger.start_action(Action(kind="drain_node", node="gpu-001", incident_id=inc, requested_by="cli"))
    took = ledger.take_over_incident(inc, "run-b", expected_holder="cli", reason="its Prefect run crashed",
                                     holder_over=True)
    assert took.claimed and took.took_over_from == "cli" and took.abandoned == (left.id,)
    assert not ledger.take_over_incident(inc, "run-c", expected_holder="cli", reason="late", holder_over=True).claimed


def test_a_person_reopening_a_settled_incident_leaves_a_live_run_alone(ledger: Ledger) -> None:
    """The last run of an escalated incident still waits for "Replace?"; a person starts a run by hand meanwhile:
    the incident changes hands, the waiting run's question and lease stay as they are."""
    inc = incident(ledger)
    ledger.start_lease("escalate-run", ttl_seconds=TTL, at=at(0))
    ledger.set_incident_status(inc, IncidentStatus.ESCALATED, flow_run_id="escalate-run", at=at(0))
    asked = ledger.request_approval(incident_id=inc, flow_run_id="escalate-run", kind="replace", at=at(1))
    took = ledger.take_over_incident(inc, "person-run", expected_holder="escalate-run", reason="re-opened by a person",
                                     holder_over=False, at=at(2))
    assert took.claimed and took.reaped == () and took.abandoned == ()
    assert ledger.get_approval(asked.id).pending
    assert ledger.get_lease("escalate-run").live(at(2))


def test_settled_incidents_are_not_claimed(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    ledger.set_incident_status(inc, IncidentStatus.RESOLVED)
    refused = ledger.claim(inc, "run-b", at=at(100))
    assert not refused.claimed and refused.status is IncidentStatus.RESOLVED


def test_an_ended_lease_is_gone_at_once(ledger: Ledger) -> None:
    inc = held_by(ledger, "run-a")
    assert ledger.end_lease("run-a", reason="finished", at=at(5))
    assert not ledger.end_lease("run-a", reason="again", at=at(6))
    assert ledger.run_gone("run-a", at=at(5)).end_reason == "finished"
    assert ledger.run_gone("never-seen") is None
    assert [r.id for r, _ in ledger.stranded_incidents(at=at(5))] == [inc]
    assert ledger.claim(inc, "run-b", at=at(5)).claimed


def test_gone_runs_are_the_expired_ones_nobody_ended(ledger: Ledger) -> None:
    ledger.start_lease("dead", ttl_seconds=TTL, at=at(0))
    ledger.start_lease("finished", ttl_seconds=TTL, at=at(0))
    ledger.start_lease("alive", ttl_seconds=TTL, at=at(0))
    ledger.end_lease("finished", reason="finished", at=at(5))
    ledger.renew_lease("alive", ttl_seconds=TTL, at=at(20))
    assert [lease.run_id for lease in ledger.gone_runs(at=at(40))] == ["dead"]
    assert ledger.end_lease("dead", reason="gone: reaped", at=at(40))
    assert ledger.gone_runs(at=at(40)) == []


def test_restarting_a_lease_revives_it(ledger: Ledger) -> None:
    ledger.start_lease("run-a", ttl_seconds=TTL, at=at(0))
    ledger.end_lease("run-a", reason="finished", at=at(1))
    again = ledger.start_lease("run-a", ttl_seconds=TTL, process="host:2", at=at(2))
    assert again.live(at(3)) and again.acquired_at == at(0) and again.process == "host:2"


def test_watchdog_reannounce_and_escalate_are_compare_and_swaps(ledger: Ledger) -> None:
    live = held_by(ledger, "run-live", node="gpu-002")
    dead = held_by(ledger, "run-dead", node="gpu-003", at_s=-100)
    other = held_by(ledger, "run-other", node="gpu-004", at_s=-100)
    assert ledger.renew_lease("run-live", ttl_seconds=TTL, at=at(10))
    stranded = ledger.stranded_incidents(at=at(20))
    assert [(r.id, lease.run_id) for r, lease in stranded] == [(dead, "run-dead"), (other, "run-other")]
    assert not ledger.reannounce_incident(live, "run-live", "event:x", reason="r", by="watchdog", at=at(20))

    assert ledger.reannounce_incident(dead, "run-dead", "event:e1", reason="re-announced: run-dead is gone",
                                      by="watchdog", at=at(20), detail={"event_id": "e1"})
    rec = ledger.get_incident(dead)
    assert (rec.status, rec.flow_run_id, rec.detail) == (IncidentStatus.OPEN, "event:e1",
                                                         "re-announced: run-dead is gone")
    assert not ledger.reannounce_incident(dead, "run-dead", "event:e2", reason="again", by="watchdog", at=at(21))
    assert ledger.reannounces(dead) == 1
    [note] = ledger.actions(incident_id=dead, kind=REANNOUNCE_KIND)
    assert note.detail["event_id"] == "e1" and note.requested_by == "watchdog"
    assert ledger.claim(dead, "triage-2", at=at(22)).claimed  # the new run claims it as any open incident

    assert ledger.escalate_stranded(other, "run-other", reason="its runs keep dying: a person decides",
                                    by="watchdog", at=at(20))
    assert ledger.get_incident(other).status is IncidentStatus.ESCALATED
    assert len(ledger.actions(incident_id=other, kind=STRANDED_KIND)) == 1
    assert ledger.stranded_incidents(at=at(20)) == []


def test_keeper_renews_in_the_background_and_notices_a_lost_lease(db_url: str) -> None:
    with Ledger(db_url) as led:
        keeper = LeaseKeeper(led, ttl_seconds=1.0, renew_seconds=0.1, process="test:1")
        keeper.hold("run-k")
        keeper.hold("run-k")  # nested (an approval wait inside the run)
        first = led.get_lease("run-k").expires_at
        time.sleep(0.5)
        assert led.get_lease("run-k").expires_at > first  # renewed
        keeper.check("run-k")
        keeper.release("run-k")
        assert led.get_lease("run-k").ended_at is None  # one hold left
        # another process found the run gone and ended its lease: the next renewal notices, check() refuses
        led.end_lease("run-k", reason="gone: taken over by run-z")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                keeper.check("run-k")
            except LeaseLost as exc:
                assert "taken over by run-z" in str(exc)
                break
            time.sleep(0.05)
        else:
            pytest.fail("the keeper never noticed the lost lease")
        keeper.release("run-k")
        assert not keeper.holds("run-k")
        assert led.get_lease("run-k").end_reason == "gone: taken over by run-z"  # not overwritten
        keeper.check("run-k")  # a run it does not hold: nothing to check


def test_a_renewal_round_during_a_hold_does_not_mark_the_new_run_lost(db_url: str) -> None:
    """The keeper's thread renews the runs it holds while another run's hold is still writing its lease. Seen on
    the embedded stack: the round's renewal found no lease yet, it read the lease back after the hold had started
    it, and it marked a live run lost ("it expired" 30 s in the future). Here the round runs exactly in that gap."""
    with Ledger(db_url) as led:
        renewed, held = threading.Event(), threading.Event()

        class Gap:  # the ledger, with the renewal round and the hold interleaved as they were seen
            def __getattr__(self, name):
                return getattr(led, name)

            def renew_lease(self, run_id, **kw):
                ok = led.renew_lease(run_id, **kw)
                renewed.set()
                held.wait(5)  # the hold starts the lease and returns before the round reads the lease back
                return ok

            def start_lease(self, run_id, **kw):
                renewed.wait(1)  # (with the fix the round never renews a lease still starting: no wait then)
                return led.start_lease(run_id, **kw)

        keeper = LeaseKeeper(Gap(), ttl_seconds=30.0, renew_seconds=60.0, process="test:1")
        hold = threading.Thread(target=keeper.hold, args=("run-new",))
        hold.start()
        deadline = time.monotonic() + 5
        while not keeper.holds("run-new") and time.monotonic() < deadline:
            time.sleep(0.001)
        round_ = threading.Thread(target=keeper.renew_now)  # the background round, in the gap
        round_.start()
        hold.join(5)
        held.set()
        round_.join(5)
        keeper.check("run-new")  # not lost
        assert led.get_lease("run-new").live(datetime.now(UTC))
        keeper.renew_now()  # the next round renews it
        keeper.check("run-new")
        keeper.release("run-new")


class FakeClock:
    """A clock the test moves: wall time for the ledger (`now`), seconds for the keeper (`monotonic`)."""

    def __init__(self, start: datetime = T0) -> None:
        self.at = start

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return (self.at - T0).total_seconds()

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def test_the_ledger_reads_its_clock_so_a_dead_run_is_taken_over_without_waiting_out_its_lease(db_url: str) -> None:
    """The crash tests' shortcut: nothing passes `at`, the clock moves past the lease, the takeover happens."""
    clock = FakeClock()
    with Ledger(db_url, clock=clock.now) as led:
        inc = incident(led)
        assert led.start_lease("run-dead", ttl_seconds=TTL, process="host:1").acquired_at == T0
        assert led.claim(inc, "run-dead").claimed
        clock.advance(TTL - 1)
        assert led.run_gone("run-dead") is None and not led.claim(inc, "run-new").claimed  # alive for 1 s more
        assert led.stranded_incidents() == []
        clock.advance(1)
        assert led.run_gone("run-dead").expires_at == at(TTL)
        assert [r.id for r, _ in led.stranded_incidents()] == [inc]
        taken = led.claim(inc, "run-new")
        assert taken.claimed and taken.took_over_from == "run-dead"
        [note] = led.actions(incident_id=inc, kind=TAKEOVER_KIND)
        assert note.started_at == at(TTL)  # written on the ledger's clock too


def test_the_keeper_renews_before_acting_once_half_the_lease_has_passed_on_its_clock(db_url: str) -> None:
    """check() is free while renewals are fresh; once the last one is older than ttl/2 (a stalled renewal thread)
    it renews first, and a lease that meanwhile ran out on the ledger's clock makes it refuse."""
    clock = FakeClock()
    with Ledger(db_url, clock=clock.now) as led:
        calls: list[str] = []

        class Counting:
            def __getattr__(self, name):
                return getattr(led, name)

            def renew_lease(self, run_id, **kw):
                done = led.renew_lease(run_id, **kw)
                calls.append(run_id)  # after the write: the wait below must not race the thread's first renewal
                return done

        # renew_seconds far beyond the test: the background thread renews once at the start, then sleeps
        keeper = LeaseKeeper(Counting(), ttl_seconds=TTL, renew_seconds=3600.0, process="test:1",
                             monotonic=clock.monotonic)
        keeper.hold("run-k")
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:  # the thread's first round
            time.sleep(0.01)
        before = len(calls)
        clock.advance(TTL / 2 - 1)
        keeper.check("run-k")
        assert len(calls) == before  # fresh enough: no ledger round trip
        clock.advance(2)
        keeper.check("run-k")
        assert len(calls) == before + 1 and led.get_lease("run-k").expires_at == clock.now() + timedelta(seconds=TTL)
        clock.advance(TTL + 1)  # the process stalled past its lease
        with pytest.raises(LeaseLost, match="stopped renewing its lease"):
            keeper.check("run-k")
        keeper.release("run-k")
