"""replace-node with the training workload as production runs it: a JobSet gang (jobset.x-k8s.io/v1alpha2) instead
of a bare batch/v1 Job (settings workload.kind = JobSet), end to end on the simulator with a real Prefect server."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from tests.fixtures.prefect import run_to_state_result
from tests.fixtures.workloads import jobset
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect

JS = ("jobset.x-k8s.io", "v1alpha2", "training", "jobsets")


@pytest.fixture
def sim(sim_factory, monkeypatch):
    """16 nodes, spares gpu008 + gpu016, and the JobSet `llm-pretrain`: 14 single-pod Jobs, one per active node,
    backoffLimit 0 and failurePolicy.maxRestarts 3 (a lost pod restarts the gang, as JobSet users run it)."""
    server = sim_factory(nodes=16, spares=2, training_job=False)
    cfg = k8s.Configuration()
    cfg.host = server.url
    with k8s.ApiClient(cfg) as api:
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(*JS, jobset("llm-pretrain", 14))
        core = k8s.CoreV1Api(api)
        deadline = time.monotonic() + 10
        while sum(p.status.phase == "Running" for p in core.list_namespaced_pod("training").items) < 14:
            assert time.monotonic() < deadline, "the JobSet did not start"
            time.sleep(0.05)
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
