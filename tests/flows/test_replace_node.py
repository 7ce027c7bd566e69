"""replace_node on the simulator through the real client and a real Prefect server (test harness)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect


def prevalidate_spares():
    """As burn-in leaves them: spares validated just now."""
    from remedy import runtime

    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        if n.state and n.state.value == "spare":
            led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")


def pools(sim) -> dict[str, str]:
    from remedy import runtime

    return {n.name: n.labels.get("remedy.io/pool", "") for n in runtime.cluster().list_gpu_nodes()}


def runtime_ledger():
    from remedy import runtime

    return runtime.ledger()


def promotions(incident_id=None) -> list:
    from remedy import runtime
    from remedy.domain.model import ActionOutcome

    return [a for a in runtime.ledger().actions(kind="set_state_active", incident_id=incident_id)
            if a.outcome is ActionOutcome.SUCCEEDED]


def test_xid79_replaced_and_job_back_to_full_size(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime
    from remedy.sim.faults import inject

    prevalidate_spares()
    inject(remedy_on_sim.cluster, "xid", "gpu003", gpu=3, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert out["status"] == "replaced", out
    spare = out["replacement"]
    assert spare in ("gpu008", "gpu016")
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    node = runtime.cluster().get_node("gpu003")
    assert node.unschedulable and node.has_taint("remedy.io/quarantine")
    assert node.labels["remedy.io/pool"] == "repair"
    s = runtime.cluster().get_node(spare)
    assert s.labels["remedy.io/pool"] == "active" and not s.has_taint("remedy.io/spare")
    assert [row["step"] for row in out["timeline"]][:6] == [
        "detected", "cordoned", "drained", "spare ready", "job resumed", "to repair"]
    led = runtime.ledger()
    assert led.get_node("gpu003").state.value == "repair" and led.get_node(spare).state.value == "active"
    assert led.get_incident(out["incident_id"]).status.value == "resolved"
    events = [e["reason"] for e in runtime.cluster().node_events("gpu003")]
    assert "RemedyCordon" in events and "RemedyDrain" in events


def test_stale_spare_is_validated_before_promotion(prefect_server, remedy_on_sim, monkeypatch):
    from flows.replace_node import replace_node
    from remedy import runtime

    monkeypatch.setenv("REMEDY_SPARES__VALIDATE_ON_PROMOTE", "true")
    runtime.reset()
    out = run_to_state_result(replace_node, node="gpu004", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "replaced", out
    validations = runtime.ledger().validations(out["replacement"])
    assert validations and validations[-1].passed and validations[-1].level == "quick"
    checks = {c["check"] for c in validations[-1].summary["checks"]}
    assert {"nvml-probe", "dcgm-diag", "ib"} <= checks


def test_duplicate_trigger_gives_one_replacement(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node

    prevalidate_spares()
    first = run_to_state_result(replace_node, node="gpu005", cause="XID 79", xid=79, gpu=1)
    actions = len(runtime_ledger().actions())
    again = run_to_state_result(replace_node, node="gpu005", cause="XID 79", xid=79, gpu=1, incident_id=first["incident_id"])
    assert first["status"] == "replaced"
    # a late duplicate (event re-delivered after the incident was resolved) stands down: no re-run of any step
    assert again["status"] == "duplicate" and f"incident {first['incident_id']} is already resolved" in again["why"]
    assert len(runtime_ledger().actions()) == actions
    assert runtime_ledger().get_incident(first["incident_id"]).status.value == "resolved"
    assert len(promotions(first["incident_id"])) == 1
    assert list(pools(remedy_on_sim).values()).count("spare") == 1  # one spare consumed, not two


def test_second_incident_for_a_node_already_replaced_stands_down(prefect_server, remedy_on_sim):
    """One fault, two alerts (XID 64 and its row-remap failure), two incidents, two triage runs that both chose
    replace while the node was still active. The second one's replacement starts after the first has finished and
    sent the node to repair: it must not quarantine a node in repair (seen in bench/alert_to_action.py (b): the
    run failed with IllegalTransition repair → quarantined and left its incident 'acting')."""
    from flows.replace_node import replace_node
    from remedy import runtime
    from tasks.ledger import open_incident

    prevalidate_spares()
    xid = open_incident.fn("gpu009", "xid", gpu=4, xid=64).incident
    remap = open_incident.fn("gpu009", "row-remap-failure", gpu=4).incident
    assert xid.id != remap.id
    first = run_to_state_result(replace_node, node="gpu009", cause="row-remap-failure", signal="row-remap-failure", gpu=4,
                         incident_id=remap.id)
    assert first["status"] == "replaced"
    second = run_to_state_result(replace_node, node="gpu009", cause="XID 64", xid=64, gpu=4, incident_id=xid.id)
    assert second["status"] == "duplicate" and "already out of service (repair)" in second["why"], second
    led = runtime.ledger()
    assert led.get_node("gpu009").state.value == "repair"
    assert [t.to_state.value for t in led.transitions("gpu009")][-2:] == ["quarantined", "repair"]
    assert len(promotions()) == 1 and list(pools(remedy_on_sim).values()).count("spare") == 1


def test_concurrent_duplicate_triggers_give_one_replacement(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from tasks.ledger import open_incident

    prevalidate_spares()
    incident = open_incident.fn("gpu006", "xid", gpu=2, xid=79).incident
    results = []

    def run():
        results.append(run_to_state_result(replace_node, node="gpu006", cause="XID 79", xid=79, gpu=2, incident_id=incident.id))

    threads = [threading.Thread(target=run) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(promotions(incident.id)) == 1
    assert list(pools(remedy_on_sim).values()).count("spare") == 1


def test_crash_and_rerun_gives_one_replacement(prefect_server, remedy_on_sim, tmp_path):
    """Kill the flow process mid-promotion, run it again: the rerun takes the incident over once the dead run's
    lease expires (nothing marks the dead run Crashed by hand), and the ledger shows one replacement."""
    from prefect.settings import PREFECT_API_URL

    from flows.replace_node import replace_node
    from remedy import runtime
    from tasks.ledger import open_incident

    prevalidate_spares()
    incident = open_incident.fn("gpu007", "xid", gpu=4, xid=79).incident
    code = (f"from flows.replace_node import replace_node; "
            f"replace_node(node='gpu007', cause='XID 79', xid=79, gpu=4, incident_id={incident.id}, return_state=True)")
    # a 10-s lease: a loaded machine can starve the renewing thread for seconds (tests/flows/test_takeover.py)
    env = os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value(), "REMEDY_LEASES__TTL_SECONDS": "10",
                        "REMEDY_LEASES__RENEW_SECONDS": "0.5"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    led = runtime.ledger()
    deadline = time.monotonic() + 240
    promoting = False
    while time.monotonic() < deadline and proc.poll() is None:
        if any(a.node != "gpu007" for a in led.actions(incident_id=incident.id, kind="untaint_node")):
            promoting = True
            break  # the spare is being promoted: crash now
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert promoting, f"the run never reached the spare's promotion (exit {proc.returncode})"
    holder = led.get_incident(incident.id).flow_run_id
    assert holder, "the killed run never claimed the incident"
    gone_by = time.monotonic() + 60
    while led.run_gone(holder) is None:  # until its lease runs out the dead run looks alive (tests/ledger)
        assert time.monotonic() < gone_by, f"the killed run {holder}'s lease never ran out"
        time.sleep(0.05)
    out = run_to_state_result(replace_node, node="gpu007", cause="XID 79", xid=79, gpu=4, incident_id=incident.id)
    assert out["status"] == "replaced", out
    assert len({a.node for a in led.actions(incident_id=incident.id, kind="set_state_active")}) == 1
    assert list(pools(remedy_on_sim).values()).count("spare") == 1
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    [takeover] = led.actions(incident_id=incident.id, kind="take_over_incident")
    assert takeover.detail["from"] == holder


def test_manual_uncordon_mid_flow_is_respected(prefect_server, remedy_on_sim):
    """An operator uncordons the node while the flow runs: the flow stops acting on it and records why."""
    from kubernetes import client as k8s

    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    api = k8s.CoreV1Api(runtime.cluster().api)
    stop = threading.Event()

    def operator():
        while not stop.is_set():
            node = runtime.cluster().get_node("gpu009")
            if node.unschedulable:
                api.patch_node("gpu009", {"spec": {"unschedulable": False}},
                               _content_type="application/strategic-merge-patch+json")
                return
            time.sleep(0.005)

    t = threading.Thread(target=operator)
    t.start()
    try:
        out = run_to_state_result(replace_node, node="gpu009", cause="XID 79", xid=79, gpu=0)
    finally:
        stop.set()
        t.join()
    node = runtime.cluster().get_node("gpu009")
    assert not node.unschedulable  # never re-cordoned
    assert out["status"] == "stopped-by-operator", out
    assert out["drift"]["what"] == "uncordoned by hand"
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"
    assert not promotions(out["incident_id"])


def test_dry_run_changes_nothing(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    before = {n.name: (n.unschedulable, sorted(n.taints), n.labels.get("remedy.io/pool"))
              for n in runtime.cluster().list_gpu_nodes()}
    out = run_to_state_result(replace_node, node="gpu010", cause="XID 79", xid=79, gpu=0, dry_run=True)
    after = {n.name: (n.unschedulable, sorted(n.taints), n.labels.get("remedy.io/pool"))
             for n in runtime.cluster().list_gpu_nodes()}
    assert out["status"] == "planned"
    assert after == before
    assert runtime.cluster().node_events("gpu010") == []
    actions = runtime.ledger().actions(incident_id=out["incident_id"])
    assert actions and all(a.dry_run for a in actions)
    assert {"cordon_node", "drain_node", "untaint_node"} <= {a.kind for a in actions}


def test_no_usable_spare_escalates_without_half_replacement(prefect_server, remedy_on_sim):
    """Spares exist but none is validated (and validate-on-promote is off): escalate, touch no spare."""
    from flows.replace_node import replace_node
    from remedy import runtime

    before = pools(remedy_on_sim)
    out = run_to_state_result(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "no-spare", out
    assert "needs validation" in out["why"]
    after = pools(remedy_on_sim)
    assert [n for n, p in after.items() if p == "spare"] == [n for n, p in before.items() if p == "spare"]
    spare_nodes = [n for n in runtime.cluster().list_gpu_nodes() if n.labels.get("remedy.io/pool") == "spare"]
    assert all(n.has_taint("remedy.io/spare") for n in spare_nodes)
    node = runtime.cluster().get_node("gpu011")
    assert node.unschedulable and node.has_taint("remedy.io/quarantine")  # the faulty node stays out
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"


def test_escalating_a_node_already_in_repair_leaves_it_there(prefect_server, remedy_on_sim):
    """An escalation that comes after the node went to repair (same race as above) does not try to quarantine it."""
    from flows.escalate import escalate
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    assert run_to_state_result(replace_node, node="gpu010", cause="XID 79", xid=79, gpu=0)["status"] == "replaced"
    out = run_to_state_result(escalate, node="gpu010", reason="XID 48 recurring")
    assert out["quarantined"] is False and "already out of service (repair)" in out["gate"]
    assert runtime.ledger().get_node("gpu010").state.value == "repair"


def test_an_escalated_incident_waits_for_a_person_and_a_run_started_by_hand_acts(prefect_server, remedy_on_sim):
    """After an escalation (here: XID 79 escalated, the question unanswered), a late automatic trigger stands down;
    an operator who starts replace-node by hand for that node and fault (no incident id) gets the replacement."""
    from flows.escalate import escalate
    from flows.replace_node import replace_node
    from remedy import runtime
    from tasks.ledger import open_incident

    prevalidate_spares()
    incident = open_incident.fn("gpu011", "xid", gpu=3, xid=79).incident
    run_to_state_result(escalate, node="gpu011", reason="XID 79 recurring", incident_id=incident.id)
    led = runtime.ledger()
    assert led.get_incident(incident.id).status.value == "escalated"

    late = run_to_state_result(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=3, incident_id=incident.id)
    assert late["status"] == "duplicate" and "already escalated" in late["why"], late
    assert not promotions()

    by_hand = run_to_state_result(replace_node, node="gpu011", cause="operator: replace it", xid=79, gpu=3)
    assert by_hand["incident_id"] == incident.id and by_hand["status"] == "replaced", by_hand
    assert len(promotions(incident.id)) == 1
    assert led.get_incident(incident.id).status.value == "resolved"
