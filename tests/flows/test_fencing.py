"""A run that lost its incident cannot change the node, whatever the timing (issue 32, item 1): replace-node and
fix-in-place are frozen between a step's ledger write and its cluster call — at every destructive step — while
another run takes the incident over and finishes the job; resumed, the frozen call changes nothing on the cluster,
and the run stops with one log line and a `RemedyStoodDown` Event.

The freeze is in-process: the adapter method of that step waits at its entry (after `act()` wrote and fenced its
ledger row, before any request) until the test lets it go, so every step is reached in a few seconds; the
takeover is a real one (the frozen run's lease ended as the watchdog ends a stalled run's, then a person's run of
the same flow claims the incident, replays the finished steps and completes). tests/flows/test_takeover.py stops a
real flow process with SIGSTOP mid-drain; the fence's own races (a takeover between the read and the write) are in
tests/adapters/test_fencing.py and the API server's side in tests/sim/conformance/test_fencing.py.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a SQLite ledger."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.domain import events
from remedy.domain.model import IncidentStatus
from remedy.safety.fence import ANN_FENCE, STOOD_DOWN
from remedy.sim.faults import inject
from tests.approvals.helpers import FlowThread, remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state

pytestmark = pytest.mark.prefect

LEASES = {"LEASES__TTL_SECONDS": 60, "LEASES__RENEW_SECONDS": 1, "LEASES__WATCHDOG_SECONDS": 3600}
FAILED = "gpu007"
SPARE_TAINT = "remedy.io/spare"


def _failed(node: str, _args: tuple, _kw: dict) -> bool:
    return node == FAILED


def _spare(node: str, _args: tuple, _kw: dict) -> bool:
    return node != FAILED


def _job(prefix: str):
    """The fix's own Job (`remedy-<check>-<node>-<attempt>`), not the read-only reconfirm probe before the ladder."""
    return lambda spec, _args, _kw: spec.node == FAILED and spec.name.startswith(prefix)


def _labels(pool: str, on_failed: bool = True):
    return lambda node, args, kw: (node == FAILED) == on_failed and (args[:1] or [kw.get("labels")])[0] == {
        "remedy.io/pool": pool}


# (flow, adapter method, which call of it): the destructive calls of each flow, in the order it makes them
STEPS: dict[str, tuple[str, str, Any]] = {
    "replace-cordon": ("replace", "cordon", _failed),
    "replace-quarantine-taint": ("replace", "set_taints", _failed),
    "replace-drain": ("replace", "drain", _failed),
    "replace-promote-untaint": ("replace", "set_taints", _spare),
    "replace-promote-label": ("replace", "set_labels", _spare),
    "replace-to-repair-label": ("replace", "set_labels", _labels("repair")),
    "fix-cordon": ("fix", "cordon", _failed),
    "fix-quarantine-taint": ("fix", "set_taints", _failed),
    "fix-drain": ("fix", "drain", _failed),
    "fix-reset": ("fix", "run_node_job", _job("remedy-gpu-reset")),
    "fix-verify": ("fix", "run_node_job", _job("remedy-nvml-probe")),
    "fix-reboot": ("fix", "run_node_job", _job("remedy-reboot")),
    "fix-release-untaint": ("fix", "set_taints", lambda n, a, kw: n == FAILED and kw.get("remove")),
    "fix-release-uncordon": ("fix", "uncordon", _failed),
    "fix-back-to-active-label": ("fix", "set_labels", _labels("active")),
}
# fix-reboot (the case) and replace-promote-label run in the normal tiers, the rest in the slow tier
# (tests/slow.py): each case runs two flows on the test Prefect server


class Freeze:
    """The first call of `method` that `match`es waits at its entry until `release()`: the run is frozen after its
    ledger write and before its cluster call. The call itself then runs unchanged."""

    def __init__(self, monkeypatch, method: str, match) -> None:
        self.arrived, self._go = threading.Event(), threading.Event()
        self.fired = False
        original = getattr(KubernetesCluster, method)
        lock = threading.Lock()

        def frozen(adapter, first, *args, **kwargs):
            with lock:
                mine = not self.fired and not adapter.dry_run and match(first, args, kwargs)
                self.fired = self.fired or mine
            if mine:
                self.arrived.set()
                assert self._go.wait(180), "never released"
            return original(adapter, first, *args, **kwargs)

        monkeypatch.setattr(KubernetesCluster, method, frozen)

    def release(self) -> None:
        self._go.set()


def _cluster_state(cluster) -> dict:
    """What a run could change: every node's cordon, taints, labels, annotations and boot, the Jobs, the pods."""
    nodes = {n.name: (n.unschedulable, sorted(n.taints.items()), sorted(n.labels.items()),
                      sorted(n.annotations.items()), n.boot_id) for n in cluster.list_gpu_nodes()}
    jobs = sorted(j["metadata"]["name"] for j in cluster._list("jobs", cluster.batch.list_job_for_all_namespaces))
    pods = sorted((p["metadata"]["namespace"], p["metadata"]["name"], (p.get("spec") or {}).get("nodeName"),
                   bool(p["metadata"].get("deletionTimestamp")))
                  for p in cluster._list("pods", cluster.core.list_pod_for_all_namespaces))
    return {"nodes": nodes, "jobs": jobs, "pods": pods}


def _params():
    for step in STEPS:
        yield pytest.param(step, id=step)


@pytest.mark.parametrize("step", list(_params()))
def test_a_run_frozen_at_a_step_and_resumed_after_a_takeover_changes_nothing(prefect_server, sim_factory, remedy_env,
                                                                            monkeypatch, step):
    from flows.fix_in_place import fix_in_place
    from flows.replace_node import replace_node
    from remedy.demo import _spares_validated_at_build
    from remedy.domain.model import Incident

    flow, method, match = STEPS[step]
    sim = sim_factory(nodes=16, spares=2, time_scale=0.05)
    # fix-in-place fixes the node in place (not replaced first); the reboot rung needs a reset that does not hold
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false", **LEASES)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    if flow == "replace":
        incident, _ = led.open_incident(Incident(node=FAILED, signal="row-remap-failure", gpu=4), window_seconds=600)

        def call():
            return run_to_state(replace_node, node=FAILED, cause="row remap failed", signal="row-remap-failure", gpu=4,
                                incident_id=incident.id)
    else:
        inject(sim.cluster, "xid", FAILED, gpu=3, code=145)
        if "reboot" in step:
            inject(sim.cluster, "reset-fails", FAILED, gpu=3)
        incident, _ = led.open_incident(Incident(node=FAILED, signal="xid", gpu=3, xid=145), window_seconds=600)

        def call():
            return run_to_state(fix_in_place, node=FAILED, xid=145, gpu=3, incident_id=incident.id)

    freeze = Freeze(monkeypatch, method, match)
    frozen = FlowThread(call)
    try:
        assert freeze.arrived.wait(120), f"the run never reached {step}"
        # the frozen run is gone to the ledger (its lease ended, as the watchdog ends a stalled run's) and a person's
        # run of the same flow takes the incident over and finishes it
        stalled = led.get_incident(incident.id).flow_run_id
        assert led.end_lease(stalled, reason="gone: found gone by the watchdog (test)")
        state, out = call()
        assert out["status"] in ("replaced", "fixed"), out
        assert led.get_incident(incident.id).flow_run_id != stalled
        cluster = runtime.cluster()
        taken = _cluster_state(cluster)
    finally:
        freeze.release()
    stale_state, _ = frozen.result(120)

    assert stale_state.is_failed() and "it stops here" in stale_state.message, stale_state
    assert _cluster_state(cluster) == taken  # the resumed call changed nothing on the cluster
    acted_on = {n for n, (*_, annotations, _) in taken["nodes"].items() if dict(annotations).get(ANN_FENCE)}
    stood = [e for n in acted_on for e in cluster.node_events(n) if e["reason"] == events.STOOD_DOWN]
    assert len(stood) == 1 and stood[0]["message"].startswith(STOOD_DOWN) and stalled in stood[0]["message"], stood
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED


@pytest.mark.parametrize("flow", ["fix-in-place", "replace-node"])
def test_a_stopped_process_continued_after_a_takeover_changes_nothing(prefect_server, sim_factory, remedy_env,
                                                                      tmp_path, flow):
    """The same with a real freeze: the flow runs in a process of its own, SIGSTOPped as the ledger shows the reboot
    Job's row (fix-in-place; the issue's case) or the spare's promotion (replace-node) — the call right after it;
    its lease runs out, a person's run takes over and finishes; SIGCONT: the cluster is left as the new run left it."""
    import signal
    import subprocess

    from flows.fix_in_place import fix_in_place
    from flows.replace_node import replace_node
    from remedy.demo import _spares_validated_at_build
    from remedy.domain.model import ActionOutcome, Incident
    from tests.fixtures.prefect import run_to_state_result
    from tests.flows.test_takeover import LEASES as KILL_LEASES
    from tests.flows.test_takeover import WarmFlowProcesses, _acts, _stop_outside_a_write, go, lease_runs_out

    sim = sim_factory(nodes=16, spares=2, time_scale=0.05)
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false", **KILL_LEASES)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    warm = WarmFlowProcesses(tmp_path)
    log = tmp_path / "flow.log"
    try:
        if flow == "fix-in-place":
            inject(sim.cluster, "xid", FAILED, gpu=3, code=145)
            inject(sim.cluster, "reset-fails", FAILED, gpu=3)  # the reset does not hold: the reboot rung
            incident, _ = led.open_incident(Incident(node=FAILED, signal="xid", gpu=3, xid=145), window_seconds=600)
            proc = warm.start(f"fix_in_place(node='{FAILED}', xid=145, gpu=3, incident_id=incident_id, "
                              "return_state=True)", log)

            def at_step():
                return _acts(led, incident.id, "job_reboot", ActionOutcome.RUNNING)

            def takeover():
                return run_to_state_result(fix_in_place, node=FAILED, xid=145, gpu=3, incident_id=incident.id)
        else:
            incident, _ = led.open_incident(Incident(node=FAILED, signal="row-remap-failure", gpu=4),
                                            window_seconds=600)
            proc = warm.start(f"replace_node(node='{FAILED}', cause='row remap failed', signal='row-remap-failure', "
                              "gpu=4, incident_id=incident_id, return_state=True)", log)

            def at_step():
                return _acts(led, incident.id, "untaint_node", ActionOutcome.RUNNING, not_node=FAILED)

            def takeover():
                return run_to_state_result(replace_node, node=FAILED, cause="row remap failed",
                                           signal="row-remap-failure", gpu=4, incident_id=incident.id)
        go(proc, incident.id)
        deadline = time.monotonic() + 240
        while not at_step():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.002)
        _stop_outside_a_write(proc, runtime.settings().db_url)
        try:
            stalled = led.get_incident(incident.id).flow_run_id
            lease_runs_out(led, stalled, "the stopped run's lease to run out")
            out = takeover()
            assert out["status"] in ("fixed", "replaced"), out
            cluster = runtime.cluster()
            taken = _cluster_state(cluster)
        finally:
            proc.send_signal(signal.SIGCONT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"the continued run did not stop:\n{log.read_text()[-3000:]}")
    finally:
        warm.close()
    said = log.read_text()
    assert "it stops here" in said, said[-3000:]
    assert _cluster_state(cluster) == taken  # nothing changed on the cluster after the continued run woke
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
