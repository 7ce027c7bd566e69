"""gpu_workloads and preempt_workload: the Kubernetes adapter over HTTP against the simulator with sessions."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.errors import RemedyError
from tests.fixtures.sim import settings_for


@pytest.fixture
def sim(sim_factory):
    """16 nodes, spares gpu008 + gpu016, sessions on gpu007 and gpu015, the training job on the other 12."""
    return sim_factory(nodes=16, spares=2, sessions=2)


@pytest.fixture
def cluster(sim):
    with KubernetesCluster(settings_for(sim, drain={"eviction_deadline_seconds": 1.0,
                                                    "pdb_backoff_seconds": 0.2})) as c:
        yield c


def low_priority_job(cluster, name="finetune", node="gpu003"):
    """A Job in the sessions namespace (priority 10) on a node taken out of the training pool for it."""
    k8s.CoreV1Api(cluster.api).patch_node(node, {"metadata": {"labels": {"remedy.io/pool": "batch"}}})
    cluster.drain(node, grace_period_seconds=0, deadline_seconds=5)  # the training pod has nowhere to go
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "sessions"},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never", "priorityClassName": "interactive",
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "c", "image": "x", "args": ["sleep", "100000"],
                                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}
    cluster.batch.create_namespaced_job("sessions", body)


def wait(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    raise AssertionError("condition not met")


def test_gpu_workloads_grouped_by_controller_with_priority_and_start(cluster):
    by_name = {w.name: w for w in cluster.gpu_workloads()}
    assert set(by_name) == {"training/llm-pretrain", "sessions/notebook-gpu007", "sessions/notebook-gpu015"}
    train = by_name["training/llm-pretrain"]
    assert train.priority == 1000 and len(train.nodes) == 12 and train.started_at is not None
    assert not set(train.nodes) & {"gpu007", "gpu015", "gpu008", "gpu016"}
    nb = by_name["sessions/notebook-gpu007"]
    assert (nb.nodes, nb.priority) == (("gpu007",), 10) and nb.started_at.tzinfo is not None


def test_a_job_is_one_workload_and_system_pods_are_not_listed(cluster, sim):
    low_priority_job(cluster)
    wait(lambda: "sessions/finetune" in {w.name for w in cluster.gpu_workloads()})
    w = next(w for w in cluster.gpu_workloads() if w.name == "sessions/finetune")
    assert (w.nodes, w.priority) == (("gpu003",), 10)
    names = {w.name for w in cluster.gpu_workloads()}
    assert not any(n.startswith("kube-system/") for n in names)


def test_preempting_a_session_evicts_it_and_records_an_event(cluster, sim):
    out = cluster.preempt_workload("sessions/notebook-gpu007", grace_period_seconds=30, reason="incident 7: gpu003")
    assert out["how"] == "evict" and out["changed"] and out["freed"] == ["gpu007"] and not out["not_evicted"]
    assert out["pods"] == ["sessions/notebook-gpu007"] and out["priority"] == 10
    events = [e for e in cluster.node_events("gpu007") if e["reason"] == "RemedyPreempt"]
    assert len(events) == 1 and "sessions/notebook-gpu007 (priority 10)" in events[0]["message"]
    assert "incident 7: gpu003" in events[0]["message"]
    wait(lambda: "notebook-gpu007" not in sim.cluster.sessions())
    again = cluster.preempt_workload("sessions/notebook-gpu007", grace_period_seconds=30, reason="again")
    assert not again["changed"] and "already stopped" in again["detail"]
    assert len([e for e in cluster.node_events("gpu007") if e["reason"] == "RemedyPreempt"]) == 1


def test_preempting_a_job_suspends_it(cluster, sim):
    low_priority_job(cluster)
    wait(lambda: "sessions/finetune" in {w.name for w in cluster.gpu_workloads()})
    out = cluster.preempt_workload("sessions/finetune", grace_period_seconds=30, reason="gang job needs gpu003")
    assert out["how"] == "suspend" and out["kind"] == "Job" and out["freed"] == ["gpu003"]
    job = cluster.batch.read_namespaced_job("finetune", "sessions")
    assert job.spec.suspend is True  # kept, to be resumed by its owner
    wait(lambda: not cluster.pods_on_node("gpu003") or all(
        p["metadata"]["namespace"] == "kube-system" for p in cluster.pods_on_node("gpu003")))
    assert "sessions/finetune" not in {w.name for w in cluster.gpu_workloads()}


def test_a_pdb_blocking_the_eviction_is_reported_not_retried_forever(cluster, sim):
    k8s.PolicyV1Api(cluster.api).create_namespaced_pod_disruption_budget("sessions", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-notebooks", "namespace": "sessions"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "interactive-session"}}},
    })
    t = time.monotonic()
    out = cluster.preempt_workload("sessions/notebook-gpu015", grace_period_seconds=30, reason="t")
    assert time.monotonic() - t < 5  # the drain deadline (1 s here), not forever
    assert out["freed"] == [] and out["blocked_retries"] >= 1
    assert "disruption budget" in out["not_evicted"]["sessions/notebook-gpu015"]
    assert "notebook-gpu015" in sim.cluster.sessions()
    assert not [e for e in cluster.node_events("gpu015") if e["reason"] == "RemedyPreempt"]


def test_dry_run_changes_nothing(sim):
    with KubernetesCluster(settings_for(sim), dry_run=True) as dry:
        out = dry.preempt_workload("sessions/notebook-gpu007", grace_period_seconds=30, reason="t")
        assert out["dry_run"] and out["how"] == "evict" and "would evict" in out["detail"]
        assert dry.node_events("gpu007") == []
    assert sim.cluster.sessions() == {"notebook-gpu007": "gpu007", "notebook-gpu015": "gpu015"}


def test_a_bad_workload_name_is_a_clear_error(cluster):
    with pytest.raises(RemedyError, match="namespace/name"):
        cluster.preempt_workload("notebook-gpu007", grace_period_seconds=30, reason="t")
