"""A real GPU node pool carries the provider's taint (GKE: nvidia.com/gpu=present:NoSchedule on every GPU node).
GPU pods tolerate it (ExtendedResourceToleration admission), so a promoted spare with that taint has joined, and
gpu-remedy's node Jobs tolerate it too: a replacement works end to end (issue 18, "the five", item 1)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import run_to_state
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect


@pytest.fixture
def sim(sim_factory):
    return sim_factory(nodes=16, spares=2, gpu_taint=True)


def test_every_gpu_node_tainted_by_the_provider_still_gets_its_replacement(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime
    from remedy.sim.faults import inject

    nodes = runtime.cluster().list_gpu_nodes()
    assert nodes and all(n.taint_effect("nvidia.com/gpu") == "NoSchedule" for n in nodes)
    prevalidate_spares()
    inject(remedy_on_sim.cluster, "xid", "gpu003", gpu=3, code=79)
    state, out = run_to_state(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert state.is_completed() and out["status"] == "replaced", out
    assert out["joined"]["joined"], out["joined"]
    spare = out["replacement"]
    assert out["workload"]["on_node"] and out["workload"]["full"]  # the job's pod runs on the tainted spare
    # the provider's taint stays: gpu-remedy only removes its own
    assert runtime.cluster().get_node(spare).taint_effect("nvidia.com/gpu") == "NoSchedule"


def test_a_node_job_tolerates_the_providers_gpu_taint(remedy_on_sim):
    from remedy import runtime
    from remedy.adapters.cluster import NodeJobSpec

    manifest = runtime.cluster().render_node_job(NodeJobSpec(name="probe-gpu004", node="gpu004", check="probe",
                                                             image="gpu-remedy:test", timeout_seconds=60))
    keys = {t["key"] for t in manifest["spec"]["template"]["spec"]["tolerations"]}
    assert "nvidia.com/gpu" in keys
