"""replace-node with the training workload as production runs it: a JobSet gang (jobset.x-k8s.io/v1alpha2) instead
of a bare batch/v1 Job (settings workload.kind = JobSet), end to end on the simulator with a real Prefect server."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from tests.approvals.helpers import remedy_env  # noqa: F401 - a fixture
from tests.fixtures.prefect import run_to_state_result
from tests.fixtures.workloads import jobset, pytorchjob
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect

JS = ("jobset.x-k8s.io", "v1alpha2", "training", "jobsets")
PT = ("kubeflow.org", "v1", "training", "pytorchjobs")


def start_with(sim_factory, api_path: tuple, manifest: dict, pods: int, **cluster):
    """A simulator without the batch/v1 Job, running `manifest` (created through the API) on `pods` nodes."""
    server = sim_factory(training_job=False, **cluster)
    cfg = k8s.Configuration()
    cfg.host = server.url
    with k8s.ApiClient(cfg) as api:
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(*api_path, manifest)
        core = k8s.CoreV1Api(api)
        deadline = time.monotonic() + 10
        while sum(p.status.phase == "Running" for p in core.list_namespaced_pod("training").items) < pods:
            assert time.monotonic() < deadline, f"{manifest['kind']} did not start"
            time.sleep(0.05)
    return server


@pytest.fixture
def sim(sim_factory, monkeypatch):
    """16 nodes, spares gpu008 + gpu016, and the JobSet `llm-pretrain`: 14 single-pod Jobs, one per active node,
    backoffLimit 0 and failurePolicy.maxRestarts 3 (a lost pod restarts the gang, as JobSet users run it)."""
    server = start_with(sim_factory, JS, jobset("llm-pretrain", 14), 14, nodes=16, spares=2)
    monkeypatch.setenv("REMEDY_WORKLOAD__KIND", "JobSet")
    monkeypatch.setenv("REMEDY_WORKLOAD__JOB", "llm-pretrain")
    return server


def test_replace_node_moves_the_jobset_gang_onto_the_spare(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime
    from remedy.sim.faults import inject

    cluster = runtime.cluster()
    assert cluster.workload("training", "llm-pretrain").kind.value == "JobSet"
    assert "gpu003" in cluster.workload_nodes("training", "llm-pretrain")
    prevalidate_spares()
    inject(remedy_on_sim.cluster, "xid", "gpu003", gpu=3, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert out["status"] == "replaced", out
    spare = out["replacement"]
    assert spare in ("gpu008", "gpu016")
    assert out["workload"]["on_node"] and out["workload"]["full"], out["workload"]
    nodes = cluster.workload_nodes("training", "llm-pretrain")
    assert spare in nodes and "gpu003" not in nodes and len(nodes) == 14
    assert cluster.workload_size("training", "llm-pretrain") == (14, 14)
    # the drain's eviction failed the pod's child Job (backoffLimit 0): the JobSet controller restarted the gang once
    obj = k8s.CustomObjectsApi(cluster.api).get_namespaced_custom_object(*JS, "llm-pretrain")
    assert obj["status"]["restarts"] == 1 and not obj["spec"].get("suspend")
    assert runtime.ledger().get_node("gpu003").state.value == "repair"


def adopt(runtime) -> None:
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")


NO_SPARE_SHRINK = {"SPARES__PREEMPT_WHEN_NO_SPARE": "false", "WORKLOAD__WHEN_NO_SPARE": "shrink",
                   "WORKLOAD__MIN_NODES": "12"}


def test_no_spare_shrinks_an_elastic_pytorchjob_inside_its_elastic_policy(prefect_server, sim_factory, remedy_env):
    """No spare, when_no_spare: shrink: the PyTorchJob loses one worker (Worker.replicas, inside elasticPolicy
    min/maxReplicas); the operator removes the highest-index worker and the lost one takes its node."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_with(sim_factory, PT, pytorchjob("bert", 15, elastic=(11, 15)), 16, nodes=16, spares=0)
    runtime = remedy_env(sim=server, WORKLOAD__KIND="PyTorchJob", WORKLOAD__JOB="bert", **NO_SPARE_SHRINK)
    adopt(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "shrunk" and out["job_nodes"] == 15, out
    co = k8s.CustomObjectsApi(runtime.cluster().api)
    assert co.get_namespaced_custom_object(*PT, "bert")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 14
    deadline = time.monotonic() + 10
    while runtime.cluster().workload_size("training", "bert") != (15, 15):
        assert time.monotonic() < deadline, runtime.cluster().workload_size("training", "bert")
        time.sleep(0.1)
    assert "gpu003" not in runtime.cluster().workload_nodes("training", "bert")


def test_no_spare_and_a_jobset_that_cannot_shrink_escalates_with_why(prefect_server, sim_factory, remedy_env):
    """JobSet's webhook keeps replicatedJobs immutable: the shrink is refused, nothing changes, a person decides."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_with(sim_factory, JS, jobset("llm-pretrain", 16), 16, nodes=16, spares=0)
    runtime = remedy_env(sim=server, WORKLOAD__KIND="JobSet", WORKLOAD__JOB="llm-pretrain", **NO_SPARE_SHRINK)
    adopt(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "no-spare", out
    assert "cannot shrink the job" in out["why"] and "immutable" in out["why"]
    obj = k8s.CustomObjectsApi(runtime.cluster().api).get_namespaced_custom_object(*JS, "llm-pretrain")
    assert obj["spec"]["replicatedJobs"][0]["replicas"] == 16
