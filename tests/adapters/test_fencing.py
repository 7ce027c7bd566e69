"""The incident's fence at the cluster, through the adapter (remedy.safety.fence): a run that lost its incident
cannot change a node, and the API server is what refuses it; on the simulator and, where one is built, a real
control plane. The ledger side (`confirm`) is played by plain callables here; tests/flows/test_fencing.py runs it
with the ledger and real flow runs."""

from __future__ import annotations

import logging

import pytest

from remedy.adapters.cluster import NodeJobSpec, Taint
from remedy.adapters.kubernetes import KubernetesCluster
from remedy.domain import events
from remedy.ledger.errors import LeaseLost
from remedy.safety.fence import ANN_FENCE, STOOD_DOWN, FenceLost, NodeFence
from tests.fixtures.real_k8s import simulator_or_real
from tests.fixtures.sim import settings_for


@pytest.fixture(params=["simulator", "real"])
def sim(request):
    return simulator_or_real(request)


@pytest.fixture
def cluster(sim):
    with KubernetesCluster(settings_for(sim), watch_nodes=False) as c:
        yield c


class Ledger:
    """Which run holds each incident, as the ledger's fence check answers (remedy.ledger.incidents.check_fence)."""

    def __init__(self) -> None:
        self.holder: dict[int, str] = {}
        self.asked = 0

    def fence(self, incident: int, run: str) -> NodeFence:
        def confirm() -> None:
            self.asked += 1
            if self.holder.get(incident) != run:
                raise LeaseLost(f"run {run} no longer holds incident {incident}: it stops here")

        return NodeFence(incident, run, confirm=confirm)


def _taken_over(cluster: KubernetesCluster, node: str) -> tuple[Ledger, NodeFence]:
    """Run A held incident 5 and fenced `node`; run B took the incident over and put its fence there. A's fence."""
    led = Ledger()
    led.holder[5] = "run-a"
    a = led.fence(5, "run-a")
    cluster.fence_node(node, a)
    assert cluster.get_node(node).annotations[ANN_FENCE] == "incident-5/run-a"
    led.holder[5] = "run-b"
    cluster.fence_node(node, led.fence(5, "run-b"))
    assert cluster.get_node(node).annotations[ANN_FENCE] == "incident-5/run-b"
    return led, a


def test_a_fenced_cordon_writes_the_runs_fence_with_the_change(cluster):
    led = Ledger()
    led.holder[3] = "run-a"
    change = cluster.cordon("gpu003", reason="XID 79", by="test", fence=led.fence(3, "run-a"))
    node = cluster.get_node("gpu003")
    assert change.changed and node.unschedulable and node.annotations[ANN_FENCE] == "incident-3/run-a"
    assert led.asked == 1  # the node carried no fence of this run's: the ledger was asked once
    cluster.set_taints("gpu003", add=[Taint("remedy.io/quarantine")], fence=led.fence(3, "run-a"))
    assert led.asked == 1  # its own fence on the node: no ledger round trip


STEPS = {
    "cordon": lambda c, n, f: c.cordon(n, reason="stale", by="run-a", fence=f),
    "uncordon": lambda c, n, f: c.uncordon(n, reason="stale", by="run-a", fence=f),
    "taint": lambda c, n, f: c.set_taints(n, add=[Taint("remedy.io/quarantine")], fence=f),
    "label": lambda c, n, f: c.set_labels(n, {"remedy.io/pool": "active"}, fence=f),
    "drain": lambda c, n, f: c.drain(n, grace_period_seconds=0, deadline_seconds=5, fence=f),
    "restart": lambda c, n, f: c.restart_pods(n, "training", fence=f),
    "reset job": lambda c, n, f: c.run_node_job(NodeJobSpec(name="remedy-gpu-reset-stale", node=n, check="gpu-reset",
                                                            command=("nvidia-smi", "-r"), privileged=True), fence=f),
}


def _writable(node) -> tuple:
    """What gpu-remedy writes on a Node: cordon, taints, labels, annotations (its fence among them)."""
    return node.unschedulable, dict(node.taints), dict(node.labels), dict(node.annotations)


@pytest.mark.parametrize("step", list(STEPS))
def test_a_run_that_lost_its_incident_changes_nothing_on_the_node(cluster, step, caplog):
    """Every destructive call of a run whose incident was taken over is refused: the Node (what gpu-remedy writes),
    its pods and the jobs namespace are as the new run left them; one log line and one Event say so."""
    node = "gpu004" if step != "uncordon" else "gpu005"
    if step == "uncordon":
        cluster.cordon(node, reason="XID 79", by="run-a")
    _, stale = _taken_over(cluster, node)
    before = cluster.get_node(node)
    pods = sorted(p["metadata"]["name"] for p in cluster.pods_on_node(node))
    assert pods  # the training job has a pod there: a drain or restart would evict it
    with caplog.at_level(logging.WARNING, logger="remedy.adapters.kubernetes"), pytest.raises(FenceLost) as refused:
        STEPS[step](cluster, node, stale)
    assert STOOD_DOWN in str(refused.value) and "incident 5" in str(refused.value)
    assert isinstance(refused.value, LeaseLost)  # the flows stop on it as on the ledger's own refusal
    after = cluster.get_node(node)
    # what a write of these steps would change; not the resourceVersion: on the real lane the kubelet's 10 s
    # heartbeat moves it (a coverage run's 7295 -> 7299, 2026-11-29)
    assert _writable(after) == _writable(before) and after.annotations[ANN_FENCE] == "incident-5/run-b"
    assert sorted(p["metadata"]["name"] for p in cluster.pods_on_node(node)) == pods
    assert cluster.job_pods("remedy-gpu-reset-stale") == []
    said = [r.getMessage() for r in caplog.records if STOOD_DOWN in r.getMessage()]
    assert len(said) == 1 and node in said[0], said
    stood = [e for e in cluster.node_events(node) if e["reason"] == events.STOOD_DOWN]
    assert len(stood) == 1 and stood[0]["type"] == "Warning" and stood[0]["message"].startswith(STOOD_DOWN)


def test_a_takeover_between_the_read_and_the_write_is_refused_by_the_api_server(cluster, sim):
    """Run A reads the Node carrying its own fence (so it asks the ledger nothing), then stalls; run B takes the
    incident over and writes its fence; A's cordon, carrying the resourceVersion it read, is a 409 from the API
    server, and on reading again A finds B's fence and the ledger refuses it."""
    led = Ledger()
    led.holder[6] = "run-a"
    stale = led.fence(6, "run-a")
    cluster.fence_node("gpu006", stale)
    asked = led.asked
    with KubernetesCluster(settings_for(sim), watch_nodes=False) as other:
        real_read = cluster._node_json
        reads = []

        def read_then_stall(name: str) -> dict:
            obj = real_read(name)
            reads.append(obj["metadata"]["resourceVersion"])
            if len(reads) == 1:  # while A is stalled after its read: the takeover
                led.holder[6] = "run-b"
                other.fence_node("gpu006", led.fence(6, "run-b"))
            return obj

        cluster._node_json = read_then_stall
        with pytest.raises(FenceLost):
            cluster.cordon("gpu006", reason="stale", by="run-a", fence=stale)
    assert len(reads) == 2 and reads[0] != reads[1]  # refused (409) once, read again
    assert led.asked == asked + 2  # B's fence write, then A's second look: the ledger says no
    node = cluster.get_node("gpu006")
    assert not node.unschedulable and node.annotations[ANN_FENCE] == "incident-6/run-b"


def test_another_incident_on_the_node_does_not_stop_a_live_run(cluster):
    """The fence names one incident's run; a live run of another incident writes over it after the ledger says
    it holds its own: nobody is stood down who still holds an incident (cross-incident order is the gate's job)."""
    led = Ledger()
    led.holder.update({1: "run-1", 2: "run-2"})
    cluster.cordon("gpu007", reason="XID 79", by="run-1", fence=led.fence(1, "run-1"))
    cluster.set_taints("gpu007", add=[Taint("remedy.io/quarantine")], fence=led.fence(2, "run-2"))
    cluster.set_labels("gpu007", {"remedy.io/pool": "quarantined"}, fence=led.fence(1, "run-1"))
    node = cluster.get_node("gpu007")
    assert node.annotations[ANN_FENCE] == "incident-1/run-1" and node.has_taint("remedy.io/quarantine")


def test_a_dry_run_writes_no_fence_and_asks_nothing(sim):
    led = Ledger()
    with KubernetesCluster(settings_for(sim), dry_run=True, watch_nodes=False) as dry:
        before = dry.get_node("gpu008")
        assert dry.cordon("gpu008", reason="XID 79", by="t", fence=led.fence(9, "run-a")).dry_run
        dry.fence_node("gpu008", led.fence(9, "run-a"))
        after = dry.get_node("gpu008")
    assert led.asked == 0 and after.resource_version == before.resource_version
    assert ANN_FENCE not in after.annotations
