"""Open-loop pools: fix_in_place only proposes (a Prefect event + a paused run) until an external system calls
POST /v1/remediations/{incident_id}/execute with the bearer token; then it acts."""

from __future__ import annotations

import httpx
import pytest

from flows.fix_in_place import fix_in_place
from remedy.approvals.open_loop import OPEN_LOOP_KIND, PROPOSED_EVENT
from remedy.sim.faults import inject
from remedy.sim.objects import INSTANCE_TYPE
from tests.approvals.helpers import FlowThread, flow_state, remedy_env, run_receiver, wait_for  # noqa: F401
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect


def _proposed_events(incident_id: int) -> list[dict]:
    from prefect.settings import PREFECT_API_URL

    r = httpx.post(f"{PREFECT_API_URL.value()}/events/filter", timeout=10,
                   json={"filter": {"event": {"name": [PROPOSED_EVENT]},
                                    "resource": {"id": [f"remedy.incident.{incident_id}"]}}, "limit": 10})
    r.raise_for_status()
    return r.json().get("events", [])


def test_open_loop_waits_for_the_external_go_ahead(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim, LADDER__OPEN_LOOP_POOLS=[INSTANCE_TYPE])
    inject(sim.cluster, "xid", "gpu004", gpu=2, code=145)
    with run_receiver() as url:
        run = FlowThread(lambda: run_to_state_result(fix_in_place, node="gpu004", xid=145, gpu=2))
        led = runtime.ledger()
        approval = wait_for("the open-loop proposal", lambda: next(
            (a for a in led.approvals(pending=True) if a.kind == OPEN_LOOP_KIND
             and flow_state(a.flow_run_id) == "PAUSED"), None), timeout=60)
        incident = approval.incident_id
        event = wait_for("the proposed event", lambda: _proposed_events(incident), timeout=30)[0]
        assert event["payload"]["step"] == "reset-gpu" and event["payload"]["node"] == "gpu004"
        # decided, not acted: the node is untouched while the run waits
        assert not any(a.kind in ("cordon_node", "drain_node") for a in led.actions(node="gpu004"))
        with sim.cluster.lock:
            assert not sim.cluster.node("gpu004")["spec"].get("unschedulable")

        execute = f"{url}/v1/remediations/{incident}/execute"
        assert httpx.post(execute, timeout=30).status_code == 401
        assert httpx.post(execute, headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 401
        assert httpx.post(f"{url}/v1/remediations/{incident + 999}/execute", timeout=30,
                          headers={"Authorization": "Bearer open-loop-token"}).status_code == 404
        assert led.get_approval(approval.id).pending

        ok = httpx.post(execute, json={"by": "break-fix-bot", "reason": "CHG-1234"}, timeout=30,
                        headers={"Authorization": "Bearer open-loop-token"})
        assert ok.status_code == 200 and ok.json()["resumed"] is True
        out = run.result(120)
    assert out["open_loop"] == {"decision": "approve", "by": "break-fix-bot"}
    assert out["status"] == "fixed"
    assert led.get_approval(approval.id).reason == "CHG-1234"


def test_open_loop_without_go_ahead_does_nothing(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim, LADDER__OPEN_LOOP_POOLS=["*"], LADDER__RESET_GPU_TIMEOUT_MINUTES=0.03)
    inject(sim.cluster, "xid", "gpu010", gpu=0, code=145)
    out = run_to_state_result(fix_in_place, node="gpu010", xid=145, gpu=0)  # waits 1.8 s (the step timeout), then gives up
    assert out["status"] == "proposed-not-executed" and out["open_loop"]["decision"] == "timeout"
    kinds = {a.kind for a in runtime.ledger().actions(node="gpu010")}
    assert not kinds & {"cordon_node", "drain_node", "job_gpu-reset", "fix_reset-gpu"}
    assert sim.cluster.health["gpu010"].faulty()


def test_open_loop_replacement_waits_for_the_go_ahead_then_replaces(prefect_server, sim, remedy_env):
    from flows.replace_node import replace_node

    runtime = remedy_env(sim=sim, LADDER__OPEN_LOOP_POOLS=["*"], APPROVALS__TIMEOUT_SECONDS=60)
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():  # spares validated, as burn-in leaves them
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
        if n.state.value == "spare":
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")
    inject(sim.cluster, "xid", "gpu005", gpu=1, code=79)
    with run_receiver() as url:
        run = FlowThread(lambda: run_to_state_result(replace_node, node="gpu005", cause="XID 79", xid=79, gpu=1))
        approval = wait_for("the open-loop proposal", lambda: next(
            (a for a in led.approvals(pending=True) if a.kind == OPEN_LOOP_KIND
             and flow_state(a.flow_run_id) == "PAUSED"), None), timeout=60)
        assert not any(a.kind == "cordon_node" for a in led.actions(node="gpu005"))  # decided, not acted
        ok = httpx.post(f"{url}/v1/remediations/{approval.incident_id}/execute", json={"by": "break-fix-bot"},
                        headers={"Authorization": "Bearer open-loop-token"}, timeout=30)
        assert ok.status_code == 200, ok.text
        out = run.result(120)
    assert out["open_loop"] == {"decision": "approve", "by": "break-fix-bot"}
    assert out["status"] == "replaced" and out["replacement"]
