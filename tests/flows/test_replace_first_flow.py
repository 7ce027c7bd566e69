"""Replace first, repair in the background (issue 15, item 1), in the flows: an XID the catalog would reboot for,
with a warm spare ready, gives the job the spare at once; the failed node is rebooted off the critical path,
burned in, and returns to the spare pool. The run's artifact shows the options and their numbers (item 2)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import newest_artifact_text, run_to_state
from tests.flows.test_triage import artifact, fleet, open_incident  # noqa: F401 - fleet is a fixture

pytestmark = pytest.mark.prefect


def _options_artifact(incident) -> str:
    from flows.triage import artifact_key

    return newest_artifact_text(artifact_key({"node": incident.node, "id": incident.id}) + "-options")


def test_the_job_gets_the_spare_before_the_failed_node_is_fixed(prefect_server, fleet):
    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    led = runtime.ledger()
    inject(fleet.cluster, "xid", "gpu003", gpu=2, code=79)  # fallen off the bus: NVIDIA's fix is a reboot
    inc = open_incident("gpu003", xid=79, gpu=2)
    state, out = run_to_state(triage, incident_id=inc.id)
    assert out["choice"]["option"] == "replace", out["choice"]
    assert out["path"] == "replace" and state.is_completed(), (state, out)
    recovery = out["recovery"]
    assert recovery["status"] == "returned-to-spares", recovery
    assert [s["step"] for s in recovery["steps"]][-1] in ("reset-gpu", "reboot")

    # the order that matters: the job ran on the spare before the failed node's first fix started
    actions = led.actions(incident_id=inc.id)
    back = max(a.finished_at for a in actions if a.kind == "set_state_active" and a.node != "gpu003")
    fixes = [a for a in actions if a.kind.startswith("fix_") and a.node == "gpu003"]
    assert fixes and min(a.started_at for a in fixes) >= back
    assert all(a.detail.get("off_critical_path") for a in fixes)
    # ... and the node is a spare again, validated by burn-in
    assert led.get_node("gpu003").state.value == "spare"
    assert led.validations("gpu003")[-1].passed
    assert inc.id and led.get_incident(inc.id).status.value == "resolved"

    table = _options_artifact(inc)
    assert "**Chosen: replace**" in table and "| reboot |" in table and "spare joins" in table


def test_no_spare_ready_keeps_the_in_place_fix(prefect_server, fleet):
    """Without a spare the choice is the catalog's in-place fix, on the critical path (today's ladder)."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import NodeState

    led = runtime.ledger()
    for n in led.nodes(NodeState.SPARE):  # the spares are out for maintenance
        led.transition(n.name, NodeState.QUARANTINED, reason="test: maintenance", requested_by="test")
    inc = open_incident("gpu004", xid=79, gpu=1)
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["choice"]["option"] in ("reboot", "reset-gpu"), out["choice"]
    assert out["path"] == "reboot" and "recovery" not in out


def test_a_not_ready_node_with_a_spare_ready_is_replaced_at_once(prefect_server, fleet):
    """NotReady, and the alert said nothing about how long: with a spare ready the shared choose() weighs waiting
    for the node (it rarely comes back by itself) against the spare, and replaces it at once; the job's pod, stuck
    Terminating on the unreachable node, is force-deleted so the Job can put it on the spare."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    inject(fleet.cluster, "not-ready", "gpu005")
    inc = open_incident("gpu005", signal="node-not-ready", gpu=None)
    state, out = run_to_state(triage, incident_id=inc.id)
    assert out["choice"]["option"] == "replace" and out["path"] == "replace", out
    assert "replace first" in out["reason"] and state.is_completed(), (state, out)
    drains = [a for a in runtime.ledger().actions(node="gpu005", kind="drain_node")]
    assert drains and drains[-1].detail.get("force_deleted"), drains[-1].detail
    spare = out["outcome"]["replacement"]
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", spare)


def test_the_off_path_fix_learns_from_the_fleets_record(prefect_server, fleet):
    """XID 79's prior says a reset rarely clears it (20 %), so the off-path fix reboots at once. On a fleet whose
    recorded resets cleared 30 of 30 such faults, the odds (30 + 10 × 0.2) / 40 = 80 % make recover-node try the
    reset first — the same record choose_remediation reads."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import Action, ActionOutcome
    from remedy.sim.faults import inject

    led = runtime.ledger()
    for k in range(30):
        rec, _ = led.start_action(Action(kind="fix_reset-gpu", node=f"gpu{k % 8:03d}", requested_by="test",
                                         detail={"xid": 79, "gpu": 0}))
        led.finish_action(rec.id, ActionOutcome.SUCCEEDED)
    inject(fleet.cluster, "xid", "gpu003", gpu=2, code=79)
    inc = open_incident("gpu003", xid=79, gpu=2)
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["path"] == "replace", out.get("choice", out)
    assert out["recovery"]["steps"][0]["step"] == "reset-gpu", out["recovery"]


def test_a_recovery_whose_incident_another_run_took_over_starts_no_fix(prefect_server, fleet):
    """recover-node's fixes are written under the incident's fence, as fix-in-place's rungs are: when another run
    holds the incident now (a takeover after this one stalled), it resets and reboots nothing."""
    import uuid

    from flows.recover_node import recover_node
    from remedy import runtime
    from remedy.domain.model import IncidentStatus

    led = runtime.ledger()
    inc = open_incident("gpu006", xid=79, gpu=1)
    led.set_incident_status(inc.id, IncidentStatus.ACTING, flow_run_id=str(uuid.uuid4()))
    state, _ = run_to_state(recover_node, node="gpu006", xid=79, gpu=1, incident_id=inc.id)
    assert state.is_failed() and "no longer holds incident" in (state.message or ""), state
    assert not [a for a in led.actions(node="gpu006") if a.kind.startswith("fix_")]
    assert runtime.cluster().get_node("gpu006").ready  # not rebooted


def test_a_takeover_of_the_incident_replays_the_off_path_fix_instead_of_rebooting_again(prefect_server, fleet):
    """A run that takes an incident over (its first run was found gone) and recovers the node again replays the
    steps the earlier run finished: the reboot that cleared XID 79 is not done twice; burn-in still decides.
    A run that does not hold the incident is stopped by the fence, replayed step or not."""
    from prefect import flow
    from prefect.runtime import flow_run

    from flows.recover_node import recover_node
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import IncidentStatus
    from remedy.sim.faults import inject

    led = runtime.ledger()
    inject(fleet.cluster, "xid", "gpu003", gpu=2, code=79)
    inc = open_incident("gpu003", xid=79, gpu=2)
    _, out = run_to_state(triage, incident_id=inc.id)  # replaced first, then rebooted off the critical path
    first = out["recovery"]
    assert first["status"] == "returned-to-spares" and [s["step"] for s in first["steps"]] == ["reboot"], first
    assert not first["steps"][0].get("replayed")
    boot = runtime.cluster().get_node("gpu003").boot_id

    @flow(name="takes-the-incident-over")
    def takeover() -> dict:
        led.set_incident_status(inc.id, IncidentStatus.ACTING, flow_run_id=str(flow_run.id))  # as a claim does
        return recover_node(node="gpu003", xid=79, gpu=2, incident_id=inc.id)

    state, _ = run_to_state(recover_node, node="gpu003", xid=79, gpu=2, incident_id=inc.id)
    assert state.is_failed() and "no longer holds incident" in (state.message or ""), state  # not the holder

    state, again = run_to_state(takeover)
    assert state.is_completed() and again["status"] == "returned-to-spares", (state, again)
    assert again["steps"] == [{"step": "reboot", "verdict": "pass", "replayed": True, "reasons": []}]
    assert len([a for a in led.actions(incident_id=inc.id) if a.kind == "fix_reboot"]) == 1
    assert runtime.cluster().get_node("gpu003").boot_id == boot  # not rebooted again
