"""The gate task (`tasks.gate`) on its bounded ledger reads, against the simulator and a SQLite ledger, without a
Prefect server: decisions, a rack trip, who waits on it, outcomes freeing capacity, replays decided once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

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
    now = datetime.now(UTC)
    incs = [led.open_incident(Incident(n, "xid", gpu=0, xid=79), window_seconds=600)[0] for n in rack_nodes[:3]]
    got = [check_breaker.fn(i.node, i.id, "xid", (now - timedelta(seconds=2 - k)).isoformat(), False)
           for k, i in enumerate(incs)]
    assert [g.act for g in got] == [True, True, False], [g.explain for g in got]
    # the narrowest of the node's rack, leaf switch and PDU trips on the third failure in a minute
    assert got[2].skip == "breaker-tripped" and (got[2].scope or "").split(":")[0] in ("rack", "switch", "pdu")
    assert held_on(got[2].token) == [incs[2].node]
    again = check_breaker.fn(incs[0].node, incs[0].id, "xid", now.isoformat(), False)
    assert again.replayed and again.act  # decided once per incident
    board = load_board()
    assert board.is_active(incs[0].node) and board.is_active(incs[1].node)
    record_remediation_outcome.fn(incs[0].node, True, incs[0].id, False)
    assert not load_board().is_active(incs[0].node) and load_board().is_active(incs[1].node)


def test_a_run_taken_over_moves_no_breaker(gate_env, monkeypatch):
    """The gate's breaker rows are fenced like its decisions: a run that lost its incident (stalled past its lease,
    taken over) neither trips nor re-closes a breaker, even on a person's approval; the run holding the incident
    does, and the operator's CLI (no incident) is never fenced."""
    import tasks.gate as gate
    from remedy.ledger import Fence, LeaseLost

    led, rack_nodes, _ = gate_env
    now = datetime.now(UTC)
    incs = [led.open_incident(Incident(n, "xid", gpu=0, xid=79), window_seconds=600)[0] for n in rack_nodes[:3]]
    runs = {i.id: f"run-{k}" for k, i in enumerate(incs)}
    for inc, run in runs.items():
        led.start_lease(run, ttl_seconds=300)
        assert led.claim(inc, run).claimed
    # the run each incident's flow believes it is (fence() reads it from the flow run context in a real run)
    monkeypatch.setattr(gate, "fence", lambda inc: Fence.of(runs[inc]) if inc else None)
    for i in incs[:2]:
        assert gate.check_breaker.fn(i.node, i.id, "xid", now.isoformat(), False).act
    # the third failure's run stalls; the incident goes to run-new; the stale run wakes up at the gate
    led.start_lease("run-new", ttl_seconds=300)
    assert led.take_over_incident(incs[2].id, "run-new", expected_holder="run-2", reason="test: stalled",
                                  holder_over=False).claimed
    with pytest.raises(LeaseLost):
        gate.check_breaker.fn(incs[2].node, incs[2].id, "xid", now.isoformat(), False)
    assert led.breaker_events() == [] and gate.load_board().not_closed() == []  # it tripped nothing
    runs[incs[2].id] = "run-new"
    held = gate.check_breaker.fn(incs[2].node, incs[2].id, "xid", now.isoformat(), False)
    assert not held.act and held.skip == "breaker-tripped"
    scope = held.token
    opened = led.breaker_events()
    assert [e.to_state for e in opened] == ["open"] and gate.load_board().not_closed() == [scope]

    # a person approves, but the asking run was taken over meanwhile: it closes nothing (the new holder asks again)
    led.start_lease("run-newer", ttl_seconds=300)
    assert led.take_over_incident(incs[2].id, "run-newer", expected_holder="run-new", reason="test: stalled",
                                  holder_over=False).claimed
    with pytest.raises(LeaseLost, match="held by run-newer"):
        gate.close_breaker(scope, by="alice", incident_id=incs[2].id)
    assert led.breaker_events() == opened and gate.load_board().not_closed() == [scope]
    runs[incs[2].id] = "run-newer"
    assert [t.to_state.value for t in gate.close_breaker(scope, by="alice", incident_id=incs[2].id)] == ["closed"]
    assert gate.load_board().not_closed() == []
    # the operator's CLI writes for no incident: nothing to fence
    gate.record_transitions(gate.load_board().open(scope, "bob", "maintenance", datetime.now(UTC)))
    assert gate.load_board().not_closed() == [scope]
