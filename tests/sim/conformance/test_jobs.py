"""Conformance: the Job API and the Job controller as the adapter and the training workload rely on them.

Sources: Kubernetes v1.36.2 (pkg/controller/job, pkg/apis/batch, pkg/registry/batch/job). Bodies are read strictly
through the official client's models (wire.strict)."""

from __future__ import annotations

import json
import time

import pytest

from tests.sim.conformance.wire import raw, strict, wait_for

JOBS = "/apis/batch/v1/namespaces/gpu-remedy/jobs"
SMP = "application/strategic-merge-patch+json"
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                 "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def job(name: str, node: str = "gpu003", seconds: int = 1000, backoff: int | None = None, policy=None,
        restart: str = "Never", parallelism: int = 1) -> dict:
    spec: dict = {"parallelism": parallelism, "completions": parallelism, "template": {
        "metadata": {"labels": {"remedy.io/check": "sleep"}},
        "spec": {"restartPolicy": restart, "nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "c", "image": "busybox", "env": [{"name": "SECONDS",
                                                                            "value": str(seconds)}]}]}}}
    if backoff is not None:
        spec["backoffLimit"] = backoff
    if policy is not None:
        spec["podFailurePolicy"] = policy
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def read_job(sim, api_client, name: str):
    return strict(api_client, "V1Job", raw(sim, "GET", f"{JOBS}/{name}")[2])


def on_real_server(sim) -> bool:
    return hasattr(sim, "kubelet")  # tests.fixtures.real_k8s: the stand-in kubelet beside a real control plane


def running_pod(sim, api_client, name: str, not_named: set[str] = frozenset()):
    """A running pod of Job `name` (not one of `not_named`). Replacements come after the Job controller's
    pod-failure back-off: 10 s, 20 s, 40 s ... on a real server (simulated seconds here)."""
    def find():
        pods = strict(api_client, "V1PodList", raw(sim, "GET", f"/api/v1/namespaces/gpu-remedy/pods"
                                                             f"?labelSelector=job-name%3D{name}")[2]).items
        return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp
                and p.metadata.name not in not_named]
    return wait_for(find, timeout=120 if on_real_server(sim) else 8)[0]


def evict(sim, pod: str, grace: int | None = None) -> int:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "gpu-remedy"}}
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    return raw(sim, "POST", f"/api/v1/namespaces/gpu-remedy/pods/{pod}/eviction", body)[0]


def delete(sim, pod: str) -> int:
    return raw(sim, "DELETE", f"/api/v1/namespaces/gpu-remedy/pods/{pod}")[0]


def condition(j, type_: str):
    return next((c for c in j.status.conditions or [] if c.type == type_ and c.status == "True"), None)


def test_a_job_is_defaulted_on_create(sim, api_client):
    """pkg/apis/batch/v1/defaults.go (SetDefaults_Job): backoffLimit 6, completionMode NonIndexed, suspend false,
    podReplacementPolicy TerminatingOrFailed — or Failed when a podFailurePolicy is given."""
    code, _, body = raw(sim, "POST", JOBS, job("plain"))
    created = strict(api_client, "V1Job", body)
    assert code == 201 and created.spec.backoff_limit == 6 and created.spec.completion_mode == "NonIndexed"
    assert created.spec.suspend is False and created.spec.pod_replacement_policy == "TerminatingOrFailed"
    _, _, body = raw(sim, "POST", JOBS, job("with-policy", policy=IGNORE_DISRUPTIONS))
    assert strict(api_client, "V1Job", body).spec.pod_replacement_policy == "Failed"


def test_creating_a_job_twice_is_409_already_exists(sim, api_client):
    """staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go (NewAlreadyExists): reason AlreadyExists, message
    `jobs.batch "NAME" already exists` — a retried step's create, not a conflict."""
    raw(sim, "POST", JOBS, job("twice"))
    code, _, body = raw(sim, "POST", JOBS, job("twice"))
    status = strict(api_client, "V1Status", body)
    assert code == 409 and status.reason == "AlreadyExists" and status.message == 'jobs.batch "twice" already exists'
    assert (status.details.name, status.details.group, status.details.kind) == ("twice", "batch", "jobs")


def test_a_pod_failure_policy_needs_restart_policy_never(sim, api_client):
    """pkg/apis/batch/validation/validation.go (validateJobSpec): with a podFailurePolicy only restartPolicy Never
    is allowed; 422 naming spec.template.spec.restartPolicy."""
    code, _, body = raw(sim, "POST", JOBS, job("on-failure", restart="OnFailure", policy=IGNORE_DISRUPTIONS))
    status = strict(api_client, "V1Status", body)
    assert code == 422 and status.reason == "Invalid"
    (cause,) = status.details.causes
    assert (cause.field, cause.reason) == ("spec.template.spec.restartPolicy", "FieldValueInvalid")
    assert 'only "Never" is supported when podFailurePolicy is specified' in cause.message


def test_deleted_pods_count_as_failures_without_a_pod_failure_policy(sim, api_client):
    """pkg/controller/job/job_controller.go (isPodFailed): "Count deleted Pods as failures" — a pod deleted before
    it succeeded counts toward backoffLimit, evicted or not, and the Job fails past it (BackoffLimitExceeded)."""
    raw(sim, "POST", JOBS, job("fragile", backoff=1))
    first = running_pod(sim, api_client, "fragile")
    assert evict(sim, first.metadata.name) == 201
    second = running_pod(sim, api_client, "fragile", {first.metadata.name})  # replaced at once (TerminatingOrFailed)
    assert delete(sim, second.metadata.name) == 200
    done = wait_for(lambda: condition(read_job(sim, api_client, "fragile"), "Failed") and
                    read_job(sim, api_client, "fragile"))
    assert done.status.failed == 2 and condition(done, "Failed").reason == "BackoffLimitExceeded"


def test_a_policy_that_ignores_disruption_keeps_evictions_off_the_count(sim, api_client):
    """pkg/controller/job/pod_failure_policy.go (matchPodFailurePolicy) with job_controller.go
    (onlyReplaceFailedPods): a pod evicted (DisruptionTarget) is ignored and replaced once it has ended; a pod
    deleted without that condition still counts."""
    raw(sim, "POST", JOBS, job("sturdy", backoff=0, policy=IGNORE_DISRUPTIONS))
    seen: set[str] = set()
    for _ in range(3):  # three drains in a row: none counts
        pod = running_pod(sim, api_client, "sturdy", seen)
        seen.add(pod.metadata.name)
        assert evict(sim, pod.metadata.name) == 201
    pod = running_pod(sim, api_client, "sturdy", seen)
    j = read_job(sim, api_client, "sturdy")
    assert not j.status.failed and not condition(j, "Failed")
    assert delete(sim, pod.metadata.name) == 200  # a plain delete has no DisruptionTarget: it counts
    done = wait_for(lambda: condition(read_job(sim, api_client, "sturdy"), "Failed") and
                    read_job(sim, api_client, "sturdy"))
    assert done.status.failed == 1


def test_with_a_pod_failure_policy_the_replacement_waits_for_the_old_pod(sim, api_client):
    """job_controller.go (onlyReplaceFailedPods) and pkg/apis/batch/v1/defaults.go: podReplacementPolicy Failed —
    no new pod while the evicted one is still terminating."""
    sim.cluster.time_scale = 0.05  # a 30 s grace period lasts 1.5 s
    raw(sim, "POST", JOBS, job("patient", policy=IGNORE_DISRUPTIONS))
    pod = running_pod(sim, api_client, "patient")
    evict(sim, pod.metadata.name)
    # the real Job controller writes its status a moment later (the simulator at once)
    j = wait_for(lambda: (x := read_job(sim, api_client, "patient")).status.terminating and x)
    assert (j.status.active or 0, j.status.terminating) == (0, 1)
    running_pod(sim, api_client, "patient", {pod.metadata.name})  # once it has ended


def test_a_failed_pod_delays_the_next_one_by_the_pod_failure_back_off(sim, api_client):
    """pkg/controller/job/job_controller.go v1.36.2 (manageJob: getRemainingTime with DefaultJobPodFailureBackOff
    = 10 s, MaxJobPodFailureBackOff = 10 min; enqueueSyncJobWithDelay) and backoff_utils.go (newBackoffRecord,
    getFinishTimeFromDeletionTimestamp): after a pod fails — here evicted, so deleted before it succeeded — the
    controller creates its replacement 10 s after the failure, not at once. (The real lane measured this: the
    simulator used to replace at once.)"""
    scale = 1.0 if on_real_server(sim) else 0.2
    sim.cluster.time_scale = scale  # the simulator's back-off is in simulated seconds: 10 s last 2 s here
    raw(sim, "POST", JOBS, job("backed-off", backoff=6))
    pod = running_pod(sim, api_client, "backed-off")
    start = time.monotonic()
    assert evict(sim, pod.metadata.name) == 201
    replacement = running_pod(sim, api_client, "backed-off", {pod.metadata.name})
    waited = time.monotonic() - start
    assert 10 * scale - 1.0 <= waited <= 10 * scale + (8 if scale == 1.0 else 1.5), waited
    assert replacement.metadata.name != pod.metadata.name
    wait_for(lambda: read_job(sim, api_client, "backed-off").status.failed == 1)


@pytest.mark.simulator_only("measures three successive back-offs (70 s of a real controller's time)")
def test_the_back_off_doubles_with_each_failure_since_the_last_success(sim, api_client):
    """backoff_utils.go (getRemainingTimeForFailuresCount): 10 s x 2^(n-1) after the n-th failure since the last
    success, capped at MaxJobPodFailureBackOff (10 min in v1.36.2); a pod the podFailurePolicy ignores still
    delays the next one (getNewFinishedPods takes every isPodFailed pod), it just does not count toward
    backoffLimit."""
    from remedy.sim.jobs import pod_failure_backoff

    assert [pod_failure_backoff(n) for n in (0, 1, 2, 3, 6, 7, 20)] == [0, 10, 20, 40, 320, 600, 600]
    sim.cluster.time_scale = 0.03  # 10 s last 0.3 s
    raw(sim, "POST", JOBS, job("doubling", backoff=0, policy=IGNORE_DISRUPTIONS))
    seen: set[str] = set()
    pod = running_pod(sim, api_client, "doubling")
    waits = []
    for _ in range(3):
        seen.add(pod.metadata.name)
        start = time.monotonic()
        assert evict(sim, pod.metadata.name, grace=0) == 201  # gone at once: the failure is now
        pod = running_pod(sim, api_client, "doubling", seen)
        waits.append(time.monotonic() - start)
    for want, got in zip((0.3, 0.6, 1.2), waits):
        assert want - 0.05 <= got <= want + 0.4, waits
    j = read_job(sim, api_client, "doubling")
    assert not j.status.failed and not condition(j, "Failed")  # ignored by the policy: never counted


def test_a_pod_without_its_tracking_finalizer_neither_counts_nor_delays_the_next_one(sim, api_client):
    """job_controller.go v1.36.2 (getNewFinishedPods → getValidPodsWithFilter: only pods that still carry
    batch.kubernetes.io/job-tracking are new failures; deleteJobPods removes it before deleting a pod): an evicted
    pod whose finalizer is taken off while it terminates is not a failure for the back-off record — three
    evictions in a row, each replacement comes without the 10 s, 20 s, 40 s waits — nor for status.failed. What
    the adapter's drain does for a Job whose podFailurePolicy ignores disruptions (remedy.adapters.kubernetes
    _leave_job_backoff)."""
    scale = 1.0 if on_real_server(sim) else 0.2
    sim.cluster.time_scale = scale  # the simulator's back-off: 10 s last 2 s here; the real one is 10 s
    raw(sim, "POST", JOBS, job("released", backoff=0, policy=IGNORE_DISRUPTIONS))
    seen: set[str] = set()
    pod = running_pod(sim, api_client, "released")
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]  # the Job controller's, on every pod
    waits = []
    for _ in range(3):
        seen.add(pod.metadata.name)
        start = time.monotonic()
        assert evict(sim, pod.metadata.name, grace=2) == 201  # 2 s to take the finalizer off before it ends
        code, _, body = raw(sim, "PATCH", f"/api/v1/namespaces/gpu-remedy/pods/{pod.metadata.name}", {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["batch.kubernetes.io/job-tracking"]}}, SMP)
        assert code == 200 and "batch.kubernetes.io/job-tracking" not in (json.loads(body)["metadata"].get(
            "finalizers") or []), body
        pod = running_pod(sim, api_client, "released", seen)
        waits.append(time.monotonic() - start)
    # the grace period, then a sync: never the back-off, which would be 10 s x scale, then 20 s, 40 s
    assert max(waits) < 10 * scale - (1.0 if scale == 1.0 else 0.3), waits
    j = read_job(sim, api_client, "released")
    assert not j.status.failed and not condition(j, "Failed")


def test_suspending_a_job_deletes_its_pods_without_counting_them(sim, api_client):
    """job_controller.go (manageJob: jobSuspended → deleteJobPods, which removes the tracking finalizer first, so
    the pods are not counted) and the Suspended condition (JobSuspended / JobResumed)."""
    raw(sim, "POST", JOBS, job("pausable", backoff=0, parallelism=2))
    running_pod(sim, api_client, "pausable")
    raw(sim, "PATCH", f"{JOBS}/pausable", {"spec": {"suspend": True}}, SMP)
    j = wait_for(lambda: (x := read_job(sim, api_client, "pausable")) and not x.status.active and x)
    assert condition(j, "Suspended").reason == "JobSuspended" and not j.status.failed
    raw(sim, "PATCH", f"{JOBS}/pausable", {"spec": {"suspend": False}}, SMP)
    j = wait_for(lambda: (x := read_job(sim, api_client, "pausable")) and x.status.active == 2 and x)
    resumed = next(c for c in j.status.conditions if c.type == "Suspended")
    assert (resumed.status, resumed.reason) == ("False", "JobResumed") and not j.status.failed


def test_deleting_a_batch_v1_job_orphans_its_pods_unless_told(sim, api_client):
    """pkg/registry/batch/job/strategy.go (DefaultGarbageCollectionPolicy): for batch/v1, OrphanDependents "for
    back compatibility"; propagationPolicy Background deletes the pods. Checked on a real v1.36.2 server."""
    raw(sim, "POST", JOBS, job("left"))
    pod = running_pod(sim, api_client, "left")
    code, _, body = raw(sim, "DELETE", f"{JOBS}/left")
    # the garbage collector's `orphan` finalizer holds the Job a moment: the answer is the Job being deleted
    # (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, Delete → updateForGracefulDeletionAndFinalizers)
    gone = strict(api_client, "V1Job", body)
    assert code == 200 and gone.metadata.deletion_timestamp and "orphan" in gone.metadata.finalizers
    # the garbage collector orphans the pod asynchronously (pkg/controller/garbagecollector/garbagecollector.go,
    # orphanDependents runs from its attemptToOrphan queue): on a loaded real server that is seconds, not at once
    pod_path = f"/api/v1/namespaces/gpu-remedy/pods/{pod.metadata.name}"
    orphan = wait_for(lambda: (p := strict(api_client, "V1Pod", raw(sim, "GET", pod_path)[2]))
                      and not p.metadata.owner_references and p)
    assert not orphan.metadata.deletion_timestamp
    raw(sim, "POST", JOBS, job("gone"))
    pod = running_pod(sim, api_client, "gone")
    raw(sim, "DELETE", f"{JOBS}/gone", {"propagationPolicy": "Background"})
    wait_for(lambda: raw(sim, "GET", f"/api/v1/namespaces/gpu-remedy/pods/{pod.metadata.name}")[0] == 404)


def test_the_training_job_declares_what_operations_md_asks(sim, api_client):
    """The simulator's own training Job is what docs/operations.md tells operators to run: restartPolicy Never, a
    podFailurePolicy that ignores DisruptionTarget, the default backoffLimit (6); a drain of one node leaves its
    failure count at zero."""
    j = strict(api_client, "V1Job", raw(sim, "GET", "/apis/batch/v1/namespaces/training/jobs/llm-pretrain")[2])
    assert j.spec.template.spec.restart_policy == "Never" and j.spec.backoff_limit == 6
    assert j.spec.pod_failure_policy.rules[0].action == "Ignore"
    assert j.spec.pod_failure_policy.rules[0].on_pod_conditions[0].type == "DisruptionTarget"
    pods = strict(api_client, "V1PodList", raw(sim, "GET", "/api/v1/namespaces/training/pods"
                                                           "?fieldSelector=spec.nodeName%3Dgpu002")[2]).items
    raw(sim, "POST", f"/api/v1/namespaces/training/pods/{pods[0].metadata.name}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pods[0].metadata.name}})
    wait_for(lambda: raw(sim, "GET", f"/api/v1/namespaces/training/pods/{pods[0].metadata.name}")[0] == 404)
    j = strict(api_client, "V1Job", raw(sim, "GET", "/apis/batch/v1/namespaces/training/jobs/llm-pretrain")[2])
    assert not j.status.failed and not condition(j, "Failed")


def test_patching_parallelism_resizes_the_job(sim, api_client):
    """pkg/registry/batch/job/strategy.go (PrepareForUpdate: a spec change bumps metadata.generation) and
    job_controller.go (manageJob: more active pods than parallelism → the surplus is deleted, unscheduled and
    unready ones first) — how the adapter shrinks an elastic training Job."""
    path = "/apis/batch/v1/namespaces/training/jobs/llm-pretrain"
    before = strict(api_client, "V1Job", raw(sim, "GET", path)[2])
    code, _, body = raw(sim, "PATCH", path, {"spec": {"parallelism": 12}}, SMP)
    after = strict(api_client, "V1Job", body)
    assert code == 200 and after.spec.parallelism == 12
    assert after.metadata.generation == before.metadata.generation + 1
    wait_for(lambda: strict(api_client, "V1Job", raw(sim, "GET", path)[2]).status.active == 12)
    assert not strict(api_client, "V1Job", raw(sim, "GET", path)[2]).status.failed  # removed, not failed
    # manageJob: at most completions - succeeded active pods; parallelism above completions (14) adds none
    raw(sim, "PATCH", path, {"spec": {"parallelism": 16}}, SMP)
    wait_for(lambda: strict(api_client, "V1Job", raw(sim, "GET", path)[2]).status.active == 14)
    time.sleep(1.0)
    assert strict(api_client, "V1Job", raw(sim, "GET", path)[2]).status.active == 14


def test_completions_change_only_on_an_indexed_job_and_with_parallelism(sim, api_client):
    """pkg/apis/batch/validation/validation.go v1.36.2 (validateCompletions; elastic Indexed Jobs, KEP-3715): a
    NonIndexed Job's completions are immutable; an Indexed Job's change only in tandem with parallelism — how
    the adapter's resize of an Indexed training Job patches both (remedy/adapters/workloads.py)."""
    raw(sim, "POST", JOBS, job("plain-size", parallelism=2))
    code, _, body = raw(sim, "PATCH", f"{JOBS}/plain-size", {"spec": {"parallelism": 3, "completions": 3}}, SMP)
    status = strict(api_client, "V1Status", body)
    assert code == 422 and status.reason == "Invalid"
    assert [(c.field, c.message) for c in status.details.causes] == [
        ("spec.completions", "Invalid value: 3: field is immutable")]
    indexed = job("indexed-size", parallelism=2)
    indexed["spec"]["completionMode"] = "Indexed"
    assert raw(sim, "POST", JOBS, indexed)[0] == 201
    code, _, body = raw(sim, "PATCH", f"{JOBS}/indexed-size", {"spec": {"completions": 3}}, SMP)
    status = strict(api_client, "V1Status", body)
    assert code == 422 and [(c.field, c.message) for c in status.details.causes] == [
        ("spec.completions", "Invalid value: 3: can only be modified in tandem with spec.parallelism")]
    code, _, body = raw(sim, "PATCH", f"{JOBS}/indexed-size", {"spec": {"parallelism": 3, "completions": 3}}, SMP)
    resized = strict(api_client, "V1Job", body)
    assert code == 200 and (resized.spec.parallelism, resized.spec.completions) == (3, 3)


def test_a_jobs_status_ready_counts_its_running_ready_pods(sim, api_client):
    """pkg/controller/job/job_controller.go (syncJob: ready = countReadyPods(activePods), JobReadyPods GA since
    v1.29): status.ready is the number of the Job's active pods with condition Ready=True. The controller writes it
    on its next sync, a moment after the pods change on a real server (the simulator at once), so it is awaited."""

    def ready_now():
        job = json.loads(raw(sim, "GET", "/apis/batch/v1/namespaces/training/jobs/llm-pretrain")[2])
        pods = json.loads(raw(sim, "GET", "/api/v1/namespaces/training/pods?labelSelector=app%3Dllm-pretrain")[2])
        counted = sum(1 for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
                      and p.get("status", {}).get("phase") == "Running"
                      and any(c["type"] == "Ready" and c["status"] == "True"
                              for c in p["status"].get("conditions") or []))
        return (job["status"].get("ready"), counted)

    assert wait_for(lambda: ready_now() == (14, 14))
    strict(api_client, "V1Job", raw(sim, "GET", "/apis/batch/v1/namespaces/training/jobs/llm-pretrain")[2])
