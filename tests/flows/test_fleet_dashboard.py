"""The fleet dashboard: pure pieces checked by hand-computed numbers, and the flow against the simulator and a
real Prefect server, read back through the API under the `fleet-dashboard` key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Incident, IncidentStatus, NodeState, Topology
from tasks.dashboard import (
    Dashboard,
    LemonCandidate,
    OpenBreaker,
    OpenIncident,
    SparePool,
    WaitingQuestion,
    dashboard_markdown,
    pool_counts,
    waiting_rows,
)
from tasks.lemon import active_days
from tests.fixtures.prefect import artifacts_newest_first

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(days=10)


@dataclass
class T:  # a transition row as the ledger hands it back
    at: datetime
    from_state: NodeState | None
    to_state: NodeState


def test_pool_counts_compare_ledger_and_labels():
    ledger = {"a": "active", "b": "active", "c": "spare", "d": None}
    live = {"a": "active", "b": "quarantined", "c": "spare", "d": None, "e": "active"}
    rows = {r["state"]: r for r in pool_counts(ledger, live)}
    assert rows["active"] == {"state": "active", "ledger": 2, "live labels": 2, "drift": 1}  # b differs
    assert rows["quarantined"] == {"state": "quarantined", "ledger": 0, "live labels": 1, "drift": 0}
    assert rows["unmanaged"] == {"state": "unmanaged", "ledger": 1, "live labels": 1, "drift": 1}  # e: not in ledger
    assert [r["state"] for r in pool_counts(ledger, live)] == ["spare", "active", "quarantined", "unmanaged"]


def test_pool_counts_without_the_cluster_show_the_ledger_only():
    rows = pool_counts({"a": "active"}, None)
    assert rows == [{"state": "active", "ledger": 1, "live labels": None, "drift": None}]


def test_exposure_counts_only_active_days_in_the_window():
    """Exposure for lemon scoring (review and dashboard alike) counts node-days in `active` only."""
    assert active_days([], SINCE, NOW, NodeState.ACTIVE) == pytest.approx(10.0)
    assert active_days([], SINCE, NOW, NodeState.SPARE) == 0.0
    # spare until day 4, active until day 7, quarantined since: 3 active days
    ts = [T(SINCE - timedelta(days=30), None, NodeState.SPARE),
          T(SINCE + timedelta(days=4), NodeState.SPARE, NodeState.ACTIVE),
          T(SINCE + timedelta(days=7), NodeState.ACTIVE, NodeState.QUARANTINED)]
    assert active_days(ts, SINCE, NOW, NodeState.QUARANTINED) == pytest.approx(3.0)
    # active since before the window, still active: the whole window
    ts = [T(SINCE - timedelta(days=3), NodeState.SPARE, NodeState.ACTIVE)]
    assert active_days(ts, SINCE, NOW, NodeState.ACTIVE) == pytest.approx(10.0)


def test_a_job_close_to_its_backoff_limit_is_a_warning():
    from tasks.dashboard import backoff_warning

    assert backoff_warning(0, 6) is None and backoff_warning(3, 6) is None
    assert "2 more drain(s) or restart(s) fail the whole Job" in backoff_warning(4, 6)
    assert "podFailurePolicy" in backoff_warning(6, 6) and "has failed" in backoff_warning(7, 6)


def test_markdown_names_every_section():
    board = Dashboard(NOW, [{"state": "active", "ledger": 3, "live labels": 3, "drift": 0}],
                      [OpenBreaker("rack/rack-2", "open")],
                      [OpenIncident(4, "gpu042", "xid (XID 79)", "acting", "2026-11-22")],
                      [LemonCandidate("gpu007", "lemon candidate: 2 of 4 signals", 0.0001)],
                      SparePool(ready=1, target=3, shortfall=2, sizing="…", warnings=["all in rack-1"]),
                      ["live node labels unavailable: refused"])
    md = dashboard_markdown(board)
    for text in ("# Fleet at 2026-11-22 12:00 UTC", "| active | 3 | 3 | 0 |", "**rack/rack-2** open",
                 "| 4 | gpu042 | xid (XID 79) | acting |", "**gpu007**: lemon candidate", "**short by 2**",
                 "warning: all in rack-1", "> live node labels unavailable"):
        assert text in md


def test_runs_waiting_for_a_person_are_listed_oldest_first_with_their_node():
    @dataclass
    class A:  # an approval row as the ledger hands it back
        flow_run_id: str
        kind: str
        incident_id: int | None
        requested_at: datetime
        decision: str | None = None

    rows = waiting_rows([A("run-b", "breaker", 7, NOW - timedelta(minutes=5)),
                         A("run-a", "spare-reserve", 4, NOW - timedelta(hours=2)),
                         A("run-c", "breaker", 4, NOW - timedelta(days=1), decision="approved"),
                         A("run-d", "retire", None, NOW - timedelta(seconds=30))],
                        {4: "gpu042", 7: "gpu007"}, NOW)
    assert rows == [WaitingQuestion("run-a", "spare-reserve", "gpu042", "2 h"),
                    WaitingQuestion("run-b", "breaker", "gpu007", "5 min"),
                    WaitingQuestion("run-d", "retire", "–", "30 s")]
    board = Dashboard(NOW, [], [], [], [], SparePool(ready=1, target=1, shortfall=0, sizing="", warnings=[]),
                      [], None, rows)
    md = dashboard_markdown(board)
    assert "## Waiting for a person (3)" in md and "| spare-reserve | gpu042 | 2 h | `run-a` |" in md
    empty = dashboard_markdown(Dashboard(NOW, [], [], [], [], board.spares, []))
    assert "## Waiting for a person (0)" in empty and "Nobody: no run is paused for an answer." in empty


@pytest.mark.prefect
def test_dashboard_flow_publishes_the_fleet(prefect_server, remedy_on_sim):
    from flows.fleet_dashboard import fleet_dashboard
    from remedy import runtime
    from remedy.platform.stack import _adopt_fleet

    _adopt_fleet(runtime)
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    active = [n.name for n in nodes if n.state is NodeState.ACTIVE]
    spares = [n.name for n in nodes if n.state is NodeState.SPARE]
    for n in active:  # adopted active nodes carry work
        led.transition(n, NodeState.ACTIVE, reason="adopted", requested_by="test",
                       at=datetime.now(UTC) - timedelta(days=60))
    lemon = active[0]
    now = datetime.now(UTC)
    for days in (40, 25, 12, 3):  # same GPU, same XID, again and again: excess rate + repeat XID
        t = now - timedelta(days=days)
        led.open_incident(Incident(lemon, "xid", gpu=3, xid=79, first_seen=t, last_seen=t,
                                   status=IncidentStatus.RESOLVED), window_seconds=0)
    waiting_on, _ = led.open_incident(Incident(active[1], "xid", gpu=0, xid=79), window_seconds=600)
    led.request_approval(incident_id=waiting_on.id, flow_run_id="run-paused-on-rack-2", kind="breaker")
    led.record_breaker_event("rack", "rack-2", "closed", "open", reason="3 failures in 10 min", by="test")
    runtime.cluster().set_labels(active[2], {runtime.settings().labels.pool: "quarantined"})  # drift
    from remedy.spares.lemons import record_review

    # an earlier review flagged a spare (budget deferred it): it waits in the pool but is never handed out
    record_review(led, {spares[0]: {"decision": "deferred"}}, reviewed_at=now - timedelta(days=1), requested_by="t")

    out = fleet_dashboard()

    pools = {r["state"]: r for r in out["pools"]}
    assert pools["active"]["ledger"] == len(active) and pools["active"]["live labels"] == len(active) - 1
    assert pools["active"]["drift"] == 1 and pools["spare"]["ledger"] == len(spares)
    assert out["breakers"] == [{"scope": "rack/rack-2", "state": "open"}]
    assert [(w["run"], w["question"], w["node"]) for w in out["waiting"]] == [
        ("run-paused-on-rack-2", "breaker", active[1])]
    assert [i["node"] for i in out["incidents"]] == [active[1]]
    assert [c["node"] for c in out["lemons"]] == [lemon]
    assert out["spares"]["ready"] == len(spares) - 1 and out["notes"] == []
    assert out["spares"]["held_as_lemons"] == [spares[0]]
    # the simulator's training Job declares the podFailurePolicy a real one needs: counted, no warning
    assert out["job"]["limit"] == 6 and out["job"]["ignores_disruptions"] and out["job"]["warning"] is None

    md = artifacts_newest_first("fleet-dashboard")[0]
    assert md.type == "markdown" and "rack/rack-2" in md.data and lemon in md.data
    assert "## Waiting for a person (1)" in md.data and "`run-paused-on-rack-2`" in md.data
    assert f"held back as lemon candidates (not handed out): {spares[0]}" in md.data
    table = artifacts_newest_first("fleet-dashboard-pools")[0]
    assert table.type == "table"


@pytest.mark.prefect
def test_dashboard_still_publishes_when_the_cluster_is_down(prefect_server, remedy_on_sim, monkeypatch):
    import socket

    from flows.fleet_dashboard import fleet_dashboard
    from remedy import runtime
    from remedy.platform.stack import _adopt_fleet

    _adopt_fleet(runtime)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("REMEDY_CLUSTER__SIMULATOR_URL", f"http://127.0.0.1:{dead}")
    monkeypatch.setenv("REMEDY_CLUSTER__API_RETRIES", "0")
    # the first list waits 2 x the request timeout for the node cache before listing itself: 2 s, not 20
    monkeypatch.setenv("REMEDY_CLUSTER__REQUEST_TIMEOUT_SECONDS", "1")
    runtime.reset()
    out = fleet_dashboard()
    assert out["notes"] and "live node labels unavailable" in out["notes"][0]
    assert all(r["live labels"] is None for r in out["pools"])
    assert sum(r["ledger"] for r in out["pools"]) == 16
