"""GPU requests, pod priority, interactive sessions and Job suspend on the simulator, through the official client:
what the no-spare preemption path (flows/replace_node.py) relies on."""

from __future__ import annotations

import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from remedy.sim.cluster import Cluster, build_cluster
from remedy.sim.server import SimServer
from tests.sim.conftest import TIME_SCALE
from tests.sim.test_api_client import wait_for

SESSION_NODES = ["gpu007", "gpu015"]  # the last free node of each of the two racks (spares: gpu008, gpu016)


@pytest.fixture
def sessions_sim():
    with SimServer(build_cluster(nodes=16, spares=2, sessions=2, time_scale=TIME_SCALE)).start() as server:
        yield server


@pytest.fixture
def api(sessions_sim):
    api = client.ApiClient(client.Configuration(host=sessions_sim.url))
    yield client.CoreV1Api(api), client.BatchV1Api(api)
    api.close()


def training_pods(core):
    return core.list_namespaced_pod("training", label_selector="job-name=llm-pretrain").items


def pending_message(core):
    def one():
        pods = [p for p in training_pods(core) if not p.spec.node_name and p.status.conditions]
        return pods[0].status.conditions[0].message if pods else None
    return wait_for(one)


def make_room(core, node="gpu003"):
    """Cordon `node` and delete its training pod: the Job needs a node again."""
    core.patch_node(node, {"spec": {"unschedulable": True}})
    pod = next(p for p in training_pods(core) if p.spec.node_name == node)
    core.delete_namespaced_pod(pod.metadata.name, "training", grace_period_seconds=0)


def test_sessions_hold_their_nodes_and_the_job_runs_on_the_rest(sessions_sim, api):
    core, batch = api
    sessions = core.list_namespaced_pod("sessions").items
    assert sorted(p.spec.node_name for p in sessions) == SESSION_NODES
    s = sessions[0]
    assert (s.spec.priority_class_name, s.spec.priority, s.status.phase) == ("interactive", 10, "Running")
    assert s.metadata.owner_references is None  # bare pods: nothing recreates them
    assert s.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}
    assert batch.read_namespaced_job("llm-pretrain", "training").spec.parallelism == 12
    on = {p.spec.node_name for p in training_pods(core)}
    assert len(on) == 12 and not on & set(SESSION_NODES) and not on & {"gpu008", "gpu016"}
    t = training_pods(core)[0]
    assert (t.spec.priority_class_name, t.spec.priority, t.spec.preemption_policy) == ("gpu-training", 1000, "Never")
    assert sessions_sim.cluster.training_size() == 12 and sessions_sim.cluster.sessions() == {
        "notebook-gpu007": "gpu007", "notebook-gpu015": "gpu015"}


def test_a_session_keeps_the_training_pod_pending_with_insufficient_gpus(sessions_sim, api):
    core, _ = api
    make_room(core)
    message = pending_message(core)
    assert message.startswith("0/16 nodes are available: ")
    # 11 nodes run the job's other pods, 2 run sessions; the spares are outside the pool; gpu003 is cordoned
    assert "13 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector, " \
           "1 node(s) were unschedulable" in message
    assert "preemption: not eligible due to preemptionPolicy=Never" in message
    assert sessions_sim.cluster.training_size() == 11


def test_evicting_a_session_frees_its_gpus_and_the_job_takes_the_node(sessions_sim, api):
    core, _ = api
    make_room(core)
    pending_message(core)
    rv = core.read_node("gpu007").metadata.resource_version
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="notebook-gpu007", namespace="sessions"))
    core.create_namespaced_pod_eviction("notebook-gpu007", "sessions", body)
    # terminating pods hold their GPUs until they are gone (30 s grace, scaled to 0.3 s)
    assert core.read_namespaced_pod("notebook-gpu007", "sessions").metadata.deletion_timestamp is not None
    assert not any(p.spec.node_name == "gpu007" for p in training_pods(core))
    placed = wait_for(lambda: [p for p in training_pods(core) if p.spec.node_name == "gpu007"
                               and p.status.phase == "Running"], timeout=10)
    assert placed and core.read_node("gpu007").metadata.resource_version == rv  # freed without a Node write
    assert wait_for(lambda: sessions_sim.cluster.training_size() == 12)
    assert core.list_namespaced_pod("sessions").items[0].metadata.name == "notebook-gpu015"  # not recreated


def test_gpu_requests_are_counted_for_bare_pods_too(sessions_sim, api):
    core, _ = api
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="greedy"), spec=client.V1PodSpec(
        node_selector={"kubernetes.io/hostname": "gpu008"},
        tolerations=[client.V1Toleration(key="remedy.io/spare", operator="Exists")],
        containers=[client.V1Container(name="c", image="x", resources=client.V1ResourceRequirements(
            limits={"nvidia.com/gpu": "6"}))]))  # extended resources: the request defaults to the limit
    core.create_namespaced_pod("default", pod)
    assert wait_for(lambda: core.read_namespaced_pod("greedy", "default").spec.node_name == "gpu008")
    pod.metadata.name = "second"
    core.create_namespaced_pod("default", pod)
    second = wait_for(lambda: (core.read_namespaced_pod("second", "default").status.conditions or [None])[0])
    assert "1 Insufficient nvidia.com/gpu" in second.message and not core.read_namespaced_pod(
        "second", "default").spec.node_name
    core.delete_namespaced_pod("greedy", "default", grace_period_seconds=0)
    assert wait_for(lambda: core.read_namespaced_pod("second", "default").spec.node_name == "gpu008")


def test_priority_classes_are_served_and_resolved_on_create(sessions_sim, api):
    core, _ = api
    classes = {pc.metadata.name: pc for pc in client.SchedulingV1Api(core.api_client).list_priority_class().items}
    assert classes["gpu-training"].value == 1000 and classes["gpu-training"].preemption_policy == "Never"
    assert classes["interactive"].value == 10
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="nb"), spec=client.V1PodSpec(
        priority_class_name="interactive", containers=[client.V1Container(name="c", image="x")]))
    created = core.create_namespaced_pod("sessions", pod)
    assert created.spec.priority == 10 and created.spec.preemption_policy == "PreemptLowerPriority"
    plain = core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="plain"), spec=client.V1PodSpec(containers=[client.V1Container(
            name="c", image="x")])))
    assert plain.spec.priority == 0
    pod.metadata.name, pod.spec.priority_class_name = "nb2", "nope"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("sessions", pod)
    assert err.value.status == 403 and "no PriorityClass with name nope was found" in err.value.body


def test_suspending_a_job_deletes_its_pods_and_resuming_brings_them_back(sessions_sim, api):
    core, batch = api
    batch.patch_namespaced_job("llm-pretrain", "training", {"spec": {"suspend": True}})
    assert wait_for(lambda: not training_pods(core), timeout=10)
    job = wait_for(lambda: (lambda j: j if j.status.active == 0 else None)(
        batch.read_namespaced_job("llm-pretrain", "training")))
    conds = {c.type: (c.status, c.reason) for c in job.status.conditions}
    assert conds["Suspended"] == ("True", "JobSuspended")
    time.sleep(0.3)
    assert not training_pods(core)  # the Job controller creates none while suspended
    batch.patch_namespaced_job("llm-pretrain", "training", {"spec": {"suspend": False}})
    assert wait_for(lambda: sessions_sim.cluster.training_size() == 12, timeout=10)
    job = batch.read_namespaced_job("llm-pretrain", "training")
    assert {c.type: c.reason for c in job.status.conditions}["Suspended"] == "JobResumed"


def test_suspend_is_graceful(sessions_sim, api):
    core, batch = api
    batch.patch_namespaced_job("llm-pretrain", "training", {"spec": {"suspend": True}})
    pods = training_pods(core)
    assert pods and all(p.metadata.deletion_timestamp is not None for p in pods)  # terminating, not gone
    assert wait_for(lambda: not training_pods(core), timeout=10)


def test_save_and_load_keep_sessions_and_priorities(sessions_sim, tmp_path):
    path = sessions_sim.cluster.save(tmp_path / "sim.json")
    loaded = Cluster.load(path, time_scale=TIME_SCALE)
    assert loaded.sessions() == {"notebook-gpu007": "gpu007", "notebook-gpu015": "gpu015"}
    assert loaded.index.free_gpus(loaded.node("gpu007")) == 0
    assert {pc["metadata"]["name"] for pc in loaded.store.objects("PriorityClass")} == {"gpu-training", "interactive"}
    assert loaded.training_size() == 12


def test_sessions_out_of_range_is_a_clear_error():
    with pytest.raises(ValueError, match="sessions must be between 0 and nodes-spares"):
        build_cluster(nodes=4, spares=1, sessions=4)


def test_seed_002_shape_with_no_ready_spare():
    cluster = build_cluster(nodes=63, spares=0, sessions=3, time_scale=TIME_SCALE)
    assert cluster.training_job()["spec"]["parallelism"] == 60 and cluster.training_size() == 60
    assert len(cluster.sessions()) == 3 and len({n for n in cluster.sessions().values()}) == 3


def test_sim_state_cli_lists_the_sessions(sessions_sim, capsys):
    from tests.sim.test_cli import run

    assert run("state", "--url", sessions_sim.url) == 0
    out = capsys.readouterr().out
    assert "training job: 12/12 pods ready" in out
    assert "interactive sessions: notebook-gpu007 on gpu007, notebook-gpu015 on gpu015" in out
