"""triage on the simulator with a real Prefect server (test harness): each path's decision and artifact, one
remediation per incident under duplicate triggers, stale incidents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Incident, IncidentStatus
from tests.fixtures.prefect import newest_artifact_text, run_to_state_result

pytestmark = pytest.mark.prefect


@pytest.fixture
def fleet(remedy_on_sim):
    """The simulated fleet in the ledger; spares validated as burn-in leaves them."""
    from remedy import runtime

    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        if n.state and n.state.value == "spare":
            led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")
    return remedy_on_sim


def open_incident(node: str, xid: int | None = None, gpu: int | None = 2, signal: str = "xid", age_s: float = 0.0):
    """An incident as the receiver records it."""
    from remedy import runtime

    seen = datetime.now(UTC) - timedelta(seconds=age_s)
    rec, created = runtime.ledger().open_incident(
        Incident(node=node, signal=signal, gpu=gpu, xid=xid, first_seen=seen, last_seen=seen,
                 detail=f"alertmanager: test {signal} {xid}"),
        window_seconds=600)
    assert created
    return rec


def artifact(incident) -> str:
    """The latest version of triage's markdown artifact for this incident, read back through the API."""
    from flows.triage import artifact_key

    return newest_artifact_text(artifact_key({"node": incident.node, "id": incident.id}))


def cordons(incident_id: int) -> list:
    from remedy import runtime

    return [a for a in runtime.ledger().actions(kind="cordon_node") if a.incident_id == incident_id]


def test_replace_path_runs_replace_node_once_even_when_triggered_twice(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    inject(fleet.cluster, "xid", "gpu003", gpu=2, code=64)
    inc = open_incident("gpu003", xid=64)
    out = run_to_state_result(triage, incident_id=str(inc.id), node="gpu003", xid=64, detected_at=inc.first_seen.isoformat())
    assert (out["action"], out["path"], out["status"]) == ("remediate", "replace", "replaced"), out
    assert out["verdict"]["rule"] == "xid-catalog"
    assert runtime.cluster().get_node("gpu003").unschedulable
    assert runtime.ledger().get_incident(inc.id).status is IncidentStatus.RESOLVED
    md = artifact(inc)
    assert "`xid-catalog` → **replace**" in md and "flows.replace_node:replace_node" in md

    again = run_to_state_result(triage, incident_id=inc.id, node="gpu003", xid=64)  # the event delivered twice
    assert again["status"] == "already-handled"
    assert len(cordons(inc.id)) == 1


def test_incident_held_by_another_run_is_a_duplicate(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime

    inc = open_incident("gpu004", xid=64)
    assert runtime.ledger().claim_incident(inc.id, "another-triage-run")
    out = run_to_state_result(triage, incident_id=inc.id)
    assert out["status"] == "already-handled"  # acting, held by someone else: never a second remediation
    assert cordons(inc.id) == [] and not runtime.cluster().get_node("gpu004").unschedulable


def test_watch_and_ignore_are_recorded_without_action(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime

    watch = open_incident("gpu005", xid=63)  # row remap pending via XID 63: the catalog says watch
    out = run_to_state_result(triage, incident_id=watch.id)
    assert (out["action"], out["status"]) == ("record", "watch")
    assert runtime.ledger().get_incident(watch.id).status is IncidentStatus.IGNORED
    assert "watch: recorded as a warning, no action" in artifact(watch)
    ignore = open_incident("gpu005", xid=14, gpu=1)
    assert run_to_state_result(triage, incident_id=ignore.id)["status"] == "ignore"
    assert not runtime.cluster().get_node("gpu005").unschedulable


def test_unknown_xid_escalates_to_a_human(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime

    inc = open_incident("gpu006", xid=9999)
    out = run_to_state_result(triage, incident_id=inc.id, dry_run=True)
    assert out["path"] == "escalate" and out["verdict"]["rule"] == "xid-unknown"
    assert out["outcome"]["escalated"] is True
    assert runtime.ledger().get_incident(inc.id).status is IncidentStatus.ESCALATED


def test_stale_incident_rereads_the_node_and_stands_down(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime

    inc = open_incident("gpu007", xid=64, age_s=3600)  # the stack was down for an hour
    runtime.cluster().cordon("gpu007", reason="operator looked at it", by="operator:ana")
    out = run_to_state_result(triage, incident_id=inc.id)
    assert out["stale"] and out["status"] == "skipped"
    assert "already cordoned" in out["reason"]
    assert runtime.ledger().get_incident(inc.id).status is IncidentStatus.IGNORED
    assert cordons(inc.id) == []


def test_node_already_out_of_service_is_not_remediated_twice(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import NodeState

    runtime.ledger().transition("gpu009", NodeState.ACTIVE, reason="test", requested_by="test")
    runtime.ledger().transition("gpu009", NodeState.QUARANTINED, reason="earlier fault", requested_by="test")
    inc = open_incident("gpu009", signal="row-remap-failure", xid=None)
    out = run_to_state_result(triage, incident_id=inc.id)
    assert out["status"] == "skipped" and "already quarantined" in out["reason"]
    assert cordons(inc.id) == []


def test_two_incidents_for_one_fault_give_one_replacement_and_no_false_escalation(prefect_server, fleet) -> None:
    """XID 64 raises two alerts (the XID and its row-remap failure): two incidents, two triage runs at once. One
    replaces the node; the other finds it under remediation or already in repair and closes as ignored — it neither
    quarantines a node in repair nor escalates to a person (bench/alert_to_action.py (b) saw both)."""
    import threading

    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    inject(fleet.cluster, "xid", "gpu004", gpu=4, code=64)
    incidents = [open_incident("gpu004", xid=64, gpu=4), open_incident("gpu004", gpu=4, signal="row-remap-failure")]
    results, errors = {}, []

    def run(inc):
        try:
            results[inc.id] = run_to_state_result(triage, incident_id=str(inc.id), node="gpu004", detected_at=inc.first_seen.isoformat())
        except Exception as exc:  # a run that fails is what this test is about
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(inc,)) for inc in incidents]
    [t.start() for t in threads]
    [t.join(300) for t in threads]
    assert not errors, errors
    led = runtime.ledger()
    statuses = sorted(led.get_incident(i.id).status.value for i in incidents)
    assert statuses == ["ignored", "resolved"], (statuses, results)
    assert len([a for a in led.actions(kind="set_state_active") if a.outcome.value == "succeeded"]) == 1
    assert led.get_node("gpu004").state.value == "repair"
    assert not led.approvals(), "nothing to ask a person about"
