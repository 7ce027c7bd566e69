"""The Job controller: pods for each Job, their runs, and the Job's status.

Failed pods count toward `backoffLimit` as the real Job controller counts them (pkg/controller/job/
job_controller.go v1.36, isPodFailed and trackJobStatusAndRemoveFinalizers; pod_failure_policy.go): a pod that
ends Failed counts, and so does a pod deleted before it succeeded — evicted by a drain, deleted by a person, by the
taint manager or PodGC — unless the Job has a podFailurePolicy, which then waits for the pod's terminal phase (the
kubelet marks a deleted pod Failed) and applies its rules: `Ignore` on the DisruptionTarget condition (set by the
eviction subresource, the taint manager, PodGC) keeps disruptions off the count. Pods the controller deletes
itself (suspend, scale-down) never count. With a podFailurePolicy a replacement waits until the old pod has ended
(podReplacementPolicy defaults to Failed).

Every failed pod — counted or ignored by the policy — also delays the Job's next pod: the controller creates none
until 10 s x 2^(n-1) (at most 10 min) after the latest of the n failures since the last success
(job_controller.go DefaultJobPodFailureBackOff / MaxJobPodFailureBackOff, backoff_utils.go
getRemainingTimeForFailuresCount). Simulated seconds: at time_scale 0.01 the first wait is 0.1 s.

Two shapes of Job:
- the training job (annotation `remedy.io/sim-workload: training`): a gang of `parallelism` pods, one
  per eligible node, that run until deleted; a missing pod is recreated on an eligible node or stays Pending;
- every other Job runs to completion through the runner named by its pod-template label
  `remedy.io/check` (default `sleep`). A check Job whose nodeSelector does not name one host (e.g.
  `divergence-job-id: <uuid>` shared by several nodes) gets one pod per matching node, like an indexed Job.
"""

from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING

from remedy.sim.cluster import CHECK_LABEL, WORKLOAD_ANNOTATION, PodRun
from remedy.sim.controller import (
    JOB_TRACKING_FINALIZER,
    _bind,
    _candidates,
    _pending_status,
    add_default_tolerations,
    add_extended_resource_tolerations,
    controller_uid,
    create_generated,
    delete_pod,
    finished,
    new_job_pod,
    pod_key,
    terminating,
)
from remedy.sim.images import kubelet_refusal
from remedy.sim.runners import RunResult, get_runner, spread_times
from remedy.sim.store import deep_copy, now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

DEFAULT_BACKOFF_LIMIT = 6  # Kubernetes' default spec.backoffLimit
# pkg/controller/job/job_controller.go v1.36.2: DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff
POD_FAILURE_BACKOFF_SECONDS = 10.0
MAX_POD_FAILURE_BACKOFF_SECONDS = 600.0


def is_training(job: dict) -> bool:
    return (job["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION) == "training"


def job_done(job: dict) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


# ---------------------------------------------------------------- failure counting
def only_replace_failed(job: dict) -> bool:
    """onlyReplaceFailedPods: podReplacementPolicy Failed, or any podFailurePolicy (which requires it)."""
    spec = job["spec"]
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_pod_failed(job: dict, pod: dict) -> bool:
    """isPodFailed: Failed, or — unless only failed pods are replaced — deleted before it succeeded."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return terminating(pod) and phase != "Succeeded"


def match_pod_failure_policy(job: dict, pod: dict) -> tuple[bool, str | None]:
    """matchPodFailurePolicy: (count it toward backoffLimit, FailJob message) for a failed pod; the first matching
    rule decides; no rule matching counts it."""
    policy = job["spec"].get("podFailurePolicy")
    if not policy:
        return True, None
    status = pod.get("status") or {}
    for i, rule in enumerate(policy.get("rules") or []):
        matched = None
        if rule.get("onExitCodes") is not None:
            req = rule["onExitCodes"]
            values = set(req.get("values") or [])
            for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
                code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
                if code in (None, 0) or req.get("containerName") not in (None, cs.get("name")):
                    continue
                if (req.get("operator") == "In") == (code in values):
                    matched = f"Container {cs.get('name')} for pod {pod_key(pod)[0]}/{pod_key(pod)[1]} failed with " \
                              f"exit code {code} matching FailJob rule at index {i}"
                    break
        elif rule.get("onPodConditions") is not None:
            for c in status.get("conditions") or []:
                if any(c.get("type") == pat.get("type") and c.get("status") == pat.get("status", "True")
                       for pat in rule["onPodConditions"]):
                    matched = f"Pod {pod_key(pod)[0]}/{pod_key(pod)[1]} has condition {c.get('type')} matching " \
                              f"FailJob rule at index {i}"
                    break
        if matched is None:
            continue
        action = rule.get("action")
        if action == "Ignore":
            return False, None
        if action == "FailJob":
            return True, matched
        return True, None  # Count, FailIndex
    return True, None


def pod_failure_backoff(failures: int) -> float:
    """Seconds the Job controller waits after the latest of `failures` pod failures since the last success before
    it creates a pod (backoff_utils.go getRemainingTimeForFailuresCount: 10 s doubled per further failure, capped
    at 10 min; no failure, no wait)."""
    if failures <= 0:
        return 0.0
    return min(POD_FAILURE_BACKOFF_SECONDS * 2 ** min(failures - 1, 16), MAX_POD_FAILURE_BACKOFF_SECONDS)


def backoff_remaining(cluster: Cluster, job: dict) -> float:
    """Real seconds before the Job controller may create a pod for `job` (0: now)."""
    record = cluster.job_backoff.get(job["metadata"]["uid"])
    if not cluster.pod_failure_backoff or record is None:
        return 0.0
    failures, last = record
    return max(0.0, last + cluster.scaled(pod_failure_backoff(failures)) - time.monotonic())


def _held_by_backoff(cluster: Cluster, job: dict) -> bool:
    """True while the back-off holds new pods; wakes the Job's sync when it is over (enqueueSyncJobWithDelay)."""
    remaining = backoff_remaining(cluster, job)
    if remaining <= 0:
        return False
    uid = job["metadata"]["uid"]
    if uid not in cluster.job_backoff_wake:
        cluster.job_backoff_wake.add(uid)

        def wake() -> None:
            cluster.job_backoff_wake.discard(uid)
            cluster.index.dirty_owners.add(uid)

        cluster.call_later(remaining / cluster.time_scale + 1e-3, wake)
    return True


def _record_outcome(cluster: Cluster, job_uid: str, succeeded: bool) -> None:
    """The back-off record (backoffStore.newBackoffRecord): a success clears it, a failure adds one."""
    if succeeded:
        cluster.job_backoff.pop(job_uid, None)
        return
    failures, _ = cluster.job_backoff.get(job_uid, (0, 0.0))
    cluster.job_backoff[job_uid] = (failures + 1, time.monotonic())


def _count(cluster: Cluster, job: dict, pod: dict) -> None:
    """Count a failed pod once (the real controller's tracking finalizer makes it see each pod's end once). A pod
    without the finalizer is not counted at all — neither toward backoffLimit nor the back-off (job_controller.go
    getValidPodsWithFilter skips it): what deleteJobPods relies on, and what the adapter does for an evicted pod
    its Job's policy ignores."""
    if JOB_TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
        return
    uid, pod_uid = job["metadata"]["uid"], pod["metadata"].get("uid", pod["metadata"]["name"])
    seen = cluster.job_counted.setdefault(uid, set())
    if pod_uid in seen:
        return
    seen.add(pod_uid)
    _record_outcome(cluster, uid, succeeded=False)  # ignored by the policy or not, it delays the next pod
    counts, fail_job = match_pod_failure_policy(job, pod)
    if counts:
        cluster.job_new_failures[uid] = cluster.job_new_failures.get(uid, 0) + 1
    if fail_job:
        cluster.job_fail_reason.setdefault(uid, ("PodFailurePolicy", fail_job))
    cluster.index.dirty_owners.add(uid)


def _forget(cluster: Cluster, job: dict, pod: dict) -> None:
    """The controller deletes this pod itself (suspend, scale-down, a finished Job): it removes the tracking
    finalizer first, so the pod's end is never counted."""
    cluster.job_counted.setdefault(job["metadata"]["uid"], set()).add(pod["metadata"].get("uid", ""))


def pod_gone(cluster: Cluster, pod: dict) -> None:
    """A Job's pod is about to leave the store. On a real cluster its tracking finalizer holds it until the Job
    controller has seen how it ended: Failed, for a pod deleted before it succeeded (the kubelet, or PodGC, marks
    it so)."""
    owner = controller_uid(pod)
    job = next((j for j in cluster.store.objects("Job", pod["metadata"].get("namespace"))
                if j["metadata"]["uid"] == owner), None)
    if job is None or job_done(job) or (pod.get("status") or {}).get("phase") == "Succeeded":
        return
    if (pod.get("status") or {}).get("phase") != "Failed" and cluster.count_deleted_pods:
        pod = deep_copy(pod)
        pod["status"]["phase"] = "Failed"
        for cs in pod["status"].get("containerStatuses") or []:
            if "terminated" not in (cs.get("state") or {}):  # SIGTERM at the end of the grace period
                cs["state"] = {"terminated": {"exitCode": 143, "reason": "Error"}}
    if is_pod_failed(job, pod):
        _count(cluster, job, pod)


def _failed_so_far(cluster: Cluster, job: dict) -> int:
    return int((job.get("status") or {}).get("failed", 0)) + cluster.job_new_failures.get(job["metadata"]["uid"], 0)


# ---------------------------------------------------------------- sync
def sync_job(cluster: Cluster, job: dict, dirty: bool = True) -> None:
    """dirty: the Job or its pods changed since the last pass (else only Node changes brought us here)."""
    uid = job["metadata"]["uid"]
    index = cluster.index
    dirty = dirty or uid in cluster.job_new_failures
    if not dirty and cluster.job_settled.get(uid):
        return  # all its pods are placed: a Node change cannot give it anything to do
    index.dirty_owners.discard(uid)
    if not job_done(job) and cluster.count_deleted_pods:
        for pod in index.owned(uid):
            if is_pod_failed(job, pod):
                _count(cluster, job, pod)
    if job["spec"].get("suspend") and not job_done(job):
        cluster.job_settled[uid] = _suspend(cluster, job)
        dirty = True
    elif not job_done(job):
        if is_training(job):
            settled = _sync_gang(cluster, job)
        else:
            settled = _sync_finite(cluster, job, index.owned(uid))
        cluster.job_settled[uid] = bool(settled)
        dirty = dirty or uid in index.dirty_owners
    if dirty:
        _update_status(cluster, job)


def _suspend(cluster: Cluster, job: dict) -> bool:
    """A suspended Job: its active pods are deleted (gracefully) and none are created until it is resumed — the
    Job controller's behaviour, and how Kueue preempts a Job. True: nothing left to do."""
    for pod in cluster.index.owned(job["metadata"]["uid"]):
        if not terminating(pod) and not finished(pod):
            _forget(cluster, job, pod)
            delete_pod(cluster, *pod_key(pod))
    return True


def _template_spec(job: dict) -> dict:
    spec = deep_copy((job["spec"].get("template") or {}).get("spec") or {})
    add_default_tolerations(spec)
    add_extended_resource_tolerations(spec)  # the pods will carry it (admission), so judge nodes with it
    return spec


def _sync_gang(cluster: Cluster, job: dict) -> bool:
    """Keep `parallelism` pods, one per eligible node; True when nothing is left to place."""
    uid = job["metadata"]["uid"]
    index = cluster.index
    stats = index.stats(uid)
    if _failed_so_far(cluster, job) > int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT)) \
            or uid in cluster.job_fail_reason:
        return True  # _update_status marks it Failed
    # terminating pods are replaced at once, unless only failed pods are (then they still take a slot)
    # manageJob: with completions set, at most completions - succeeded pods are active, whatever parallelism
    # says (raising parallelism above completions creates nothing: seen on the real lane)
    want = int(job["spec"].get("parallelism", 1))
    if job["spec"].get("completions") is not None:
        want = min(want, int(job["spec"]["completions"]) - stats.succeeded)
    missing = want - stats.live - (stats.terminating if only_replace_failed(job)
                                                                      else 0)
    if missing < 0:  # scaled down: remove the surplus, unplaced pods first (as the Job controller does)
        surplus = sorted((p for p in index.owned(uid) if not finished(p) and not terminating(p)),
                         key=lambda p: (bool(p["spec"].get("nodeName")), p["metadata"]["name"]))[:-missing]
        for p in surplus:
            _forget(cluster, job, p)
            delete_pod(cluster, *pod_key(p))
        return True
    if missing == 0 and not stats.pending:
        return True
    pending = [index.pods[k] for k in sorted(stats.pending) if k in index.pods]
    occupied = set(stats.nodes)
    ok, reasons, total = _candidates(cluster, _template_spec(job), occupied, cache_key=job["metadata"]["uid"])
    for pod in pending:
        copy = deep_copy(pod)
        if ok:
            _bind(cluster, copy, ok.pop(0))
        elif (pod.get("status", {}).get("conditions") or [{}])[0].get("reason") == "Unschedulable":
            continue  # already says why; no churn
        else:
            _pending_status(copy, reasons, total)
        cluster.store.put("Pod", copy)
    if missing > 0 and _held_by_backoff(cluster, job):
        missing = 0
    for _ in range(max(0, missing)):
        pod = new_job_pod(job)
        if ok:
            _bind(cluster, pod, ok.pop(0))
        else:
            _pending_status(pod, reasons, total)
        create_generated(cluster, pod)
    return False


def _targets(cluster: Cluster, job: dict, pods: list[dict]) -> list[tuple[int, str | None]]:
    """(completion index, None) for each pod the Job needs: `completions` of them. Where they run is the
    scheduler's business — node affinity, and pod anti-affinity to spread a group one pod per node — as on a
    real cluster (the simulator no longer gives a label-selected check one pod per matching node by itself)."""
    uid = job["metadata"]["uid"]
    if uid in cluster.job_targets:
        return cluster.job_targets[uid]
    targets = [(i, None) for i in range(int(job["spec"].get("completions") or 1))]
    cluster.job_targets[uid] = targets
    return targets


def _index(pod: dict) -> int:
    return int((pod["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", 0))


def _sync_finite(cluster: Cluster, job: dict, pods: list[dict]) -> bool:
    targets = _targets(cluster, job, pods)
    if _failed_so_far(cluster, job) > int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT)) \
            or job["metadata"]["uid"] in cluster.job_fail_reason:
        return True  # _update_status marks it Failed
    if _deadline_passed(cluster, job):
        return True
    settled = True
    bound: list[dict] = []
    for index, node in targets:
        mine = [p for p in pods if _index(p) == index]
        if any(p["status"].get("phase") == "Succeeded" for p in mine):
            continue
        live = [p for p in mine if not terminating(p) and not finished(p)]
        ending = only_replace_failed(job) and any(terminating(p) and not finished(p) for p in mine)
        if not live and not ending:
            if _held_by_backoff(cluster, job):
                settled = False
                continue
            pod = new_job_pod(job, index=index, node=node)
            settled &= _place_finite(cluster, job, pod, created=False, bound=bound)
        for pod in live:
            if not pod["spec"].get("nodeName"):
                settled &= _place_finite(cluster, job, deep_copy(pod), created=True, bound=bound)
    for pod in bound:  # every pod placed first: a group check's runner sees all the nodes it runs on
        start_run(cluster, job, pod)
    return settled


def _place_finite(cluster: Cluster, job: dict, pod: dict, created: bool, bound: list[dict]) -> bool:
    """Bind the pod if a node takes it (its run starts once the pass has placed every pod), else leave it
    Pending; True when it was bound."""
    ok, reasons, total = _candidates(cluster, pod["spec"], set(), namespace=pod["metadata"].get("namespace",
                                                                                                 "default"))
    if ok:
        _bind(cluster, pod, ok[0])
    else:
        old = (pod.get("status", {}).get("conditions") or [{}])[0]
        if created and old.get("reason") == "Unschedulable":
            return False
        _pending_status(pod, reasons, total)
    if created:
        cluster.store.put("Pod", pod)
    else:
        pod = create_generated(cluster, pod)
    if ok:
        bound.append(pod)
    return bool(ok)


def job_nodes(cluster: Cluster, job: dict) -> list[str]:
    """Nodes the Job's live pods are bound to: a group check's peers (what mpirun's host list would be)."""
    return sorted({p["spec"]["nodeName"] for p in cluster.index.owned(job["metadata"]["uid"])
                   if p["spec"].get("nodeName") and not finished(p) and not terminating(p)})


def start_run(cluster: Cluster, job: dict, pod: dict) -> None:
    """Ask the runner what this pod does, then show its log over time and finish it."""
    ns, name = pod_key(pod)
    node = pod["spec"]["nodeName"]
    check = (pod["metadata"].get("labels") or {}).get(CHECK_LABEL)
    runner = get_runner(check)
    refusal = kubelet_refusal(pod, check)  # what a real node does first: image, command, GPUs
    if refusal is not None:
        result = refusal
    elif runner is None:
        result = RunResult(127, f"simulator: no runner registered for check {check!r}", 0.1)
    else:
        try:
            result = runner(node, cluster.health_of(node), job, cluster)
            if not isinstance(result, RunResult):
                raise TypeError(f"runner returned {type(result).__name__}, not RunResult")
        except Exception as exc:  # a broken runner fails its pod, never the simulator
            tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result = RunResult(1, f"simulator: runner {check or 'sleep'!r} crashed: {tail}", 0.1)
    start = time.monotonic()
    lines = result.log.splitlines()
    times = list(result.line_times or [])[: len(lines)]
    times += spread_times(len(lines), result.seconds)[len(times):]
    cluster.logs[(ns, name)] = [(start + cluster.scaled(t), line) for t, line in zip(times, lines)]
    uid = pod["metadata"].get("uid")
    cluster.runs[(ns, name)] = PodRun(start, int(result.exit_code), start + cluster.scaled(result.seconds),
                                      cluster.logs[(ns, name)])
    cluster.call_later(result.seconds, lambda: finish_pod(cluster, ns, name, uid))


def finish_pod(cluster: Cluster, namespace: str, name: str, uid: str | None = None) -> None:
    pod = cluster.store.get("Pod", namespace, name)
    run = cluster.runs.get((namespace, name))
    if pod is None or run is None or finished(pod) or (uid and pod["metadata"].get("uid") != uid):
        return
    ok = run.exit_code == 0

    def change(p: dict) -> None:
        ts = now_iso()
        p["status"]["phase"] = "Succeeded" if ok else "Failed"
        for c in p["status"].get("conditions") or []:
            if c.get("type") in ("Ready", "ContainersReady"):
                c["status"], c["lastTransitionTime"] = "False", ts
                c["reason"] = "PodCompleted" if ok else "PodFailed"
        for cs in p["status"].get("containerStatuses") or []:
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            cs["ready"], cs["started"] = False, False
            cs["state"] = {"terminated": {"exitCode": run.exit_code, "reason": "Completed" if ok else "Error",
                                          "startedAt": started, "finishedAt": ts}}

    cluster.store.mutate("Pod", namespace, name, change)
    if ok and (owner := controller_uid(pod)):
        _record_outcome(cluster, owner, succeeded=True)
    node = pod["spec"].get("nodeName")
    if node:  # what the run did to the node's health (a reset, say) shows on the node now
        cluster.reconcile({node})


def _deadline_passed(cluster: Cluster, job: dict) -> bool:
    deadline = job["spec"].get("activeDeadlineSeconds")
    if deadline is None:
        return False
    uid = job["metadata"]["uid"]
    if uid not in cluster.job_started:
        cluster.job_started[uid] = time.monotonic()
        cluster.call_later(float(deadline), lambda: None)
    # A scaled deadline never drops below 2 s of real time: at small time scales a few milliseconds would fail
    # healthy checks on scheduling overhead alone.
    return time.monotonic() >= cluster.job_started[uid] + max(cluster.scaled(float(deadline)), 2.0)


def _suspended_condition(job: dict, status: dict) -> None:
    """Suspended=True (JobSuspended) while spec.suspend is set; False (JobResumed) once it is cleared."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    current = next((c for c in conditions if c.get("type") == "Suspended"), None)
    want = bool(job["spec"].get("suspend")) and not job_done(job)
    if want == (current is not None and current.get("status") == "True") or (not want and current is None):
        return
    ts = now_iso()
    fresh = {"type": "Suspended", "status": "True" if want else "False",
             "reason": "JobSuspended" if want else "JobResumed",
             "message": "Job suspended" if want else "Job resumed", "lastProbeTime": ts, "lastTransitionTime": ts}
    status["conditions"] = [c for c in conditions if c.get("type") != "Suspended"] + [fresh]


def _update_status(cluster: Cluster, job: dict) -> None:
    old = job.get("status") or {}
    uid = job["metadata"]["uid"]
    stats = cluster.index.stats(uid)
    status = dict(old)
    status["active"], status["ready"], status["terminating"] = stats.live, stats.ready, stats.terminating
    status["succeeded"] = max(int(old.get("succeeded", 0)), stats.succeeded)
    if cluster.count_deleted_pods:
        status["failed"] = int(old.get("failed", 0)) + cluster.job_new_failures.pop(uid, 0)
    else:  # the old simulator: only pods present and Failed count
        status["failed"] = max(int(old.get("failed", 0)), stats.failed)
    status.setdefault("startTime", now_iso())
    _suspended_condition(job, status)
    if not job_done(job) and not job["spec"].get("suspend"):
        conditions = list(status.get("conditions") or [])
        targets = cluster.job_targets.get(uid, [(0, None)])
        reason = None
        if uid in cluster.job_fail_reason:
            reason = cluster.job_fail_reason[uid]
        elif status["failed"] > int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
            reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif not is_training(job) and _deadline_passed(cluster, job):
            reason = ("DeadlineExceeded", "Job was active longer than specified deadline")
        if reason:
            ts = now_iso()
            conditions += [{"type": t, "status": "True", "reason": reason[0], "message": reason[1],
                            "lastProbeTime": ts, "lastTransitionTime": ts} for t in ("FailureTarget", "Failed")]
            for p in cluster.index.owned(uid):
                if not terminating(p) and not finished(p):
                    _forget(cluster, job, p)
                    delete_pod(cluster, *pod_key(p))
            status["active"] = status["ready"] = 0
        elif is_training(job):
            pass  # runs until deleted
        elif status["succeeded"] >= len(targets) and not stats.live:
            ts = now_iso()
            conditions += [{"type": t, "status": "True", "reason": "CompletionsReached",
                            "message": "Reached expected number of succeeded pods",
                            "lastProbeTime": ts, "lastTransitionTime": ts} for t in ("SuccessCriteriaMet", "Complete")]
            status["completionTime"] = ts
        status["conditions"] = conditions
    if status != old:
        cluster.store.mutate("Job", job["metadata"]["namespace"], job["metadata"]["name"],
                             lambda j: j.__setitem__("status", status))
