"""The incident's fence at the cluster beyond replace-node and fix-in-place (issue 32, item 1): fault isolation's
batch taints and labels and a preemption for a spare, made by a run that lost its incident, change nothing; and
triage's own claim puts the new run's fence on the node, so a stale run is refused before the new run touches it.

The takeover happens at the entry of the step's first fenced request (after `act()` wrote and fenced its ledger
row): the test's hook hands the incident to another run in the ledger and puts that run's fence on the incident's
node, as its claim does (tasks.leases.hold_incident_node). The rest of tests/flows/test_fencing.py's reasoning holds.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a SQLite ledger."""

from __future__ import annotations

from typing import Any

import pytest
from prefect import flow

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.domain import events
from remedy.domain.model import Incident
from remedy.safety.fence import ANN_FENCE, STOOD_DOWN, FenceLost, NodeFence
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state
from tests.fixtures.sim import settings_for

pytestmark = pytest.mark.prefect

FAILED = "gpu003"  # the incident's node
POOL = ["gpu001", "gpu002", FAILED]  # suspects of an isolation; the incident's node last (checked, not written first)
VICTIM, VICTIM_NODE = "sessions/notebook-gpu008", "gpu008"
QUARANTINE = "remedy.io/quarantine"
BATCH = "divergence-job-id"
TAKEN_BY = "run-b"


class Takeover:
    """At the entry of the first fenced Node request once `armed`: run B takes the incident over in the ledger and
    its claim puts B's fence on the incident's node (through another client). Records the cluster as B left it."""

    def __init__(self, monkeypatch, sim, runtime, incident_id: int) -> None:
        self.armed = False
        self.done = False
        self.state: dict[str, Any] = {}
        original = KubernetesCluster._write_node
        led = runtime.ledger()

        def write_node(adapter, name, what, plan, fence, *args, **kwargs):
            if self.armed and fence is not None and not self.done:
                self.done, self.armed = True, False
                claim = led.take_over_incident(incident_id, TAKEN_BY, expected_holder=fence.run,
                                               reason="test: the stale run was found gone", holder_over=True)
                assert claim.claimed, claim
                with KubernetesCluster(settings_for(sim), watch_nodes=False) as other:
                    other.fence_node(FAILED, NodeFence(incident_id, TAKEN_BY))
                self.state = cluster_state(sim, runtime.cluster())
            return original(adapter, name, what, plan, fence, *args, **kwargs)

        monkeypatch.setattr(KubernetesCluster, "_write_node", write_node)


def cluster_state(sim, cluster) -> dict[str, Any]:
    """What these steps could change: every node's cordon, taints, labels and annotations; the sessions."""
    nodes = {n.name: (n.unschedulable, sorted(n.taints.items()), sorted(n.labels.items()),
                      sorted(n.annotations.items())) for n in cluster.list_gpu_nodes()}
    return {"nodes": nodes, "sessions": dict(sim.cluster.sessions())}


@flow(name="fenced-steps")
def steps_of_a_run(incident_id: int, stale_at: str, takeover: bool = True) -> dict[str, Any]:
    """A run holding the incident (claimed as claim_remediation does) makes isolation's and preemption's calls; the
    takeover is armed right before `stale_at`."""
    from prefect.runtime import flow_run

    from remedy import runtime
    from tasks.isolation import label_batch, quarantine_pool, release_nodes
    from tasks.leases import hold_incident_node
    from tasks.preemption import preempt

    assert runtime.ledger().claim(incident_id, str(flow_run.id)).claimed
    hold_incident_node(incident_id, False)
    arm = TAKEOVERS[incident_id]
    plan = {"job": "training/llm-pretrain", "victims": [{"name": VICTIM, "nodes": [VICTIM_NODE], "priority": 0}],
            "freed_nodes": [VICTIM_NODE]}
    steps = {
        "quarantine": lambda: quarantine_pool(POOL, "t1", False, incident_id=incident_id),
        "label": lambda: label_batch(POOL[:2], "batch-a", "t1", False, incident_id=incident_id),
        "release": lambda: release_nodes(POOL[:2], "healthy", "t1", False, incident_id=incident_id),
        "preempt": lambda: preempt(plan, FAILED, False, incident_id=incident_id),
    }
    done = {}
    for name, step in steps.items():
        arm.armed = takeover and name == stale_at
        done[name] = step()
    return {"done": sorted(done), "preempted": list(done["preempt"].preempted)}


TAKEOVERS: dict[int, Takeover] = {}


@pytest.fixture
def env(prefect_server, sim_factory, remedy_env):  # noqa: F811
    sim = sim_factory(nodes=16, spares=0, sessions=2)
    runtime = remedy_env(sim=sim)
    return sim, runtime


def _incident(runtime) -> int:
    incident, _ = runtime.ledger().open_incident(Incident(node=FAILED, signal="nan-loss", gpu=0), window_seconds=600)
    return incident.id


@pytest.mark.parametrize("stale_at", ["quarantine", "label", "release", "preempt"])
def test_a_run_that_lost_its_incident_cannot_isolate_nor_preempt(env, monkeypatch, stale_at):
    """Quarantine taints, batch labels, the release (unlabel, untaint) and a preemption: a run taken over between its
    ledger row and the call changes nothing, stops with one line, and the incident's node carries one Event. The
    nodes it wrote before carry its fence (label and release: their own fence would have let it through; the
    incident's node is what refuses it)."""
    sim, runtime = env
    iid = _incident(runtime)
    TAKEOVERS[iid] = takeover = Takeover(monkeypatch, sim, runtime, iid)
    state, _ = run_to_state(steps_of_a_run, incident_id=iid, stale_at=stale_at)
    assert takeover.done, "the takeover never happened"
    assert state.is_failed() and "it stops here" in state.message and STOOD_DOWN in state.message, state.message
    cluster = runtime.cluster()
    assert cluster_state(sim, cluster) == takeover.state  # nothing changed after the takeover
    assert cluster.get_node(FAILED).annotations[ANN_FENCE] == f"incident-{iid}/{TAKEN_BY}"
    stood = [e for n in [*POOL, VICTIM_NODE] for e in cluster.node_events(n) if e["reason"] == events.STOOD_DOWN]
    assert len(stood) == 1 and stood[0]["message"].startswith(STOOD_DOWN), stood
    assert VICTIM.split("/")[1] in sim.cluster.sessions()  # the session runs on
    if stale_at in ("label", "release"):
        assert all(cluster.get_node(n).annotations[ANN_FENCE] != f"incident-{iid}/{TAKEN_BY}" for n in POOL[:2])


def test_a_run_that_keeps_its_incident_isolates_and_preempts_with_its_fence(env, monkeypatch):
    """The same steps without a takeover all go through; the suspects carry the run's fence."""
    sim, runtime = env
    iid = _incident(runtime)
    TAKEOVERS[iid] = Takeover(monkeypatch, sim, runtime, iid)
    state, out = run_to_state(steps_of_a_run, incident_id=iid, stale_at="", takeover=False)
    assert state.is_completed(), state.message
    assert out["done"] == ["label", "preempt", "quarantine", "release"]
    cluster = runtime.cluster()
    run = runtime.ledger().get_incident(iid).flow_run_id
    for n in POOL:
        node = cluster.get_node(n)
        assert node.annotations[ANN_FENCE] == f"incident-{iid}/{run}"
        assert BATCH not in node.labels and node.has_taint(QUARANTINE) == (n == FAILED)  # released: the first two
    assert out["preempted"] == [VICTIM]


@flow(name="triage-claim-only")
def triage_claims(incident_id: int, dry_run: bool = False) -> bool:
    """Triage's claim and nothing else: the new run never touches the node itself."""
    from tasks.triage import claim_incident

    return claim_incident(incident_id)


@pytest.mark.parametrize("dry_run", [False, True])
def test_triages_claim_alone_fences_the_node_against_the_run_it_took_over(env, dry_run):
    """Run A held the incident and fenced its node, then was found gone (its lease ended). Triage's claim takes the
    incident over and, before doing anything else, puts its fence on the node: A's next cordon is refused by the API
    server, whereas A's own fence on the node would have let it through unasked. A dry-run claim writes no fence."""
    from remedy.ledger.records import Fence

    sim, runtime = env
    led, cluster = runtime.ledger(), runtime.cluster()
    iid = _incident(runtime)
    assert led.claim(iid, "run-a").claimed
    led.start_lease("run-a", ttl_seconds=60)
    stale = NodeFence(iid, "run-a", confirm=lambda: led.check_fence(iid, Fence.of("run-a")))
    cluster.fence_node(FAILED, stale)
    assert led.end_lease("run-a", reason="gone: found gone by the watchdog (test)")

    state, claimed = run_to_state(triage_claims, incident_id=iid, dry_run=dry_run)
    assert state.is_completed() and claimed is True
    new_run = str(state.state_details.flow_run_id)
    assert led.get_incident(iid).flow_run_id == new_run
    fenced_by = cluster.get_node(FAILED).annotations[ANN_FENCE]
    if dry_run:
        assert fenced_by == f"incident-{iid}/run-a"
        return
    assert fenced_by == f"incident-{iid}/{new_run}"
    before = cluster.get_node(FAILED)
    with pytest.raises(FenceLost):
        cluster.cordon(FAILED, reason="stale", by="run-a", fence=stale)
    after = cluster.get_node(FAILED)
    assert not after.unschedulable and after.resource_version == before.resource_version
