"""The operator's uncordon wins at every step of replace-node (issue 17, part 3): an operator uncordons the failed
node right after the cordon, during the drain, after the spare was claimed, or after the spare was promoted. Each
time the run stands down at its next check, records who changed what, never re-cordons, never records the node as
in repair, and a spare it had claimed but not promoted is released: the next failure can have it.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP (the operator's PATCH goes through the
Kubernetes API as kubectl's would), a SQLite ledger."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC

import pytest

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect


def _acts(led, kind: str, outcome: ActionOutcome | None = None, *, node: str | None = None):
    return [a for a in led.actions(kind=kind) if (outcome is None or a.outcome is outcome)
            and (node is None or a.node == node)]


FAILED = "gpu006"
# when the operator steps in (read from the ledger, which the flow writes as it acts), and the check that sees it
STEPS: dict[str, tuple[Callable, str]] = {
    "right after cordon": (lambda led: _acts(led, "cordon_node", ActionOutcome.SUCCEEDED), "before the drain"),
    "during the drain": (lambda led: _acts(led, "drain_node", ActionOutcome.RUNNING), "after the drain"),
    # the spare is stale, so it is validated after the claim: the operator steps in meanwhile
    "after the spare claim": (lambda led: _acts(led, "claim_spare"), "before promoting the spare"),
    "after the promotion": (lambda led: _acts(led, "set_state_active", ActionOutcome.SUCCEEDED),
                            "before sending the node to repair"),
}


def _operator(runtime, ready: Callable, monkeypatch) -> list:
    """The operator uncordons the node the moment the ledger shows `ready`: checked right after each action row the
    flow writes, in the flow's own thread (a thread polling for it can lag past the next check on a loaded
    machine). Returns a list that holds one entry once the operator acted."""
    from kubernetes import client as k8s

    api = k8s.CoreV1Api(runtime.cluster().api)
    led = runtime.ledger()
    acted: list[bool] = []
    start, finish = led.start_action, led.finish_action

    def look() -> None:
        if not acted and ready(led):
            acted.append(True)
            api.patch_node(FAILED, {"spec": {"unschedulable": False}},
                           _content_type="application/strategic-merge-patch+json")

    def start_action(*args, **kwargs):
        out = start(*args, **kwargs)
        look()
        return out

    def finish_action(*args, **kwargs):
        out = finish(*args, **kwargs)
        look()
        return out

    monkeypatch.setattr(led, "start_action", start_action)
    monkeypatch.setattr(led, "finish_action", finish_action)
    return acted


@pytest.mark.parametrize("step", list(STEPS))
def test_an_uncordon_at_each_step_stands_the_run_down(prefect_server, sim_factory, remedy_env, monkeypatch, step):
    from flows.replace_node import replace_node
    from remedy.platform.demo import _spares_validated_at_build

    sim = sim_factory(nodes=16, spares=1, time_scale=0.05)  # one spare: a released one is the only one there is
    stale = step == "after the spare claim"
    # the stood-down node keeps its quarantine taint (only the cordon was lifted): the budget leaves room for the
    # next failure, and the breakers let two failures of a 16-node fleet through (the cluster's 5 % is one node);
    # a hold nobody answers would end in 5 s, not hang the test
    wide = {f"BREAKER__{k}__{f}": 100 for k in ("RACK", "SWITCH", "PDU", "CLUSTER") for f in ("MAX_FAILURES", "MAX_PERCENT")}
    runtime = remedy_env(sim=sim, BREAKER__SPARE_RESERVE=0, SPARES__VALIDATE_ON_PROMOTE=str(stale).lower(),
                         BUDGET__MAX_NODES_IN_REMEDIATION=4, BUDGET__MAX_PERCENT_IN_REMEDIATION=50,
                         APPROVALS__TIMEOUT_SECONDS=5, **wide)
    if not stale:
        _spares_validated_at_build(runtime)
    led = runtime.ledger()
    ready, where = STEPS[step]
    acted = _operator(runtime, ready, monkeypatch)
    out = run_to_state_result(replace_node, node=FAILED, cause="row remap failed", signal="row-remap-failure", gpu=1)
    assert acted, f"the flow never reached {step!r}"
    assert out["status"] == "stopped-by-operator", out
    assert out["drift"]["what"] == "uncordoned by hand" and where in out["why"], out
    assert not runtime.cluster().get_node(FAILED).unschedulable  # never re-cordoned
    assert led.get_node(FAILED).state is not NodeState.REPAIR
    inc = led.get_incident(out["incident_id"])
    assert inc.status is IncidentStatus.ESCALATED and f"operator ({where})" in inc.detail
    # recorded: the gate outcome for the breaker, and no step after the check
    assert _acts(led, "remediation_finished", node=FAILED)
    spares = [n.name for n in runtime.cluster().list_gpu_nodes() if n.labels.get("remedy.io/pool") == "spare"]
    if step == "after the promotion":  # the job runs on the spare already: it stays there
        assert spares == [] and out["replacement"]
        return
    assert _acts(led, "set_state_active", ActionOutcome.SUCCEEDED) == []  # nothing promoted
    assert len(spares) == 1  # still in the pool: released
    if stale:  # it was claimed for this incident, and the next failure gets it
        [claimed] = {a.node for a in _acts(led, "claim_spare")}
        assert out["spare_released"] == claimed == spares[0]
        again = run_to_state_result(replace_node, node="gpu011", cause="row remap failed",
                                    signal="row-remap-failure", gpu=0)
        assert again["status"] == "replaced" and again["replacement"] == claimed, again


# ------------------------------------------------------------------------------------------------ issue 32, item 3
def _kubectl_cordon(runtime, node: str) -> None:
    """What `kubectl cordon` does: spec.unschedulable through the Kubernetes API, no gpu-remedy annotation."""
    from kubernetes import client as k8s

    k8s.CoreV1Api(runtime.cluster().api).patch_node(node, {"spec": {"unschedulable": True}},
                                                     _content_type="application/strategic-merge-patch+json")


def test_a_persons_cordon_before_a_fix_stays_after_it(prefect_server, sim, remedy_env):
    """A person cordoned the node before gpu-remedy acted; the GPU reset fixes it, and the node stays cordoned (on
    main the fix uncordoned it: the operator's cordon was removed)."""
    from flows.fix_in_place import fix_in_place
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim)
    node = "gpu005"
    _kubectl_cordon(runtime, node)
    inject(sim.cluster, "xid", node, gpu=3, code=145)
    out = run_to_state_result(fix_in_place, node=node, xid=145, gpu=3)
    assert out["status"] == "fixed", out
    live = runtime.cluster().get_node(node)
    assert live.unschedulable, "the operator's cordon was lifted"
    assert not live.has_taint("remedy.io/quarantine")  # gpu-remedy's own taint is lifted
    led = runtime.ledger()
    [cordon] = _acts(led, "cordon_node", node=node)
    assert cordon.detail["cordoned_before"] == "person" and not cordon.detail["changed"]  # who cordoned: recorded
    assert _acts(led, "uncordon_node", node=node) == []
    [kept] = _acts(led, "keep_operator_cordon", ActionOutcome.SUCCEEDED, node=node)
    assert "cordoned by a person" in kept.detail["detail"]


def test_gpu_remedys_own_cordon_is_still_lifted_after_a_fix(prefect_server, sim, remedy_env):
    """The other side of the rule: a node gpu-remedy cordoned itself goes back in service after the fix."""
    from flows.fix_in_place import fix_in_place
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim)
    inject(sim.cluster, "xid", "gpu006", gpu=1, code=145)
    out = run_to_state_result(fix_in_place, node="gpu006", xid=145, gpu=1)
    assert out["status"] == "fixed", out
    assert not runtime.cluster().get_node("gpu006").unschedulable
    [cordon] = _acts(runtime.ledger(), "cordon_node", node="gpu006")
    assert cordon.detail["cordoned_before"] == "nobody"


def test_a_persons_cordon_stays_after_a_cleared_recheck(prefect_server, sim, remedy_env):
    from datetime import datetime, timezone

    from flows.fix_in_place import fix_in_place
    from tasks.ledger import open_incident

    runtime = remedy_env(sim=sim)
    node = "gpu008"
    _kubectl_cordon(runtime, node)
    inc = open_incident.fn(node, "xid", gpu=4, xid=145).incident
    runtime.ledger().touch_incident(inc.fingerprint, datetime.now(UTC), alert_cleared=True)
    out = run_to_state_result(fix_in_place, node=node, xid=145, gpu=4, incident_id=inc.id)
    assert out["status"] == "cleared-before-acting", out
    assert runtime.cluster().get_node(node).unschedulable


def test_a_fix_started_by_a_person_and_stood_down_closes_its_incident(prefect_server, sim_factory, remedy_env):
    """A person starts fix-in-place by hand; the operator uncordons mid-reset and the run stands down. Its incident
    is closed as stood down (on main it stayed `acting`, so the watchdog re-announced it and triage re-cordoned and
    drained the node the operator had just uncordoned); the watchdog finds nothing to hand on."""
    from flows.fix_in_place import fix_in_place
    from remedy.receiver.watchdog import LeaseWatchdog
    from remedy.sim.faults import inject
    from tests.approvals.helpers import FlowThread, wait_for

    sim = sim_factory(nodes=16, spares=2, time_scale=0.1)  # slow enough to act by hand while the reset runs
    runtime = remedy_env(sim=sim)
    node = "gpu013"
    inject(sim.cluster, "xid", node, gpu=1, code=145)
    run = FlowThread(lambda: run_to_state_result(fix_in_place, node=node, xid=145, gpu=1))
    led = runtime.ledger()
    wait_for("the GPU reset Job", lambda: any(a.kind == "job_gpu-reset" for a in led.actions(node=node)), timeout=90)
    with sim.cluster.lock:
        sim.cluster.store.mutate("Node", "", node, lambda n: n["spec"].pop("unschedulable", None))
    out = run.result(120)
    assert out["status"] == "stopped-by-operator", out
    inc = led.get_incident(out["incident_id"])
    assert inc.status is IncidentStatus.IGNORED and "stopped by operator" in inc.detail, inc
    sent: list = []
    dog = LeaseWatchdog(led, sent.extend, every_seconds=60, max_reannounces=3, show_gone=None)
    assert dog.sweep() == [] and sent == []
    assert not runtime.cluster().get_node(node).unschedulable  # never re-cordoned
