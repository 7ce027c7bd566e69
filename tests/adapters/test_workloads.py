"""The TrainingWorkload port (remedy.adapters.workloads) per kind, over HTTP against the simulator, with the official
client's CustomObjectsApi as the independent observer.

Semantics under test, as each controller defines them:
- batch/v1 Job: spec.suspend / spec.parallelism (kubernetes pkg/controller/job/job_controller.go).
- JobSet jobset.x-k8s.io/v1alpha2: spec.suspend passed to the child Jobs; replicatedJobs immutable
  (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go ValidateUpdate) unless elastic (keps/463-ElasticJobsets);
  a failed child Job restarts the whole set, counted in status.restarts against failurePolicy.maxRestarts
  (api/jobset/v1alpha2/jobset_types.go).
- PyTorchJob kubeflow.org/v1: runPolicy.suspend; Worker replicas are the scale subresource's spec path, inside
  elasticPolicy min/maxReplicas (kubeflow/training-operator pkg/apis/kubeflow.org/v1/pytorch_types.go,
  common_types.go).
- Kueue: a queue-labelled workload is suspended through its Workload's spec.active; Kueue's reconciler undoes a
  plain spec.suspend on an admitted job (kubernetes-sigs/kueue pkg/controller/jobframework/reconciler.go,
  apis/kueue/v1beta1/workload_types.go).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from kubernetes import client as k8s

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.adapters.workloads import WorkloadRefused
from remedy.config import WorkloadKind
from tests.fixtures.sim import settings_for
from tests.fixtures.workloads import jobset, pytorchjob

JS = ("jobset.x-k8s.io", "v1alpha2", "training", "jobsets")
PT = ("kubeflow.org", "v1", "training", "pytorchjobs")
WL = ("kueue.x-k8s.io", "v1beta1", "training", "workloads")
MERGE = "application/merge-patch+json"


def wait(fn, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout} s")


@pytest.fixture
def sim(sim_factory):
    """10 nodes, 2 spares, no batch/v1 training Job: 8 active nodes for the workload under test."""
    return sim_factory(nodes=10, spares=2, training_job=False)


def adapter(sim, kind: WorkloadKind, name: str, **workload) -> KubernetesCluster:
    return KubernetesCluster(settings_for(sim, workload={"kind": kind.value, "job": name, **workload}))


@pytest.fixture
def api(sim):
    cfg = k8s.Configuration()
    cfg.host = sim.url
    with k8s.ApiClient(cfg) as client:
        yield client


def pods(api, selector: str) -> dict[str, str]:
    """Live pods (not terminating) -> node ("" while Pending)."""
    return {p.metadata.name: p.spec.node_name or "" for p in k8s.CoreV1Api(api).list_namespaced_pod(
        "training", label_selector=selector).items if not p.metadata.deletion_timestamp}


def running(api, selector: str) -> int:
    return sum(1 for p in k8s.CoreV1Api(api).list_namespaced_pod("training", label_selector=selector).items
               if p.status.phase == "Running" and not p.metadata.deletion_timestamp)


# ---------------------------------------------------------------- API shape
def test_the_crds_are_discoverable_and_served_as_custom_resources(sim, api):
    groups = {g.name: g.preferred_version.version for g in k8s.ApisApi(api).get_api_versions().groups}
    assert groups["jobset.x-k8s.io"] == "v1alpha2" and groups["kubeflow.org"] == "v1"
    assert groups["kueue.x-k8s.io"] == "v1beta1"
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 2))
    listed = co.list_namespaced_custom_object(*JS)
    assert listed["kind"] == "JobSetList" and [o["metadata"]["name"] for o in listed["items"]] == ["train"]
    with pytest.raises(k8s.ApiException) as missing:
        co.get_namespaced_custom_object(*JS, "nope")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == 'jobsets.jobset.x-k8s.io "nope" not found'
    # custom resources take no strategic merge patch (apiextensions-apiserver): 415
    with pytest.raises(k8s.ApiException) as smp:
        co.patch_namespaced_custom_object(*JS, "train", {"spec": {"suspend": True}},
                                          _content_type="application/strategic-merge-patch+json")
    assert smp.value.status == 415


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_sees_and_patches_the_crds_as_on_a_real_server(sim, api):
    """kubectl (client-go) as an independent client: discovery finds the kinds, a merge patch suspends, and the
    strategic merge patch kubectl sends by default is refused for a custom resource."""
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(*JS, jobset("train", 2))
    base = ["kubectl", "--kubeconfig=/dev/null", f"--server={sim.url}", "-n", "training"]

    def run(*args):
        return subprocess.run(base + list(args), capture_output=True, text=True, timeout=60)

    assert run("get", "jobsets", "-o", "name").stdout.split() == ["jobset.jobset.x-k8s.io/train"]
    assert run("patch", "jobset", "train", "--type=merge", "-p", '{"spec":{"suspend":true}}').returncode == 0
    assert k8s.CustomObjectsApi(api).get_namespaced_custom_object(*JS, "train")["spec"]["suspend"] is True
    refused = run("patch", "jobset", "train", "-p", '{"spec":{"suspend":false}}')
    assert refused.returncode != 0 and "strategic-merge-patch" in refused.stderr


# ---------------------------------------------------------------- batch/v1 Job
def test_batch_job_suspend_resize_restart(sim_factory):
    sim = sim_factory(nodes=10, spares=2)  # the simulator's own training Job, 8 pods
    with KubernetesCluster(settings_for(sim)) as c:
        work = c.workload("training", "llm-pretrain")
        assert work.kind is WorkloadKind.JOB
        assert (work.state().ready, work.state().desired) == (8, 8)
        node = c.workload_nodes("training", "llm-pretrain")[0]
        done = work.restart(node)
        assert done.changed and len(done.pods) == 1
        wait(lambda: c.workload_running_on("training", "llm-pretrain", node)
             and done.pods[0] not in {p["metadata"]["name"] for p in work.pods()}, what="pod replaced")
        assert c.resize_workload("training", "llm-pretrain", 7)["changed"]
        wait(lambda: work.state().desired == 7 and len(work.pods()) == 7, what="shrunk to 7")
        assert work.suspend().via == "spec.suspend" and not work.suspend().changed  # idempotent
        wait(lambda: not [p for p in work.pods() if not p["metadata"].get("deletionTimestamp")], what="pods gone")
        assert work.state().suspended
        work.resume()
        wait(lambda: work.state().ready == 7, what="resumed")


# ---------------------------------------------------------------- JobSet
def test_jobset_suspend_and_resume_through_spec_suspend(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 6))
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        work = c.workload("training", "train")
        wait(lambda: work.state().ready == 6, what="6 pods ready")
        assert work.state().desired == 6 and c.workload_size("training", "train") == (6, 6)
        assert sorted(c.workload_nodes("training", "train")) == sorted(pods(api, work.pod_selector()).values())
        change = work.suspend()
        assert change.changed and change.via == "spec.suspend"
        obj = co.get_namespaced_custom_object(*JS, "train")
        assert obj["spec"]["suspend"] is True
        wait(lambda: not pods(api, work.pod_selector()), what="pods deleted")
        children = k8s.BatchV1Api(api).list_namespaced_job("training",
                                                           label_selector="jobset.sigs.k8s.io/jobset-name=train")
        assert len(children.items) == 6 and all(j.spec.suspend for j in children.items)
        obj = co.get_namespaced_custom_object(*JS, "train")
        assert any(c_["type"] == "Suspended" and c_["status"] == "True" for c_ in obj["status"]["conditions"])
        assert not work.suspend().changed
        assert work.resume().changed
        wait(lambda: work.state().ready == 6, what="back at 6")


def test_jobset_resize_is_refused_by_its_webhook_and_nothing_changes(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 6))
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        with pytest.raises(WorkloadRefused, match="immutable"):
            c.workload("training", "train").resize(5)
        out = c.resize_workload("training", "train", 5)
        assert out["changed"] is False and "KEP-463" in out["refused"]
    assert co.get_namespaced_custom_object(*JS, "train")["spec"]["replicatedJobs"][0]["replicas"] == 6


def test_elastic_jobset_resize_drops_the_highest_job_index(sim, api):
    sim.cluster.jobset_elastic = True  # a controller with elastic JobSets (KEP-463)
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 6))
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        work = c.workload("training", "train")
        wait(lambda: work.state().ready == 6)
        change = work.resize(5)
        assert change.changed and change.via == "spec.replicatedJobs[workers].replicas"
        wait(lambda: len(pods(api, work.pod_selector())) == 5, what="5 pods")
        jobs = {j.metadata.name for j in k8s.BatchV1Api(api).list_namespaced_job("training").items}
        assert jobs == {f"train-workers-{i}" for i in range(5)}
        assert work.state().desired == 5 and not work.resize(5).changed


def test_jobset_restart_recreates_the_gang_and_counts_against_max_restarts(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 6, max_restarts=1))
    batch = k8s.BatchV1Api(api)
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        work = c.workload("training", "train")
        wait(lambda: work.state().ready == 6)
        before = {j.metadata.uid for j in batch.list_namespaced_job("training").items}
        node = c.workload_nodes("training", "train")[0]
        change = work.restart(node)
        assert change.changed and "recreates every child Job" in change.detail
        wait(lambda: co.get_namespaced_custom_object(*JS, "train")["status"]["restarts"] == 1, what="one restart")
        wait(lambda: work.state().ready == 6, what="gang back")
        after = batch.list_namespaced_job("training").items
        assert len(after) == 6 and not {j.metadata.uid for j in after} & before  # every child Job is new
        assert {j.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] for j in after} == {"1"}
        state = work.state()
        assert (state.restarts, state.restart_limit) == (1, 1)
        # no restart left: a pod restart would fail the whole JobSet, so it is refused and nothing is deleted
        with pytest.raises(WorkloadRefused, match="no JobSet restart left"):
            work.restart(node)
        # the in-place RESTART_APP fix (restart_pods in the workload's namespace) goes through the same port
        with pytest.raises(WorkloadRefused, match="no JobSet restart left"):
            c.restart_pods(node, "training")
        assert work.state().ready == 6


def test_jobset_whose_jobs_ignore_disruptions_restarts_one_pod_not_the_gang(sim, api):
    """With a podFailurePolicy ignoring DisruptionTarget in the Job template (docs/operations.md), the evicted pod
    does not fail its child Job: it alone is replaced, no JobSet restart is spent, so none left is no refusal."""
    co = k8s.CustomObjectsApi(api)
    manifest = jobset("train", 4, max_restarts=0)
    job_spec = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    job_spec["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    co.create_namespaced_custom_object(*JS, manifest)
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        work = c.workload("training", "train")
        wait(lambda: work.state().ready == 4)
        assert work.state().ignores_disruptions
        uids = {j.metadata.uid for j in k8s.BatchV1Api(api).list_namespaced_job("training").items}
        node = c.workload_nodes("training", "train")[0]
        change = work.restart(node)
        assert change.changed and len(change.pods) == 1
        wait(lambda: work.state().ready == 4 and change.pods[0] not in pods(api, work.pod_selector()),
             what="the one pod replaced")
        assert {j.metadata.uid for j in k8s.BatchV1Api(api).list_namespaced_job("training").items} == uids
        assert co.get_namespaced_custom_object(*JS, "train")["status"]["restarts"] == 0


def test_jobset_that_runs_out_of_restarts_fails(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 3, max_restarts=0))
    core = k8s.CoreV1Api(api)
    wait(lambda: running(api, "jobset.sigs.k8s.io/jobset-name=train") == 3)
    name = next(iter(pods(api, "jobset.sigs.k8s.io/jobset-name=train")))
    core.delete_namespaced_pod(name, "training")  # outside gpu-remedy: counts as a failure of its child Job
    wait(lambda: co.get_namespaced_custom_object(*JS, "train")["status"].get("terminalState") == "Failed",
         what="JobSet failed")


# ---------------------------------------------------------------- PyTorchJob
def test_pytorchjob_suspend_and_resume_through_run_policy(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*PT, pytorchjob("bert", 4))
    with adapter(sim, WorkloadKind.PYTORCHJOB, "bert") as c:
        work = c.workload("training", "bert")
        wait(lambda: work.state().ready == 5, what="master + 4 workers")
        assert sorted(pods(api, work.pod_selector())) == ["bert-master-0"] + [f"bert-worker-{i}" for i in range(4)]
        change = work.suspend()
        assert change.changed and change.via == "spec.runPolicy.suspend"
        wait(lambda: not pods(api, work.pod_selector()), what="pods deleted")
        obj = co.get_namespaced_custom_object(*PT, "bert")
        assert obj["spec"]["runPolicy"]["suspend"] is True and obj["spec"]["runPolicy"]["backoffLimit"] == 3
        assert any(x["type"] == "Suspended" and x["status"] == "True" for x in obj["status"]["conditions"])
        assert work.state().suspended and not work.suspend().changed
        work.resume()
        wait(lambda: work.state().ready == 5, what="resumed")


def test_elastic_pytorchjob_resizes_workers_inside_min_max(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*PT, pytorchjob("bert", 5, elastic=(3, 5)))
    with adapter(sim, WorkloadKind.PYTORCHJOB, "bert") as c:
        work = c.workload("training", "bert")
        wait(lambda: work.state().ready == 6)
        assert work.state().elastic == (4, 6)  # the master plus minReplicas..maxReplicas workers
        change = work.resize(5)
        assert change.changed and change.via == "spec.pytorchReplicaSpecs.Worker.replicas"
        assert co.get_namespaced_custom_object(*PT, "bert")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
        wait(lambda: sorted(pods(api, work.pod_selector())) == ["bert-master-0"] +
             [f"bert-worker-{i}" for i in range(4)], what="worker-4 gone")
        with pytest.raises(WorkloadRefused, match="outside its elasticPolicy range 4..6"):
            work.resize(3)
        out = c.resize_workload("training", "bert", 3)
        assert out["changed"] is False and "elasticPolicy" in out["refused"]
        assert co.get_namespaced_custom_object(*PT, "bert")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4


def test_pytorchjob_without_elastic_policy_cannot_be_resized(sim, api):
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(*PT, pytorchjob("bert", 3))
    with adapter(sim, WorkloadKind.PYTORCHJOB, "bert") as c:
        with pytest.raises(WorkloadRefused, match="no elasticPolicy"):
            c.workload("training", "bert").resize(3)


def test_pytorchjob_restart_recreates_the_pod_under_its_name(sim, api):
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(*PT, pytorchjob("bert", 2))
    with adapter(sim, WorkloadKind.PYTORCHJOB, "bert") as c:
        work = c.workload("training", "bert")
        wait(lambda: work.state().ready == 3)
        node = pods(api, work.pod_selector())["bert-worker-1"]
        uid = k8s.CoreV1Api(api).read_namespaced_pod("bert-worker-1", "training").metadata.uid
        assert work.restart(node).pods == ("bert-worker-1",)
        wait(lambda: k8s.CoreV1Api(api).read_namespaced_pod("bert-worker-1", "training").metadata.uid != uid
             and work.state().ready == 3, what="worker-1 recreated")


# ---------------------------------------------------------------- Kueue
def test_kueue_managed_jobset_is_suspended_through_its_workload_not_fought(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 4, queue="team-a"))
    wait(lambda: running(api, "jobset.sigs.k8s.io/jobset-name=train") == 4, what="admitted and running")
    [wl] = co.list_namespaced_custom_object(*WL)["items"]
    assert wl["metadata"]["name"].startswith("jobset-train-") and wl["spec"]["active"] is True
    # flipping spec.suspend fights Kueue: it unsuspends an admitted job at once
    co.patch_namespaced_custom_object(*JS, "train", {"spec": {"suspend": True}}, _content_type=MERGE)
    time.sleep(0.3)
    assert co.get_namespaced_custom_object(*JS, "train")["spec"]["suspend"] is False
    with adapter(sim, WorkloadKind.JOBSET, "train") as c:
        work = c.workload("training", "train")
        assert work.state().kueue_queue == "team-a"
        change = work.suspend()
        assert change.changed and change.via == f"Kueue Workload {wl['metadata']['name']} spec.active"
        wait(lambda: not pods(api, work.pod_selector()), what="pods deleted")
        time.sleep(0.3)  # and it stays suspended: Kueue evicted it
        assert co.get_namespaced_custom_object(*JS, "train")["spec"]["suspend"] is True
        wl = co.get_namespaced_custom_object(*WL, wl["metadata"]["name"])
        assert wl["spec"]["active"] is False
        assert any(x["type"] == "Evicted" and x["reason"] == "Deactivated" for x in wl["status"]["conditions"])
        assert not work.suspend().changed
        assert work.resume().changed
        wait(lambda: work.state().ready == 4, what="re-admitted")


def test_kueue_managed_pytorchjob_and_batch_job_go_through_kueue_too(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*PT, pytorchjob("bert", 1, queue="team-a"))
    k8s.BatchV1Api(api).create_namespaced_job("training", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "eval", "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
                     "annotations": {"remedy.io/sim-workload": "training"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            **jobset("x", 1)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]}}}})
    wait(lambda: running(api, "training.kubeflow.org/job-name=bert") == 2 and running(api, "job-name=eval") == 1)
    with adapter(sim, WorkloadKind.PYTORCHJOB, "bert") as c:
        assert c.workload("training", "bert").suspend().via.startswith("Kueue Workload pytorchjob-bert-")
        assert c.workload("training", "eval", WorkloadKind.JOB).suspend().via.startswith("Kueue Workload job-eval-")
    wait(lambda: running(api, "training.kubeflow.org/job-name=bert") == 0 and running(api, "job-name=eval") == 0)
    assert co.get_namespaced_custom_object(*PT, "bert")["spec"]["runPolicy"]["suspend"] is True


# ---------------------------------------------------------------- preemption sees the workload, not its child Jobs
def test_a_jobset_is_one_preemptable_workload_suspended_as_a_whole(sim, api):
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("finetune", 3))
    wait(lambda: running(api, "jobset.sigs.k8s.io/jobset-name=finetune") == 3)
    with adapter(sim, WorkloadKind.JOB, "llm-pretrain") as c:
        by_name = {w.name: w for w in c.gpu_workloads()}
        assert list(by_name) == ["training/finetune"] and len(by_name["training/finetune"].nodes) == 3
        out = c.preempt_workload("training/finetune", grace_period_seconds=0, reason="test")
        assert (out["how"], out["kind"], out["via"]) == ("suspend", "JobSet", "spec.suspend")
    assert co.get_namespaced_custom_object(*JS, "finetune")["spec"]["suspend"] is True
    wait(lambda: running(api, "jobset.sigs.k8s.io/jobset-name=finetune") == 0, what="JobSet pods gone")


# ---------------------------------------------------------------- the fleet dashboard's restart budget
def test_the_dashboard_counts_a_jobsets_gang_restarts_against_max_restarts(api, remedy_on_sim, monkeypatch):
    from remedy import runtime
    from tasks.dashboard import read_job_failures

    monkeypatch.setenv("REMEDY_WORKLOAD__KIND", "JobSet")
    monkeypatch.setenv("REMEDY_WORKLOAD__JOB", "train")
    runtime.reset()
    co = k8s.CustomObjectsApi(api)
    co.create_namespaced_custom_object(*JS, jobset("train", 4, max_restarts=2))
    work = runtime.cluster().workload("training", "train")
    wait(lambda: work.state().ready == 4)
    assert "0 gang restart(s) of failurePolicy.maxRestarts 2: 2 more" in read_job_failures.fn().warning
    work.restart(runtime.cluster().workload_nodes("training", "train")[0])
    wait(lambda: co.get_namespaced_custom_object(*JS, "train")["status"]["restarts"] == 1)
    job = read_job_failures.fn()
    assert (job.failed, job.limit, job.limit_name) == (1, 2, "failurePolicy.maxRestarts")
    assert "1 more drain(s) or restart(s) fail the whole JobSet" in job.warning


@pytest.mark.parametrize("kind", [WorkloadKind.JOBSET, WorkloadKind.PYTORCHJOB])
def test_the_simulator_can_run_the_training_workload_as_a_crd(sim_factory, kind):
    """`remedy sim serve --workload JobSet|PyTorchJob`: training/llm-pretrain as that kind, one pod per active node."""
    server = sim_factory(nodes=10, spares=2, workload=kind.value)
    with adapter(server, kind, "llm-pretrain") as c:
        work = c.workload("training", "llm-pretrain")
        wait(lambda: work.state().ready == 8, what="8 pods ready")
        assert work.state().desired == 8 and len(c.workload_nodes("training", "llm-pretrain")) == 8
        assert not c.batch.list_namespaced_job("training").items or kind is WorkloadKind.JOBSET
        if kind is WorkloadKind.PYTORCHJOB:
            assert work.state().elastic == (6, 8)
        else:
            assert work.state().ignores_disruptions and work.state().restart_limit == 3
