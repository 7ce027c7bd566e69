"""replace-node end to end on a real Kubernetes v1.36.2 control plane (the real lane: tests/fixtures/real_k8s.py;
skips where the binaries are absent). The same flow, settings and assertions as the simulator's
test_xid79_replaced_and_job_back_to_full_size: the real Job controller recreates the evicted pod, the real
eviction API honours the training Job's podFailurePolicy, and the node ends quarantined in the repair pool."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import run_to_state_result
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect


@pytest.fixture
def remedy_on_real(real_cluster, tmp_path, monkeypatch):
    from remedy import runtime

    monkeypatch.setenv("REMEDY_CLUSTER__MODE", "simulator")  # plain HTTP to the loopback proxy, token added there
    monkeypatch.setenv("REMEDY_CLUSTER__SIMULATOR_URL", real_cluster.url)
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.setenv("REMEDY_DRAIN__GRACE_PERIOD_SECONDS", "30")
    runtime.reset()
    yield real_cluster
    runtime.reset()


def test_xid79_replaced_on_a_real_control_plane(prefect_server, remedy_on_real):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert out["status"] == "replaced", out
    spare = out["replacement"]
    assert spare in ("gpu008", "gpu016")
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    node = runtime.cluster().get_node("gpu003")
    assert node.unschedulable and node.has_taint("remedy.io/quarantine")
    assert node.labels["remedy.io/pool"] == "repair"
    assert runtime.cluster().get_node(spare).labels["remedy.io/pool"] == "active"
    # the real Job controller made the replacement pod, and the stand-in kubelet runs it on the promoted spare
    pods = remedy_on_real.api.call("GET", "/api/v1/namespaces/training/pods")[1]["items"]
    assert len(pods) == 14 and all(p["status"].get("phase") == "Running" for p in pods)
    assert not [p for p in pods if p["spec"].get("nodeName") == "gpu003"]
    assert any(p["spec"].get("nodeName") == spare for p in pods)
    events = [e["reason"] for e in runtime.cluster().node_events("gpu003")]
    assert "RemedyCordon" in events and "RemedyDrain" in events
