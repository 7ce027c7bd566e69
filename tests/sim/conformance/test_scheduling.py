"""Conformance: where the scheduler puts a pod — what gpu-remedy's check Jobs rely on to land on the nodes they
check, one pod per node.

Sources: Kubernetes v1.36.2 pkg/scheduler/framework/plugins (nodeaffinity/node_affinity.go,
interpodaffinity/filtering.go), k8s.io/component-helpers/scheduling/corev1/nodeaffinity. The real lane has no
kube-scheduler (its stand-in kubelet binds first fit), so these run on the simulator only."""

from __future__ import annotations

import pytest

from tests.sim.conformance.wire import raw, strict, wait_for

JOBS = "/apis/batch/v1/namespaces/gpu-remedy/jobs"
pytestmark = pytest.mark.simulator_only("the real lane has no kube-scheduler: its stand-in kubelet binds first fit")


def spread_job(name: str, hosts: list[str], pods: int, anti: bool = True) -> dict:
    spec: dict = {
        "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox", "env": [{"name": "SECONDS", "value": "1000"}]}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}]}}}}
    if anti:
        spec["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": name}},
             "topologyKey": "kubernetes.io/hostname"}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": {"metadata": {"labels": {"remedy.io/check": "sleep"}}, "spec": spec}}}


def pods_of(sim, api_client, name: str):
    body = raw(sim, "GET", f"/api/v1/namespaces/gpu-remedy/pods?labelSelector=job-name%3D{name}")[2]
    return strict(api_client, "V1PodList", body).items


def test_required_node_affinity_and_pod_anti_affinity_spread_a_job_one_pod_per_node(sim, api_client):
    """nodeaffinity: the required terms are ORed, a term's expressions ANDed (`In` on kubernetes.io/hostname pins
    the node set); interpodaffinity filtering: a node whose topology domain (the host) already runs a pod matching
    a required anti-affinity term is filtered out. Unplaceable pods stay Pending with kube-scheduler's words
    (ErrReasonPod, ErrReasonAntiAffinityRulesNotMatch)."""
    hosts = ["gpu003", "gpu004", "gpu005"]
    assert raw(sim, "POST", JOBS, spread_job("spread", hosts, 4))[0] == 201
    def placed():
        pods = pods_of(sim, api_client, "spread")
        return len(pods) == 4 and sum(p.status.phase == "Running" for p in pods) == 3 and pods

    pods = wait_for(placed)
    assert sorted(p.spec.node_name for p in pods if p.status.phase == "Running") == hosts
    (pending,) = [p for p in pods if p.status.phase == "Pending"]
    message = pending.status.conditions[0].message
    assert "13 node(s) didn't match Pod's node affinity/selector" in message
    assert "3 node(s) didn't match pod anti-affinity rules" in message


def test_without_anti_affinity_nothing_keeps_a_jobs_pods_apart(sim, api_client):
    """The scheduler spreads nothing by itself across a label-selected set: the pods go wherever they fit (here
    the first node of the set, which has room for all). A group check without anti-affinity is not a multi-node
    check on a real cluster — which the simulator used to hide by pinning a pod to every matching node."""
    raw(sim, "POST", JOBS, spread_job("stacked", ["gpu006", "gpu007"], 2, anti=False))
    pods = wait_for(lambda: (p := [x for x in pods_of(sim, api_client, "stacked") if x.status.phase == "Running"])
                    and len(p) == 2 and p)
    assert {p.spec.node_name for p in pods} == {"gpu006"}
