"""The Job controller: pods for each Job, their runs, and the Job's status.

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
    HOSTNAME, SIM_NODES, _bind, _candidates, _pending_status, add_default_tolerations, add_extended_resource_tolerations, create_generated, delete_pod,
    finished,
    new_job_pod, pod_key, terminating,
)
from remedy.sim.runners import RunResult, get_runner, spread_times
from remedy.sim.store import deep_copy, now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

DEFAULT_BACKOFF_LIMIT = 6  # Kubernetes' default spec.backoffLimit


def is_training(job: dict) -> bool:
    return (job["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION) == "training"


def job_done(job: dict) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def sync_job(cluster: "Cluster", job: dict, dirty: bool = True) -> None:
    """dirty: the Job or its pods changed since the last pass (else only Node changes brought us here)."""
    uid = job["metadata"]["uid"]
    index = cluster.index
    if not dirty and cluster.job_settled.get(uid):
        return  # all its pods are placed: a Node change cannot give it anything to do
    index.dirty_owners.discard(uid)
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


def _suspend(cluster: "Cluster", job: dict) -> bool:
    """A suspended Job: its active pods are deleted (gracefully) and none are created until it is resumed — the
    Job controller's behaviour, and how Kueue preempts a Job. True: nothing left to do."""
    for pod in cluster.index.owned(job["metadata"]["uid"]):
        if not terminating(pod) and not finished(pod):
            delete_pod(cluster, *pod_key(pod))
    return True


def _template_spec(job: dict) -> dict:
    spec = deep_copy((job["spec"].get("template") or {}).get("spec") or {})
    add_default_tolerations(spec)
    add_extended_resource_tolerations(spec)  # the pods will carry it (admission), so judge nodes with it
    return spec


def _sync_gang(cluster: "Cluster", job: dict) -> bool:
    """Keep `parallelism` pods, one per eligible node; True when nothing is left to place."""
    uid = job["metadata"]["uid"]
    index = cluster.index
    stats = index.stats(uid)
    missing = int(job["spec"].get("parallelism", 1)) - stats.live
    if missing < 0:  # scaled down: remove the surplus, unplaced pods first (as the Job controller does)
        surplus = sorted((p for p in index.owned(uid) if not finished(p) and not terminating(p)),
                         key=lambda p: (bool(p["spec"].get("nodeName")), p["metadata"]["name"]))[:-missing]
        for p in surplus:
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
    for _ in range(max(0, missing)):
        pod = new_job_pod(job)
        if ok:
            _bind(cluster, pod, ok.pop(0))
        else:
            _pending_status(pod, reasons, total)
        create_generated(cluster, pod)
    return False


def _targets(cluster: "Cluster", job: dict, pods: list[dict]) -> list[tuple[int, str | None]]:
    """(completion index, pinned node) for each pod the Job needs; fixed when the Job first syncs."""
    uid = job["metadata"]["uid"]
    if uid in cluster.job_targets:
        return cluster.job_targets[uid]
    template = job["spec"].get("template") or {}
    selector = (template.get("spec") or {}).get("nodeSelector") or {}
    check = (template.get("metadata") or {}).get("labels", {}).get(CHECK_LABEL)
    if check and selector and HOSTNAME not in selector:
        nodes = sorted({(p["metadata"].get("annotations") or {}).get(SIM_NODES) for p in pods} - {None}) \
            or cluster.nodes_matching(selector)
        targets = [(i, n) for i, n in enumerate(nodes)] or [(0, None)]
    else:
        targets = [(i, None) for i in range(int(job["spec"].get("completions") or 1))]
    cluster.job_targets[uid] = targets
    return targets


def _index(pod: dict) -> int:
    return int((pod["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", 0))


def _sync_finite(cluster: "Cluster", job: dict, pods: list[dict]) -> bool:
    targets = _targets(cluster, job, pods)
    status = job.get("status") or {}
    failed = max(int(status.get("failed", 0)), sum(1 for p in pods if p["status"].get("phase") == "Failed"))
    if failed > int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
        return True  # _update_status marks it Failed
    if _deadline_passed(cluster, job):
        return True
    settled = True
    for index, node in targets:
        mine = [p for p in pods if _index(p) == index]
        if any(p["status"].get("phase") == "Succeeded" for p in mine):
            continue
        live = [p for p in mine if not terminating(p) and not finished(p)]
        if not live:
            pod = new_job_pod(job, index=index, node=node)
            settled &= _place_finite(cluster, job, pod, created=False)
        for pod in live:
            if not pod["spec"].get("nodeName"):
                settled &= _place_finite(cluster, job, deep_copy(pod), created=True)
    return settled


def _place_finite(cluster: "Cluster", job: dict, pod: dict, created: bool) -> bool:
    """Bind and start the pod if a node takes it, else leave it Pending; True when it was bound."""
    ok, reasons, total = _candidates(cluster, pod["spec"], set())
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
        create_generated(cluster, pod)
    if ok:
        start_run(cluster, job, pod)
    return bool(ok)


def start_run(cluster: "Cluster", job: dict, pod: dict) -> None:
    """Ask the runner what this pod does, then show its log over time and finish it."""
    ns, name = pod_key(pod)
    node = pod["spec"]["nodeName"]
    check = (pod["metadata"].get("labels") or {}).get(CHECK_LABEL)
    runner = get_runner(check)
    if runner is None:
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


def finish_pod(cluster: "Cluster", namespace: str, name: str, uid: str | None = None) -> None:
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
    node = pod["spec"].get("nodeName")
    if node:  # what the run did to the node's health (a reset, say) shows on the node now
        cluster.reconcile({node})


def _deadline_passed(cluster: "Cluster", job: dict) -> bool:
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


def _update_status(cluster: "Cluster", job: dict) -> None:
    old = job.get("status") or {}
    stats = cluster.index.stats(job["metadata"]["uid"])
    status = dict(old)
    status["active"], status["ready"], status["terminating"] = stats.live, stats.ready, stats.terminating
    status["succeeded"] = max(int(old.get("succeeded", 0)), stats.succeeded)
    status["failed"] = max(int(old.get("failed", 0)), stats.failed)
    status.setdefault("startTime", now_iso())
    _suspended_condition(job, status)
    if not is_training(job) and not job_done(job) and not job["spec"].get("suspend"):
        conditions = list(status.get("conditions") or [])
        targets = cluster.job_targets.get(job["metadata"]["uid"], [(0, None)])
        reason = None
        if status["failed"] > int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
            reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif _deadline_passed(cluster, job):
            reason = ("DeadlineExceeded", "Job was active longer than specified deadline")
        if reason:
            ts = now_iso()
            conditions += [{"type": t, "status": "True", "reason": reason[0], "message": reason[1],
                            "lastProbeTime": ts, "lastTransitionTime": ts} for t in ("FailureTarget", "Failed")]
            for p in cluster.index.owned(job["metadata"]["uid"]):
                if not terminating(p) and not finished(p):
                    delete_pod(cluster, *pod_key(p))
            status["active"] = status["ready"] = 0
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
