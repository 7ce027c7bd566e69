"""Jobs on the simulator: binding, runs through the runner registry, logs (incl. follow), backoff, deletion."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from remedy.sim.faults import inject
from remedy.sim.runners import RUNNERS, RunResult, register_runner
from tests.sim.test_api_client import wait_for


def job_body(name, check=None, node=None, selector=None, env=None, tolerations=None, backoff=0, args=None,
             spread_over=None):
    """spread_over=N: N pods, one per node (required pod anti-affinity per host), as a group check needs."""
    labels = {"remedy.io/check": check} if check else {}
    node_selector = dict(selector or {})
    if node:
        node_selector["kubernetes.io/hostname"] = node
    container = client.V1Container(name="check", image="nvcr.io/nvidia/cuda:12.8.0-base-ubuntu22.04",
                                   args=args, env=[client.V1EnvVar(name=k, value=str(v)) for k, v in (env or {}).items()])
    affinity = None
    if spread_over:
        labels = {**labels, "group": name}
        affinity = client.V1Affinity(pod_anti_affinity=client.V1PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[client.V1PodAffinityTerm(
                label_selector=client.V1LabelSelector(match_labels={"group": name}),
                topology_key="kubernetes.io/hostname")]))
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(backoff_limit=backoff, parallelism=spread_over, completions=spread_over,
                              template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels=labels),
            spec=client.V1PodSpec(restart_policy="Never", containers=[container], node_selector=node_selector or None,
                                  tolerations=tolerations, affinity=affinity))))


def job_pods(core, name, ns="gpu-remedy"):
    return core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items


def finished(batch, name, ns="gpu-remedy"):
    def done():
        job = batch.read_namespaced_job(name, ns)
        conds = {c.type: c.status for c in job.status.conditions or []}
        return job if conds.get("Complete") == "True" or conds.get("Failed") == "True" else None
    return wait_for(done, timeout=8)


def test_job_runs_on_its_node_succeeds_and_its_log_is_readable(core, batch):
    batch.create_namespaced_job("gpu-remedy", job_body("sleepy", node="gpu003", args=["sleep", "100"]))  # 1 s
    pods = wait_for(lambda: [p for p in job_pods(core, "sleepy") if p.status.phase == "Running"])
    assert pods[0].spec.node_name == "gpu003"
    assert pods[0].metadata.owner_references[0].kind == "Job"
    job = finished(batch, "sleepy")
    assert job.status.succeeded == 1 and job.status.active == 0 and job.status.completion_time is not None
    pod = job_pods(core, "sleepy")[0]
    assert pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0
    log = core.read_namespaced_pod_log(pod.metadata.name, "gpu-remedy")
    assert log == "sleeping 100s on gpu003\ndone\n"
    assert core.read_namespaced_pod_log(pod.metadata.name, "gpu-remedy", tail_lines=1) == "done\n"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod.metadata.name, "gpu-remedy", container="nope")
    assert err.value.status == 400


def test_job_pinned_to_a_not_ready_or_tainted_node_stays_pending(sim, core, batch):
    inject(sim.cluster, "not-ready", "gpu004")
    batch.create_namespaced_job("gpu-remedy", job_body("on-dead-node", node="gpu004"))
    pod = wait_for(lambda: job_pods(core, "on-dead-node"))[0]
    time.sleep(0.3)
    pod = core.read_namespaced_pod(pod.metadata.name, "gpu-remedy")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    assert pod.status.conditions[0].reason == "Unschedulable"
    # a cordoned + quarantine-tainted node takes only pods that tolerate both
    core.patch_node("gpu005", {"spec": {"unschedulable": True,
                                        "taints": [{"key": "remedy.io/quarantine", "value": "true", "effect": "NoSchedule"}]}})
    batch.create_namespaced_job("gpu-remedy", job_body("untolerated", node="gpu005"))
    batch.create_namespaced_job("gpu-remedy", job_body("tolerated", node="gpu005", tolerations=[
        client.V1Toleration(key="remedy.io/quarantine", operator="Exists", effect="NoSchedule"),
        client.V1Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")]))
    assert finished(batch, "tolerated").status.succeeded == 1
    assert job_pods(core, "untolerated")[0].status.phase == "Pending"
    # once healed the node is Ready again and the first job runs
    inject(sim.cluster, "heal", "gpu004")
    assert finished(batch, "on-dead-node").status.succeeded == 1


def test_follow_log_streams_lines_before_the_pod_finishes(core, batch):
    # 4 steps of 50 simulated seconds = 0.5 s each at time scale 0.01
    batch.create_namespaced_job("gpu-remedy", job_body("smoke", check="smoke-test", node="gpu006",
                                                       env={"STEPS": 4, "STEP_SECONDS": 50}))
    pod = wait_for(lambda: [p for p in job_pods(core, "smoke") if p.status.phase == "Running"])[0]
    resp = core.read_namespaced_pod_log(pod.metadata.name, "gpu-remedy", follow=True, _preload_content=False)
    seen, phases = [], []
    for chunk in resp.stream(64):
        for line in chunk.decode().splitlines():
            seen.append(line)
            phases.append(core.read_namespaced_pod(pod.metadata.name, "gpu-remedy").status.phase)
    assert seen[0] == "smoke-test: 1 node(s), 4 steps"
    assert [line.split(" loss")[0] for line in seen[1:5]] == ["step 1", "step 2", "step 3", "step 4"]
    assert seen[-1] == "smoke-test: PASSED"
    assert phases[1] == "Running"  # the first step's line arrived while the pod still ran
    assert finished(batch, "smoke").status.succeeded == 1


def test_divergence_job_runs_one_pod_per_node_and_a_divergent_node_turns_loss_nan(sim, core, batch):
    for node in ("gpu009", "gpu010", "gpu011"):
        core.patch_node(node, {"metadata": {"labels": {"divergence-job-id": "abc123"}}})
    inject(sim.cluster, "divergent", "gpu010")
    batch.create_namespaced_job("gpu-remedy", job_body("bisect", check="smoke-test",
                                                       selector={"divergence-job-id": "abc123"},
                                                       env={"STEPS": 3, "STEP_SECONDS": 1}, spread_over=3))
    job = finished(batch, "bisect")
    pods = job_pods(core, "bisect")
    assert sorted(p.spec.node_name for p in pods) == ["gpu009", "gpu010", "gpu011"]
    log = core.read_namespaced_pod_log(pods[0].metadata.name, "gpu-remedy")
    assert "loss: nan" in log and "FAILED" in log
    assert job.status.conditions[-1].type == "Failed"
    # without the divergent node in the set the same job passes
    core.patch_node("gpu010", {"metadata": {"labels": {"divergence-job-id": None}}})
    batch.create_namespaced_job("gpu-remedy", job_body("bisect-2", check="smoke-test",
                                                       selector={"divergence-job-id": "abc123"},
                                                       env={"STEPS": 3, "STEP_SECONDS": 1}, spread_over=2))
    job = finished(batch, "bisect-2")
    assert job.status.succeeded == 2 and {p.spec.node_name for p in job_pods(core, "bisect-2")} == {"gpu009", "gpu011"}
    assert "nan" not in core.read_namespaced_pod_log(job_pods(core, "bisect-2")[0].metadata.name, "gpu-remedy")


def test_gpu_reset_clears_a_resettable_fault_and_fails_when_reset_does_not_help(sim, core, batch):
    inject(sim.cluster, "xid", "gpu012", gpu=2, code=119)
    batch.create_namespaced_job("gpu-remedy", job_body("reset-ok", check="gpu-reset", node="gpu012",
                                                       args=["nvidia-smi", "-r", "-i", "2"]))
    assert finished(batch, "reset-ok").status.succeeded == 1
    assert sim.cluster.health_of("gpu012").gpus[2].pending_xids == []
    inject(sim.cluster, "xid", "gpu012", gpu=2, code=119)
    inject(sim.cluster, "reset-fails", "gpu012", gpu=2)
    batch.create_namespaced_job("gpu-remedy", job_body("reset-bad", check="gpu-reset", node="gpu012",
                                                       env={"GPU_INDEX": 2}))
    job = finished(batch, "reset-bad")
    pod = job_pods(core, "reset-bad")[0]
    assert job.status.failed == 1 and pod.status.container_statuses[0].state.terminated.exit_code == 1
    assert sim.cluster.health_of("gpu012").gpus[2].pending_xids == [119]


def test_reboot_takes_the_node_down_then_back_with_faults_cleared(sim, core, batch):
    inject(sim.cluster, "xid", "gpu013", gpu=0, code=79)
    batch.create_namespaced_job("gpu-remedy", job_body("reboot", check="reboot", node="gpu013",
                                                       env={"REBOOT_SECONDS": 60}))
    finished(batch, "reboot")

    def back():
        ready = [c.status for c in core.read_node("gpu013").status.conditions if c.type == "Ready"][0]
        events = core.list_event_for_all_namespaces(field_selector="involvedObject.name=gpu013").items
        return ready == "True" and "Rebooted" in [e.reason for e in events]

    wait_for(back, timeout=5)  # down for 60 simulated seconds (0.6 s), then Ready again
    gpu = sim.cluster.health_of("gpu013").gpus[0]
    assert not gpu.fallen_off_bus and gpu.pending_xids == []
    reasons = [e.reason for e in core.list_event_for_all_namespaces(field_selector="involvedObject.name=gpu013").items]
    assert "Rebooted" in reasons and "NodeNotReady" in reasons


def test_registered_runner_decides_the_outcome_and_a_crashing_runner_fails_its_pod(core, batch):
    def custom(node, health, job, cluster):
        return RunResult(3, f"custom on {node}: {len(health.gpus)} GPUs", 10)

    def broken(node, health, job, cluster):
        raise KeyError("boom")

    register_runner("custom-test", custom)
    register_runner("broken-test", broken)
    try:
        batch.create_namespaced_job("gpu-remedy", job_body("custom", check="custom-test", node="gpu014"))
        batch.create_namespaced_job("gpu-remedy", job_body("broken", check="broken-test", node="gpu014"))
        batch.create_namespaced_job("gpu-remedy", job_body("unknown", check="no-such-check", node="gpu014"))
        finished(batch, "custom"), finished(batch, "broken"), finished(batch, "unknown")
        pod = job_pods(core, "custom")[0]
        assert pod.status.container_statuses[0].state.terminated.exit_code == 3
        assert core.read_namespaced_pod_log(pod.metadata.name, "gpu-remedy") == "custom on gpu014: 8 GPUs\n"
        broken_log = core.read_namespaced_pod_log(job_pods(core, "broken")[0].metadata.name, "gpu-remedy")
        assert "runner 'broken-test' crashed: KeyError" in broken_log
        unknown_log = core.read_namespaced_pod_log(job_pods(core, "unknown")[0].metadata.name, "gpu-remedy")
        assert "no runner registered for check 'no-such-check'" in unknown_log
    finally:
        RUNNERS.pop("custom-test", None), RUNNERS.pop("broken-test", None)


def test_backoff_limit_retries_failed_pods_then_fails_the_job(core, batch):
    batch.create_namespaced_job("gpu-remedy", job_body("retry", check="no-such-check", node="gpu015", backoff=2))
    job = finished(batch, "retry")
    assert job.status.failed == 3 and len(job_pods(core, "retry")) == 3
    assert [c.reason for c in job.status.conditions if c.type == "Failed"] == ["BackoffLimitExceeded"]


def test_deleting_a_job_background_deletes_pods_orphan_keeps_them(core, batch):
    for name in ("bg", "orphan"):
        batch.create_namespaced_job("gpu-remedy", job_body(name, node="gpu003", args=["sleep", "1000"]))
        wait_for(lambda name=name: [p for p in job_pods(core, name) if p.status.phase == "Running"])
    batch.delete_namespaced_job("bg", "gpu-remedy", propagation_policy="Background", grace_period_seconds=0)
    assert job_pods(core, "bg") == []
    gone = batch.delete_namespaced_job("orphan", "gpu-remedy")  # the Job, held by the orphan finalizer (as real)
    assert gone["kind"] == "Job" and "orphan" in gone["metadata"]["finalizers"]
    left = job_pods(core, "orphan")
    assert len(left) == 1 and not left[0].metadata.owner_references
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("orphan", "gpu-remedy")
    assert err.value.status == 404


def test_bad_job_is_a_422_naming_the_field(batch):
    body = job_body("bad", node="gpu003")
    body.spec.template.spec.restart_policy = "Always"
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job("gpu-remedy", body)
    status = json.loads(err.value.body)
    assert err.value.status == 422 and status["details"]["causes"][0]["field"] == "spec.template.spec.restartPolicy"


def test_resizing_the_training_job_removes_then_recreates_pods(core, batch):
    batch.patch_namespaced_job("llm-pretrain", "training", {"spec": {"parallelism": 12}})
    wait_for(lambda: len([p for p in core.list_namespaced_pod("training").items]) == 12)
    # the Job's status follows its pods a moment later (as a real Job controller's does): seen once at load 10
    job = wait_for(lambda: (j := batch.read_namespaced_job("llm-pretrain", "training")).status.ready == 12 and j)
    assert (job.status.active, job.status.ready) == (12, 12)
    assert len(core.list_namespaced_pod("training").items) == 12
    batch.patch_namespaced_job("llm-pretrain", "training", {"spec": {"parallelism": 14}})
    job = wait_for(lambda: (j := batch.read_namespaced_job("llm-pretrain", "training")).status.ready == 14 and j)
    nodes = [p.spec.node_name for p in core.list_namespaced_pod("training").items]
    assert len(nodes) == 14 and len(set(nodes)) == 14


def test_incremental_job_counts_match_a_recount_after_churn(sim, core, batch):
    from remedy.sim.controller import finished as pod_finished
    from remedy.sim.controller import pod_ready, terminating

    cluster = sim.cluster
    inject(cluster, "not-ready", "gpu001")
    core.patch_node("gpu002", {"spec": {"unschedulable": True}})
    for node in ("gpu002", "gpu003"):
        for p in core.list_namespaced_pod("training", field_selector=f"spec.nodeName={node}").items:
            core.delete_namespaced_pod(p.metadata.name, "training")
    batch.create_namespaced_job("gpu-remedy", job_body("churn", node="gpu004", args=["sleep", "5"], backoff=1))
    finished(batch, "churn")
    inject(cluster, "heal", "gpu001")
    core.patch_node("gpu016", {"metadata": {"labels": {"remedy.io/pool": "active"}}, "spec": {"taints": None}})
    cluster.settle(timeout=0.5, until=lambda: False)  # let every pending timer fire
    with cluster.lock:
        for job in cluster.store.objects("Job"):
            pods = cluster.index.owned(job["metadata"]["uid"])
            stats = cluster.index.stats(job["metadata"]["uid"])
            live = [p for p in pods if not terminating(p) and not pod_finished(p)]
            assert stats.live == len(live)
            assert stats.ready == sum(1 for p in live if p["status"].get("phase") == "Running" and pod_ready(p))
            assert stats.terminating == sum(1 for p in pods if terminating(p) and not pod_finished(p))
            assert stats.succeeded == sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
            assert set(stats.nodes) == {p["spec"]["nodeName"] for p in pods
                                        if p["spec"].get("nodeName") and not pod_finished(p)}
            status = job["status"]
            assert (status["active"], status["ready"]) == (stats.live, stats.ready)
    assert batch.read_namespaced_job("llm-pretrain", "training").status.ready == 14  # gpu016 took over gpu002's share
