"""A run that lost its incident cannot change the node, whatever the timing (issue 32, item 1): replace-node and
fix-in-place are frozen with a real SIGSTOP between a step's ledger write and its cluster call — at every
destructive step — while another run takes the incident over and finishes the job; continued (SIGCONT), the
frozen call changes nothing on the cluster, and the run stops with one log line and one `RemedyStoodDown` Event.

The frozen run is a flow process of its own (takeover_helpers.StoppableFlowProcess): one per module, Prefect and
the flows imported once, running one case after another. For each case a test-side hook (`stop_at`, loaded in that
process, never in gpu-remedy's code) wraps the step's adapter method: its first matching call — after `act()`
wrote and fenced the step's ledger row, before any request — stops the whole process with SIGSTOP, every thread of
it (the lease renewal too). The takeover is a real one, in this process: the stopped run's lease runs out (this
process's ledger clock moves past it, takeover_helpers.lease_runs_out) and a person's run of the same flow claims
the incident, replays the finished steps and completes. The fence's own races (a takeover between the read and the
write) are in tests/adapters/test_fencing.py, the API server's side in tests/sim/conformance/test_fencing.py;
tests/flows/test_takeover.py stops a process mid-drain and checks the ledger refuses it.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a SQLite ledger shared by both
processes (two cases on a PostgreSQL ledger)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.domain import events
from remedy.domain.model import IncidentStatus
from remedy.safety.fence import ANN_FENCE, STOOD_DOWN
from remedy.sim.faults import inject
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state
from tests.flows.takeover_helpers import StoppableFlowProcess, lease_runs_out, stop_outside_a_write, warm_up

pytestmark = pytest.mark.prefect

# the stopped run must not lose its lease to a stall of a loaded machine before the step: long, and nobody waits it
# out (lease_runs_out moves this process's ledger clock); no watchdog re-announces anything meanwhile
LEASES = {"LEASES__TTL_SECONDS": 60, "LEASES__RENEW_SECONDS": 1, "LEASES__WATCHDOG_SECONDS": 3600}
FAILED = "gpu007"


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
STEPS: dict[str, tuple[str, str, Callable[[Any, tuple, dict], bool]]] = {
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
    "fix-reboot": ("fix", "run_node_job", _job("remedy-reboot")),  # the issue's own case
    "fix-release-untaint": ("fix", "set_taints", lambda n, a, kw: n == FAILED and kw.get("remove")),
    "fix-release-uncordon": ("fix", "uncordon", _failed),
    "fix-back-to-active-label": ("fix", "set_labels", _labels("active")),
}


def stop_at(step: str, stop: Callable[[], None]) -> Callable[[], None]:
    """The hook the flow process loads for a case: the first call of the step's adapter method that matches calls
    `stop()` (a SIGSTOP of the process) at its entry, then runs unchanged. Returns the undo."""
    _flow, method, match = STEPS[step]
    original = getattr(KubernetesCluster, method)
    fired = []

    def stopping(adapter, first, *args, **kwargs):
        if not fired and not adapter.dry_run and match(first, args, kwargs):
            fired.append(step)
            stop()
        return original(adapter, first, *args, **kwargs)

    setattr(KubernetesCluster, method, stopping)
    return lambda: setattr(KubernetesCluster, method, original)


@pytest.fixture(scope="module")
def stoppable(prefect_server, tmp_path_factory):
    flow_process = StoppableFlowProcess(tmp_path_factory.mktemp("stoppable"))
    flow_process.warm_up()  # its imports and a first flow run go on while this process imports the flows
    import flows.fix_in_place  # noqa: F401
    import flows.replace_node  # noqa: F401

    warm_up()  # this process takes the incidents over: its first flow run's cost is paid here too
    flow_process.ready()
    yield flow_process
    flow_process.close()


def _cluster_state(cluster) -> dict:
    """What a run could change: every node's cordon, taints, labels, annotations and boot, the Jobs, the pods."""
    nodes = {n.name: (n.unschedulable, sorted(n.taints.items()), sorted(n.labels.items()),
                      sorted(n.annotations.items()), n.boot_id) for n in cluster.list_gpu_nodes()}
    jobs = sorted(j["metadata"]["name"] for j in cluster._list("jobs", cluster.batch.list_job_for_all_namespaces))
    pods = sorted((p["metadata"]["namespace"], p["metadata"]["name"], (p.get("spec") or {}).get("nodeName"),
                   bool(p["metadata"].get("deletionTimestamp")))
                  for p in cluster._list("pods", cluster.core.list_pod_for_all_namespaces))
    return {"nodes": nodes, "jobs": jobs, "pods": pods}


# every step on SQLite; on PostgreSQL (where a stopped client holds only its own rows) one step of each flow
CASES = [(step, "sqlite") for step in STEPS] + [("replace-drain", "postgresql"), ("fix-reboot", "postgresql")]


@pytest.mark.parametrize("step,db", CASES)
def test_a_run_stopped_at_a_step_and_continued_after_a_takeover_changes_nothing(prefect_server, sim_factory,
                                                                                remedy_env, stoppable, tmp_path,
                                                                                request, step, db):
    from flows.fix_in_place import fix_in_place
    from flows.replace_node import replace_node
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build

    flow, _method, _match = STEPS[step]
    sim = sim_factory(nodes=16, spares=2)  # 30 s grace periods last 0.3 s, a reboot 1.8 s
    # fix-in-place fixes the node in place (not replaced first); the reboot rung needs a reset that does not hold
    ledger = {} if db == "sqlite" else {"DB_URL": request.getfixturevalue("fresh_postgres_url")}
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false", **LEASES, **ledger)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    if flow == "replace":
        incident, _ = led.open_incident(Incident(node=FAILED, signal="row-remap-failure", gpu=4), window_seconds=600)
        args: dict[str, Any] = {"node": FAILED, "cause": "row remap failed", "signal": "row-remap-failure", "gpu": 4,
                                "incident_id": incident.id}
        flow_fn, name = replace_node, "replace_node"
    else:
        inject(sim.cluster, "xid", FAILED, gpu=3, code=145)
        if step == "fix-reboot":
            inject(sim.cluster, "reset-fails", FAILED, gpu=3)
        incident, _ = led.open_incident(Incident(node=FAILED, signal="xid", gpu=3, xid=145), window_seconds=600)
        args = {"node": FAILED, "xid": 145, "gpu": 3, "incident_id": incident.id}
        flow_fn, name = fix_in_place, "fix_in_place"

    log = tmp_path / "stopped-run.log"
    call = f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())}, return_state=True)"
    stoppable.run(call, log, hook=f"{__name__}:stop_at", step=step)
    continued = False
    try:
        stoppable.wait_stopped()
        # stopped by its own SIGSTOP at the step; not holding SQLite's write lock (the lease renewal could be)
        stop_outside_a_write(stoppable.proc, runtime.settings().db_url, stop=False)
        stalled = led.get_incident(incident.id).flow_run_id
        lease_runs_out(led, stalled, "the stopped run's lease to run out")
        state, out = run_to_state(flow_fn, **args)  # a person's run of the same flow takes the incident over
        assert out["status"] in ("replaced", "fixed"), (state, out)
        assert led.get_incident(incident.id).flow_run_id != stalled
        cluster = runtime.cluster()
        taken = _cluster_state(cluster)
        stoppable.let_go()
        said = stoppable.result()
        continued = True
    finally:
        if not continued:
            stoppable.discard()  # stopped or mid-run: the next case gets a fresh process

    assert said.get("type") == "FAILED" and "it stops here" in said.get("message", ""), said
    assert _cluster_state(cluster) == taken  # the continued call changed nothing on the cluster
    acted_on = {n for n, (*_, annotations, _) in taken["nodes"].items() if dict(annotations).get(ANN_FENCE)}
    stood = [e for n in acted_on for e in cluster.node_events(n) if e["reason"] == events.STOOD_DOWN]
    assert len(stood) == 1 and stood[0]["message"].startswith(STOOD_DOWN) and stalled in stood[0]["message"], stood
    # said once in the stopped run's log (Prefect's own report of the task's and the flow's failure quote it after)
    lines = [line for line in log.read_text().splitlines() if f" - {STOOD_DOWN}" in line]
    assert len(lines) == 1, lines
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
