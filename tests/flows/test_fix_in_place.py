"""fix_in_place on the cluster simulator with a real Prefect server: the XID ladder end to end.

XID 94 → app restart, node never cordoned, back-off recorded (seed 002: 10 → 20 → 40 min), recurrence climbs;
XID 145 → GPU reset + NVML verify, node back in service; reset fails → reboot → replace; dry-run changes nothing;
CONTACT_SUPPORT → escalate with the node kept quarantined.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from flows.fix_in_place import fix_in_place
from remedy.sim.faults import inject
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect
QUARANTINE = "remedy.io/quarantine"


BOOKKEEPING = ("gate_decision", "remediation_finished")  # the breaker gate's own rows (tasks.gate)


def _kinds(led, node):
    return [a.kind for a in led.actions(node=node) if a.kind not in BOOKKEEPING]


def _node(sim, name):
    with sim.cluster.lock:
        n = sim.cluster.node(name)
        return {"unschedulable": bool(n["spec"].get("unschedulable")),
                "taints": [t["key"] for t in n["spec"].get("taints") or []],
                "pool": n["metadata"]["labels"].get("remedy.io/pool")}


def _training_pods(sim, node):
    with sim.cluster.lock:
        return sorted(p["metadata"]["name"] for p in sim.cluster.pods_on(node)
                      if p["metadata"]["namespace"] == "training" and not p["metadata"].get("deletionTimestamp"))


def test_xid94_restarts_the_app_without_excluding_the_node(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false")  # the catalog ladder alone (replace-first: below)
    before = _training_pods(sim, "gpu003")
    assert len(before) == 1
    inject(sim.cluster, "xid", "gpu003", gpu=2, code=94)
    t0 = datetime.now(UTC)
    out = run_to_state_result(fix_in_place, node="gpu003", xid=94, gpu=2)
    assert out["status"] == "restarted"
    assert out["restarted"] == before
    assert out["workload"]["back_on_node"] and out["workload"]["full"]  # the job controller put it back here
    assert out["backoff_minutes"] == [10.0, 20.0, 40.0]  # seed 002 §4.3.5
    nxt = datetime.fromisoformat(out["next_restart_not_before"])
    assert timedelta(minutes=19) < nxt - t0 < timedelta(minutes=21)  # the NEXT restart waits 20 min
    # no exclusion: never cordoned, never tainted, still in the job's pool
    led = runtime.ledger()
    assert _kinds(led, "gpu003") == ["fix_restart-app", "restart_app"]
    assert _node(sim, "gpu003") == {"unschedulable": False, "taints": [], "pool": "active"}
    attempt = led.actions(kind="fix_restart-app")[0]
    assert attempt.outcome.value == "succeeded" and attempt.detail["backoff_minutes"] == [10.0, 20.0, 40.0]
    sim.cluster.settle(5, until=lambda: bool(_training_pods(sim, "gpu003")) and _training_pods(sim, "gpu003") != before)
    assert _training_pods(sim, "gpu003") and _training_pods(sim, "gpu003") != before  # recreated by the job

    # The same XID on the same GPU again: the restart did not hold → next rung (GPU reset), which fixes it.
    inject(sim.cluster, "xid", "gpu003", gpu=2, code=94)
    again = run_to_state_result(fix_in_place, node="gpu003", xid=94, gpu=2)
    assert [s["step"] for s in again["steps"]] == ["reset-gpu"]
    assert "did not hold" in again["steps"][0]["reason"]
    assert again["status"] == "fixed"


def test_xid145_gpu_reset_succeeds_and_node_returns(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim)
    inject(sim.cluster, "xid", "gpu005", gpu=3, code=145)
    assert sim.cluster.health["gpu005"].faulty()
    out = run_to_state_result(fix_in_place, node="gpu005", xid=145, gpu=3)
    assert out["status"] == "fixed", out
    assert [r["step"] for r in out["timeline"]] == ["detected", "reset-gpu fixed"]
    assert out["verify"]["verdict"] != "fail"
    led = runtime.ledger()
    assert _kinds(led, "gpu005") == [
        "fix_reset-gpu", "cordon_node", "taint_node", "set_state_quarantined", "drain_node", "job_gpu-reset",
        "job_nvml-probe", "untaint_node", "uncordon_node", "set_state_active"]
    assert all(a.outcome.value == "succeeded" for a in led.actions(node="gpu005"))
    assert [a.kind for a in led.actions(node="gpu005") if a.kind in BOOKKEEPING] == list(BOOKKEEPING)
    assert [(t.from_state and t.from_state.value, t.to_state.value) for t in led.transitions("gpu005")][-2:] == [
        ("active", "quarantined"), ("quarantined", "active")]
    assert _node(sim, "gpu005") == {"unschedulable": False, "taints": [], "pool": "active"}
    assert not sim.cluster.health["gpu005"].faulty()  # the reset cleared the GPU's pending XID
    job = next(a for a in led.actions(kind="job_gpu-reset"))
    assert "successfully reset" in job.detail["logs"]
    assert led.get_incident(out["incident_id"]).status.value == "resolved"


def test_reset_fails_then_reboot_then_replace(prefect_server, sim, remedy_env):
    from remedy.platform.demo import _spares_validated_at_build

    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false")  # the catalog ladder, every rung on the job's path
    _spares_validated_at_build(runtime)
    inject(sim.cluster, "xid", "gpu006", gpu=1, code=145)
    inject(sim.cluster, "reset-fails", "gpu006", gpu=1)
    sim.cluster.health["gpu006"].gpus[1].reboot_clears = False  # hardware: a reboot does not clear it either
    out = run_to_state_result(fix_in_place, node="gpu006", xid=145, gpu=1)
    assert [s["step"] for s in out["steps"]] == ["reset-gpu", "reboot", "replace"]
    assert out["status"] == "replaced" and out["replacement"] in ("gpu015", "gpu016")
    assert [r["step"] for r in out["timeline"]] == ["detected", "reset-gpu failed", "reboot failed", "replace replaced"]
    times = [r["since_detection_s"] for r in out["timeline"]]
    assert times == sorted(times)
    led = runtime.ledger()
    attempts = [(a.kind, a.outcome.value) for a in led.actions(node="gpu006") if a.kind.startswith("fix_")]
    assert attempts == [("fix_reset-gpu", "failed"), ("fix_reboot", "failed"), ("fix_replace", "succeeded")]
    assert "could not be reset" in next(a for a in led.actions(kind="job_gpu-reset")).detail["logs"]
    assert "NVML probe after reboot" in led.actions(kind="fix_reboot")[0].error
    assert led.get_node("gpu006").state.value == "repair"
    assert _node(sim, "gpu006")["unschedulable"] is True  # the failed node never went back in


def test_dry_run_changes_nothing(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim)
    inject(sim.cluster, "xid", "gpu007", gpu=0, code=145)
    before_node, before_pods = _node(sim, "gpu007"), _training_pods(sim, "gpu007")
    with sim.cluster.lock:
        jobs_before = len(sim.cluster.store.objects("Job"))
    out = run_to_state_result(fix_in_place, node="gpu007", xid=145, gpu=0, dry_run=True)
    assert out["status"] == "planned"
    assert _node(sim, "gpu007") == before_node and _training_pods(sim, "gpu007") == before_pods
    assert sim.cluster.health["gpu007"].faulty()  # nothing was reset
    with sim.cluster.lock:
        assert len(sim.cluster.store.objects("Job")) == jobs_before  # no reset, probe or reboot Job was created
    actions = runtime.ledger().actions(node="gpu007")
    assert actions and all(a.dry_run and a.outcome.value == "planned" for a in actions)
    assert {"cordon_node", "drain_node", "job_gpu-reset", "uncordon_node"} <= {a.kind for a in actions}
    # a dry run is not an attempt: the real run afterwards still starts at the first rung
    real = run_to_state_result(fix_in_place, node="gpu007", xid=145, gpu=0)
    assert [s["step"] for s in real["steps"]] == ["reset-gpu"] and real["status"] == "fixed"


def test_contact_support_xid_escalates_and_keeps_node_quarantined(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim)
    out = run_to_state_result(fix_in_place, node="gpu008", xid=58, gpu=0)  # FB_MEMORY_ERROR: NVIDIA says contact support
    assert out["status"] == "escalated" and "a person decides" in out["why"]
    assert out["escalation"]["status"] == "escalated"
    assert _node(sim, "gpu008")["unschedulable"] is True and QUARANTINE in _node(sim, "gpu008")["taints"]
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"



def test_duplicate_triggers_fix_once(prefect_server, sim, remedy_env):
    from remedy.domain.model import Incident
    from tests.approvals.helpers import FlowThread

    runtime = remedy_env(sim=sim)
    inject(sim.cluster, "xid", "gpu009", gpu=4, code=145)
    led = runtime.ledger()
    from remedy.platform.demo import _spares_validated_at_build

    _spares_validated_at_build(runtime)  # the ledger knows the fleet (as the receiver's sync would)
    incident, _ = led.open_incident(Incident(node="gpu009", signal="xid", gpu=4, xid=145), window_seconds=600)
    runs = [FlowThread(lambda: run_to_state_result(fix_in_place, node="gpu009", xid=145, gpu=4, incident_id=incident.id))
            for _ in range(2)]
    statuses = sorted(r.result(120)["status"] for r in runs)
    assert statuses == ["duplicate", "fixed"]
    late = run_to_state_result(fix_in_place, node="gpu009", xid=145, gpu=4, incident_id=incident.id)  # a trigger after the fix
    assert late["status"] == "duplicate" and "resolved" in late["why"]
    assert [a.kind for a in led.actions(node="gpu009")].count("fix_reset-gpu") == 1
    assert [a.kind for a in led.actions(node="gpu009")].count("job_gpu-reset") == 1


def test_manual_uncordon_mid_fix_is_respected(prefect_server, sim_factory, remedy_env):
    from tests.approvals.helpers import FlowThread, wait_for

    sim = sim_factory(nodes=16, spares=2, time_scale=0.1)  # slow enough to act by hand while the reset runs
    runtime = remedy_env(sim=sim)
    inject(sim.cluster, "xid", "gpu013", gpu=1, code=145)
    run = FlowThread(lambda: run_to_state_result(fix_in_place, node="gpu013", xid=145, gpu=1))
    led = runtime.ledger()
    wait_for("the GPU reset Job", lambda: any(a.kind == "job_gpu-reset" for a in led.actions(node="gpu013")),
             timeout=90)

    def uncordon(node: dict) -> None:  # what `kubectl uncordon` does; gpu-remedy's annotations stay behind
        node["spec"].pop("unschedulable", None)

    with sim.cluster.lock:
        sim.cluster.store.mutate("Node", "", "gpu013", uncordon)
    out = run.result(120)
    assert out["status"] == "stopped-by-operator" and "uncordoned by hand" in out["why"]
    kinds = _kinds(led, "gpu013")
    assert "respect_drift" in kinds and "uncordon_node" not in kinds and "job_nvml-probe" not in kinds
    assert led.actions(kind="fix_reset-gpu")[0].outcome.value == "skipped"
    assert _node(sim, "gpu013")["unschedulable"] is False  # never re-cordoned


def _fault_a_restart_does_not_clear(sim, node: str, gpu: int, *, reset_clears: bool = True) -> None:
    """XID 94 whose cause outlives the application: the GPU stays out of allocatable, so the job's pod cannot run
    on the node again after a restart (as bench/fleet_replay.py plays a fault that needs a reset)."""
    inject(sim.cluster, "xid", node, gpu=gpu, code=94)
    with sim.cluster.lock:
        g = sim.cluster.health_of(node).gpus[gpu]
        g.pending_xids.append(94)
        g.reset_clears = reset_clears
        sim.cluster.reconcile({node})


def test_a_restart_the_job_cannot_come_back_from_is_a_failed_rung_then_replace_first(prefect_server, sim, remedy_env):
    """The restart reported "restarted" and closed the incident while the gang job stayed short (seen in the
    real-stack replay). Now it is a failed rung, and the shared choose() picks the ready spare over the next rung;
    the failed node is then reset off the critical path, burned in, and returned to the spare pool."""
    from remedy.platform.demo import _spares_validated_at_build

    runtime = remedy_env(sim=sim, WORKLOAD__RESUME_TIMEOUT_SECONDS="3")
    _spares_validated_at_build(runtime)
    _fault_a_restart_does_not_clear(sim, "gpu003", 2)
    out = run_to_state_result(fix_in_place, node="gpu003", xid=94, gpu=2)
    assert [s["step"] for s in out["steps"]] == ["restart-app", "replace"], out["steps"]
    assert "did not come back" in out["steps"][0]["result"]["failed"]
    assert "not allocatable" in out["steps"][0]["result"]["failed"]  # seen at once, not after the timeout
    assert out["choice"]["option"] == "replace" and out["choice"]["tried_depth"] == 0
    assert {o["option"] for o in out["choice"]["options"]} == {"reset-gpu", "reboot", "replace", "escalate"}
    assert out["status"] == "replaced" and out["replacement"] in ("gpu015", "gpu016")
    led = runtime.ledger()
    attempts = [(a.kind, a.outcome.value) for a in led.actions(node="gpu003") if a.kind.startswith("fix_")]
    assert attempts[:2] == [("fix_restart-app", "failed"), ("fix_replace", "succeeded")]
    # off the critical path: the job was on the spare before the reset started; the node is a spare again
    assert out["recovery"]["status"] == "returned-to-spares", out["recovery"]
    promoted = max(a.finished_at for a in led.actions(kind="set_state_active") if a.node == out["replacement"])
    reset = next(a for a in led.actions(node="gpu003", kind="fix_reset-gpu"))
    assert reset.detail.get("off_critical_path") and reset.started_at >= promoted
    assert led.get_node("gpu003").state.value == "spare"
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", out["replacement"])


def test_a_failed_restart_climbs_to_the_reset_when_no_spare_is_ready(prefect_server, sim, remedy_env):
    """Same fault, no spare: choose() climbs (reset on the critical path) instead of restarting again after a
    10-minute back-off; the reset clears it and the node goes back to work."""
    from remedy.domain.model import NodeState

    runtime = remedy_env(sim=sim)  # the default 600-s resume timeout: the GPU out of allocatable says it at once
    led = runtime.ledger()
    from remedy.platform.demo import _spares_validated_at_build

    _spares_validated_at_build(runtime)
    for n in led.nodes(NodeState.SPARE):  # the spares are out for maintenance
        led.transition(n.name, NodeState.QUARANTINED, reason="test: maintenance", requested_by="test")
    _fault_a_restart_does_not_clear(sim, "gpu004", 1)
    out = run_to_state_result(fix_in_place, node="gpu004", xid=94, gpu=1)
    assert [s["step"] for s in out["steps"]] == ["restart-app", "reset-gpu"], out["steps"]
    assert out["choice"]["spares_ready"] == 0 and out["choice"]["option"] in ("reset-gpu", "reboot")
    assert out["status"] == "fixed" and "recovery" not in out
    assert not sim.cluster.health["gpu004"].faulty()
    restart = next(a for a in led.actions(node="gpu004", kind="fix_restart-app"))
    assert (restart.finished_at - restart.started_at).total_seconds() < 120  # not the 600-s resume timeout
