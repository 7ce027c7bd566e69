"""The gate task (`tasks.gate`) on its bounded ledger reads, against the simulator and a SQLite ledger, without a
Prefect server: decisions, a rack trip, who waits on it, outcomes freeing capacity, replays decided once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from remedy import runtime
from remedy.domain.model import Incident


@pytest.fixture
def gate_env(remedy_on_sim, monkeypatch):
    monkeypatch.setenv("REMEDY_BUDGET__MAX_PERCENT_IN_REMEDIATION", "50")
    monkeypatch.setenv("REMEDY_BREAKER__CLUSTER__MAX_PERCENT", "100")  # 14 nodes: 5 % would allow one failure
    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "0")
    monkeypatch.setenv("REMEDY_DRY_RUN", "false")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    runtime.reset()
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    led.upsert_nodes(nodes)
    rack = sorted(n.topology.rack for n in nodes if n.state and n.state.value == "active")[0]
    yield led, sorted(n.name for n in nodes if n.topology.rack == rack and n.state and n.state.value == "active"), rack
    runtime.reset()


def test_gate_task_decides_trips_and_frees_from_bounded_reads(gate_env):
    from tasks.gate import check_breaker, held_on, load_board, record_remediation_outcome

    led, rack_nodes, _ = gate_env
    now = datetime.now(timezone.utc)
    incs = [led.open_incident(Incident(n, "xid", gpu=0, xid=79), window_seconds=600)[0] for n in rack_nodes[:3]]
    got = [check_breaker.fn(i.node, i.id, "xid", (now - timedelta(seconds=2 - k)).isoformat(), False)
           for k, i in enumerate(incs)]
    assert [g["act"] for g in got] == [True, True, False], [g["explain"] for g in got]
    # the narrowest of the node's rack, leaf switch and PDU trips on the third failure in a minute
    assert got[2]["skip"] == "breaker-tripped" and got[2]["scope"].split(":")[0] in ("rack", "switch", "pdu")
    assert held_on(got[2]["scope"]) == [incs[2].node]
    again = check_breaker.fn(incs[0].node, incs[0].id, "xid", now.isoformat(), False)
    assert again["replayed"] and again["act"]  # decided once per incident
    board = load_board()
    assert board.is_active(incs[0].node) and board.is_active(incs[1].node)
    record_remediation_outcome.fn(incs[0].node, True, incs[0].id, False)
    assert not load_board().is_active(incs[0].node) and load_board().is_active(incs[1].node)
