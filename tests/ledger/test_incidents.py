"""Incidents: dedup inside/outside the window, under concurrent receivers, claims and status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Incident, IncidentStatus, NodeState, Topology, incident_fingerprint
from remedy.ledger import Ledger, RecordNotFound

from .conftest import race

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
WINDOW = 600.0  # receiver.dedup_window_seconds default


def xid79(at: datetime, *, node: str = "gpu-001", gpu: int | None = 3, **kw) -> Incident:
    return Incident(node=node, signal="xid", gpu=gpu, xid=79, first_seen=at, last_seen=at, **kw)


def test_repeat_inside_window_bumps_the_same_incident(ledger: Ledger) -> None:
    first, created = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    assert created and first.count == 1 and first.status is IncidentStatus.OPEN
    assert first.fingerprint == incident_fingerprint("gpu-001", 3, "xid", 79)
    again, created = ledger.open_incident(xid79(T0 + timedelta(seconds=599)), window_seconds=WINDOW)
    assert not created and again.id == first.id and again.count == 2
    assert (again.first_seen, again.last_seen) == (T0, T0 + timedelta(seconds=599))
    # The window slides with last_seen: 590 s after the last repeat is still the same incident.
    third, created = ledger.open_incident(xid79(T0 + timedelta(seconds=1189)), window_seconds=WINDOW)
    assert not created and third.id == first.id and third.count == 3
    assert len(ledger.incidents()) == 1


def test_repeat_outside_window_opens_a_new_incident(ledger: Ledger) -> None:
    first, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    later, created = ledger.open_incident(xid79(T0 + timedelta(seconds=601)), window_seconds=WINDOW)
    assert created and later.id != first.id and later.count == 1
    assert ledger.get_incident(first.id).count == 1


def test_out_of_order_repeat_does_not_move_last_seen_back(ledger: Ledger) -> None:
    first, _ = ledger.open_incident(xid79(T0 + timedelta(seconds=60)), window_seconds=WINDOW)
    rec, created = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    assert not created and rec.id == first.id and rec.last_seen == T0 + timedelta(seconds=60)


def test_resolved_incident_is_not_reused(ledger: Ledger) -> None:
    first, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    resolved = ledger.set_incident_status(first.id, IncidentStatus.RESOLVED, detail="reset fixed it",
                                          at=T0 + timedelta(seconds=30))
    assert resolved.resolved_at == T0 + timedelta(seconds=30) and resolved.detail == "reset fixed it"
    again, created = ledger.open_incident(xid79(T0 + timedelta(seconds=60)), window_seconds=WINDOW)
    assert created and again.id != first.id


def test_different_gpu_signal_or_xid_are_different_incidents(ledger: Ledger) -> None:
    ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    _, c1 = ledger.open_incident(xid79(T0, gpu=4), window_seconds=WINDOW)
    _, c2 = ledger.open_incident(Incident("gpu-001", "xid", gpu=3, xid=48, first_seen=T0, last_seen=T0),
                                 window_seconds=WINDOW)
    _, c3 = ledger.open_incident(xid79(T0, node="gpu-002"), window_seconds=WINDOW)
    assert c1 and c2 and c3 and len(ledger.incidents()) == 4


def test_concurrent_receivers_make_one_incident(ledger: Ledger) -> None:
    n = 8
    results = race(n, lambda i: ledger.open_incident(xid79(T0 + timedelta(milliseconds=i)), window_seconds=WINDOW))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(created for _, created in results) == 1
    assert len({rec.id for rec, _ in results}) == 1
    (only,) = ledger.incidents()
    assert only.count == n and only.last_seen == T0 + timedelta(milliseconds=n - 1)


def test_severity_escalates_but_never_downgrades(ledger: Ledger) -> None:
    rec, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW, severity="warning")
    assert rec.severity == "warning"
    rec, _ = ledger.open_incident(xid79(T0 + timedelta(seconds=1)), window_seconds=WINDOW, severity="critical")
    assert rec.severity == "critical"
    rec, _ = ledger.open_incident(xid79(T0 + timedelta(seconds=2)), window_seconds=WINDOW, severity="warning")
    assert rec.severity == "critical"
    with pytest.raises(ValueError, match="severity: unknown value 'fatal'"):
        ledger.open_incident(xid79(T0), window_seconds=WINDOW, severity="fatal")
    with pytest.raises(ValueError, match="window_seconds must be a number >= 0"):
        ledger.open_incident(xid79(T0), window_seconds=-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ledger.open_incident(xid79(datetime(2026, 1, 1)), window_seconds=WINDOW)
    assert ledger.get_incident(rec.id).count == 3


def test_topology_snapshot_from_argument_or_node_row(ledger: Ledger, add_node) -> None:
    add_node("gpu-001", NodeState.ACTIVE, rack="r7")
    from_row, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    assert (from_row.rack, from_row.switch, from_row.pdu) == ("r7", "sw1", "pdu1")
    given, _ = ledger.open_incident(xid79(T0, node="gpu-unknown"), window_seconds=WINDOW,
                                    topology=Topology(rack="r2", switch="sw9", pdu="p3"))
    assert (given.rack, given.switch, given.pdu) == ("r2", "sw9", "p3")
    unknown, _ = ledger.open_incident(xid79(T0, node="gpu-unseen"), window_seconds=WINDOW)
    assert (unknown.rack, unknown.switch, unknown.pdu) == ("", "", "")


def test_claim_is_a_compare_and_swap(ledger: Ledger) -> None:
    rec, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    results = race(4, lambda i: ledger.claim_incident(rec.id, f"run-{i}"))
    assert results.count(True) == 1 and results.count(False) == 3, results
    winner = f"run-{results.index(True)}"
    held = ledger.get_incident(rec.id)
    assert held.status is IncidentStatus.ACTING and held.flow_run_id == winner
    assert ledger.claim_incident(rec.id, winner) is True  # the holder retrying its claim
    assert ledger.claim_incident(rec.id, "run-other") is False
    with pytest.raises(RecordNotFound, match="incident not found: 999"):
        ledger.claim_incident(999, "run-x")


def test_status_changes_and_filters(ledger: Ledger) -> None:
    a, _ = ledger.open_incident(xid79(T0), window_seconds=WINDOW)
    b, _ = ledger.open_incident(xid79(T0 + timedelta(hours=1), gpu=5), window_seconds=WINDOW, severity="warning")
    c, _ = ledger.open_incident(xid79(T0 + timedelta(hours=2), node="gpu-002"), window_seconds=WINDOW)
    ledger.set_incident_status(a.id, IncidentStatus.ESCALATED, flow_run_id="run-9")
    assert ledger.get_incident(a.id).flow_run_id == "run-9" and ledger.get_incident(a.id).resolved_at is None
    ledger.set_incident_status(b.id, "resolved")
    assert [i.id for i in ledger.incidents(node="gpu-001")] == [a.id, b.id]
    assert [i.id for i in ledger.incidents(status=IncidentStatus.OPEN)] == [c.id]
    assert [i.id for i in ledger.incidents(status=["open", IncidentStatus.ESCALATED])] == [a.id, c.id]
    assert [i.id for i in ledger.incidents(severity="warning")] == [b.id]
    assert [i.id for i in ledger.incidents(since=T0 + timedelta(minutes=30))] == [b.id, c.id]
    with pytest.raises(ValueError, match="incident status: unknown value 'done'"):
        ledger.set_incident_status(a.id, "done")
    with pytest.raises(RecordNotFound, match="incident not found: 12345"):
        ledger.set_incident_status(12345, IncidentStatus.RESOLVED)
    with pytest.raises(RecordNotFound):
        ledger.get_incident(12345)


def test_announcing_a_batch_marks_only_incidents_no_run_has_claimed(ledger: Ledger) -> None:
    """The announcer marks a whole batch in one statement; a run that claimed an incident in between keeps it."""
    ids = [ledger.open_incident(xid79(T0, gpu=g), window_seconds=WINDOW)[0].id for g in range(3)]
    assert ledger.claim_incident(ids[1], "run-b") is True
    assert ledger.mark_incidents_announced({i: f"event:{i}" for i in ids}) == 2
    assert [ledger.get_incident(i).flow_run_id for i in ids] == [f"event:{ids[0]}", "run-b", f"event:{ids[2]}"]
    assert ledger.mark_incidents_announced({}) == 0


def test_fault_fingerprints_are_the_nodes_faults_still_seen_in_the_window(ledger: Ledger) -> None:
    """The receiver's per-node cap reads these: this node's only, and only those seen at or after `since`."""
    old, _ = ledger.open_incident(xid79(T0, gpu=1), window_seconds=WINDOW)
    new, _ = ledger.open_incident(xid79(T0 + timedelta(minutes=30), gpu=2), window_seconds=WINDOW)
    ledger.open_incident(xid79(T0 + timedelta(minutes=30), node="gpu-002"), window_seconds=WINDOW)
    assert ledger.fault_fingerprints("gpu-001", T0 + timedelta(minutes=10)) == {new.fingerprint}
    assert ledger.fault_fingerprints("gpu-001", T0) == {old.fingerprint, new.fingerprint}
    assert ledger.fault_fingerprints("gpu-003", T0) == set()


def test_fault_counts_are_the_candidates_failures_still_seen_in_the_window(ledger: Ledger) -> None:
    """select_spare's cleanest-record order: only the nodes asked about, only failures (a planned retirement is
    not one) seen at or after `since`."""
    from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL

    ledger.open_incident(xid79(T0, gpu=1), window_seconds=WINDOW)  # before the window
    ledger.open_incident(xid79(T0 + timedelta(minutes=30), gpu=2), window_seconds=WINDOW)
    ledger.open_incident(xid79(T0 + timedelta(minutes=30), gpu=3), window_seconds=WINDOW)
    ledger.open_incident(xid79(T0 + timedelta(minutes=30), node="gpu-002"), window_seconds=WINDOW)
    ledger.open_incident(Incident(node="gpu-002", signal=PLANNED_RETIREMENT_SIGNAL, first_seen=T0 + timedelta(hours=1),
                                  last_seen=T0 + timedelta(hours=1)), window_seconds=WINDOW)
    ledger.open_incident(xid79(T0 + timedelta(minutes=30), node="gpu-009"), window_seconds=WINDOW)  # not asked
    since = T0 + timedelta(minutes=10)
    assert ledger.fault_counts(["gpu-001", "gpu-002", "gpu-003"], since) == {"gpu-001": 2, "gpu-002": 1}
    assert ledger.fault_counts([], since) == {}


def test_warning_history_is_the_warnings_and_the_failures_of_the_nodes_they_warned_about(ledger: Ledger) -> None:
    """A detector's record reads only what it judges: early warnings (the signal, or XID 92), and per warned node
    its failures — not its other warnings, not a planned retirement, not an incident closed as ignored; the same
    as filtering every incident of the window (what triage did before), which the last line checks."""
    from remedy.detect.signals import is_early_warning
    from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL

    def at(minutes: float) -> datetime:
        return T0 + timedelta(minutes=minutes)

    def warning(node: str, minutes: float, **kw) -> Incident:
        return Incident(node=node, signal="early-warning", first_seen=at(minutes), last_seen=at(minutes),
                        evidence={"labels": {"detector": "thermal"}}, **kw)

    ledger.open_incident(warning("gpu-001", 0), window_seconds=WINDOW)  # before the window
    ledger.open_incident(warning("gpu-001", 30), window_seconds=WINDOW)
    ledger.open_incident(Incident(node="gpu-002", signal="xid", xid=92, gpu=0, first_seen=at(40), last_seen=at(40)),
                         window_seconds=WINDOW)  # the driver's own ECC-storm warning
    ledger.open_incident(xid79(at(60), node="gpu-001"), window_seconds=WINDOW)  # a failure after the warning
    ignored, _ = ledger.open_incident(xid79(at(70), node="gpu-002", gpu=3), window_seconds=WINDOW)
    ledger.set_incident_status(ignored.id, IncidentStatus.IGNORED, detail="a monitor failure")
    ledger.open_incident(Incident(node="gpu-002", signal=PLANNED_RETIREMENT_SIGNAL, first_seen=at(80),
                                  last_seen=at(80)), window_seconds=WINDOW)
    ledger.open_incident(xid79(at(90), node="gpu-002", gpu=5), window_seconds=WINDOW)
    ledger.open_incident(xid79(at(90), node="gpu-009"), window_seconds=WINDOW)  # never warned about
    since = at(10)
    warnings, failures = ledger.warning_history(since)
    assert [(w.node, w.signal, w.xid) for w in warnings] == [("gpu-001", "early-warning", None), ("gpu-002", "xid", 92)]
    assert failures == {"gpu-001": [at(60)], "gpu-002": [at(90)]}

    every = ledger.incidents(since=since)
    assert [w.id for w in warnings] == [i.id for i in every if is_early_warning(i.signal, i.xid)]
    warned = {w.node for w in warnings}
    assert sum(map(len, failures.values())) == sum(
        1 for i in every if i.node in warned and not is_early_warning(i.signal, i.xid)
        and i.signal != PLANNED_RETIREMENT_SIGNAL and i.status is not IncidentStatus.IGNORED)
