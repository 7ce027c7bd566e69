"""Training-workload CRDs in the simulator: JobSet, Kubeflow PyTorchJob and Kueue's Workload, with the minimal
controllers that make their API shape behave (remedy.adapters.workloads drives them).

Served paths (namespaced, get / list / create / update / patch / delete, `status` subresource):
    /apis/jobset.x-k8s.io/v1alpha2/namespaces/NS/jobsets[/NAME]
    /apis/kubeflow.org/v1/namespaces/NS/pytorchjobs[/NAME]
    /apis/kueue.x-k8s.io/v1beta1/namespaces/NS/workloads[/NAME]
Custom resources take JSON merge and JSON patches only: a strategic merge patch is 415, as on a real server
(apiextensions-apiserver's customresource_handler.go serves no strategic merge for CRs).

What each controller does here, and the source it follows:
- JobSet (kubernetes-sigs/jobset, api/jobset/v1alpha2/jobset_types.go, pkg/controllers/jobset_controller.go): one
  child batch/v1 Job `<jobset>-<replicatedJob>-<index>` per replica, labelled `jobset.sigs.k8s.io/jobset-name`,
  `replicatedjob-name`, `job-index`, `restart-attempt` (pods too); `spec.suspend` is passed down to every child Job
  (the Job controller then deletes their pods); a failed child Job restarts the whole set — every child Job is
  deleted and created again, `status.restarts` + 1 — until `failurePolicy.maxRestarts` (default 0) is used up, then
  the JobSet is `Failed`. `spec.replicatedJobs` is immutable (pkg/webhooks/jobset_webhook.go ValidateUpdate: only
  the pod template's labels, annotations, nodeSelector, tolerations and schedulingGates may change while the JobSet
  is or becomes suspended); the webhook's denial is a 403. `cluster.jobset_elastic = True` plays a controller with
  elastic JobSets (KEP-463, keps/463-ElasticJobsets): `replicas` may change and a scale-down deletes the highest
  job indexes. The child Jobs run as the simulator's gang (annotation `remedy.io/sim-workload: training`).
- PyTorchJob (kubeflow/training-operator, pkg/apis/kubeflow.org/v1 pytorch_types.go, common_types.go): pods
  `<job>-master-0`, `<job>-worker-<i>` straight from `pytorchReplicaSpecs`, labelled
  `training.kubeflow.org/job-name`, `replica-type` (lower case), `replica-index`; a missing pod is created again
  under the same name once the old one is gone; `runPolicy.suspend` deletes every pod and creates none
  (condition `Suspended`); `Worker.replicas` is the scale subresource's spec path, so a change adds or removes the
  highest-index workers. status.replicaStatuses.<type>.active/selector as the operator reports them.
- Kueue (kubernetes-sigs/kueue, apis/kueue/v1beta1/workload_types.go, pkg/controller/jobframework/reconciler.go):
  an object labelled `kueue.x-k8s.io/queue-name` gets a Workload `<kind>-<name>-<hash>` (label
  `kueue.x-k8s.io/job-uid`, owned by the object). Quota is not modelled: an active Workload is admitted at once.
  As Kueue does, an admitted Workload's job is unsuspended (a `spec.suspend: true` written by anyone else is undone)
  and a Workload with `spec.active: false` is evicted (condition Evicted, reason `Deactivated`) and its job kept
  suspended until it is active again.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING

from remedy.sim.controller import (
    _bind,
    _candidates,
    _pending_status,
    add_default_tolerations,
    add_extended_resource_tolerations,
    delete_pod,
    finished,
    terminating,
)
from remedy.sim.objects import WORKLOAD_ANNOTATION, owner_ref
from remedy.sim.store import ApiError, deep_copy, now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PYTORCH_API = "kubeflow.org/v1"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
KINDS = ("JobSet", "PyTorchJob", "Workload")
API_OF = {"JobSet": JOBSET_API, "PyTorchJob": PYTORCH_API, "Workload": KUEUE_API}

# jobset_types.go
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
RJOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
# training-operator common_types.go
TO_JOB_NAME = "training.kubeflow.org/job-name"
TO_REPLICA_TYPE = "training.kubeflow.org/replica-type"
TO_REPLICA_INDEX = "training.kubeflow.org/replica-index"
TO_OPERATOR = "training.kubeflow.org/operator-name"
TO_JOB_ROLE = "training.kubeflow.org/job-role"
# kueue constants
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
JOB_UID = "kueue.x-k8s.io/job-uid"


def _cond(conds: list[dict], type_: str, status: str, reason: str, message: str) -> bool:
    """Set a metav1.Condition-style entry; True when it changed."""
    for c in conds:
        if c.get("type") == type_:
            if c.get("status") == status and c.get("reason") == reason:
                return False
            if c.get("status") != status:
                c["lastTransitionTime"] = now_iso()
            c.update(status=status, reason=reason, message=message)
            return True
    conds.append({"type": type_, "status": status, "reason": reason, "message": message,
                  "lastTransitionTime": now_iso()})
    return True


def _is_true(obj: dict, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _set_status(cluster: Cluster, kind: str, obj: dict, status: dict) -> None:
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    stored = cluster.store.get(kind, ns, name)
    if stored is not None and status != (stored.get("status") or {}):
        cluster.store.mutate(kind, ns, name, lambda o: o.__setitem__("status", status))


# ---------------------------------------------------------------- API hooks (remedy.sim.api)
def check_patch_type(kind: str, content_type: str) -> None:
    if kind in KINDS and content_type == "application/strategic-merge-patch+json":
        raise ApiError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media types include: "
                       "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")


def check_update(cluster: Cluster, kind: str, current: dict, new: dict) -> None:
    """The JobSet validating webhook (pkg/webhooks/jobset_webhook.go ValidateUpdate): replicatedJobs are
    immutable but for the pod template fields Kueue/DWS set while the JobSet is (or becomes) suspended; with
    elastic JobSets (KEP-463) `replicas` may change too."""
    if kind != "JobSet":
        return
    suspended = bool((current.get("spec") or {}).get("suspend")) or bool((new.get("spec") or {}).get("suspend"))
    elastic = bool(cluster.jobset_elastic)
    for rj in (new.get("spec") or {}).get("replicatedJobs") or []:
        if elastic and int(rj.get("replicas", 1)) < 1:
            _deny("spec.replicatedJobs.replicas: Invalid value: must be at least 1")
    if _immutable_view(current, suspended, elastic) != _immutable_view(new, suspended, elastic):
        _deny('spec.replicatedJobs: Invalid value: "object": field is immutable')


def _immutable_view(obj: dict, suspended: bool, elastic: bool) -> list:
    out = deep_copy((obj.get("spec") or {}).get("replicatedJobs") or [])
    for rj in out:
        pod = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
        if suspended:
            for key in ("labels", "annotations"):
                (pod.get("metadata") or {}).pop(key, None)
            for key in ("nodeSelector", "tolerations", "schedulingGates"):
                (pod.get("spec") or {}).pop(key, None)
        if elastic:
            rj.pop("replicas", None)
    return out


def _deny(message: str) -> None:
    # controller-runtime's admission.Denied is a 403; the API server prefixes the webhook's name
    # (apiserver pkg/admission/plugin/webhook/errors/statuserror.go ToStatusErr)
    raise ApiError(403, "Forbidden", f'admission webhook "vjobset.kb.io" denied the request: {message}')


def owned_by(cluster: Cluster, kind: str, uid: str) -> list[dict]:
    return [o for o in cluster.store.objects(kind)
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]


def collect(cluster: Cluster, obj: dict, grace: int | None = None) -> None:
    """Background garbage collection after a custom resource is deleted: its child Jobs (with their pods), pods
    and Kueue Workload go too (custom resources default to background propagation)."""
    uid = obj["metadata"]["uid"]
    for job in owned_by(cluster, "Job", uid):
        _delete_job(cluster, job, grace)
    for pod in cluster.index.owned(uid):
        if not terminating(pod):
            delete_pod(cluster, pod["metadata"]["namespace"], pod["metadata"]["name"], grace)
    for wl in owned_by(cluster, "Workload", uid):
        cluster.store.remove("Workload", wl["metadata"]["namespace"], wl["metadata"]["name"])


def _delete_job(cluster: Cluster, job: dict, grace: int | None = None) -> None:
    """Delete a Job with propagationPolicy Background: its pods terminate gracefully."""
    uid = job["metadata"]["uid"]
    for pod in cluster.index.owned(uid):
        if not terminating(pod):
            delete_pod(cluster, pod["metadata"]["namespace"], pod["metadata"]["name"], grace)
    cluster.store.remove("Job", job["metadata"]["namespace"], job["metadata"]["name"])
    cluster.job_targets.pop(uid, None)


# ---------------------------------------------------------------- the loop
def _queued(cluster: Cluster) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the Jobs, JobSets and PyTorchJobs labelled for Kueue, kept current from the
    store's change feed, so a pass over a cluster with thousands of check Jobs and no Kueue costs nothing."""
    index = getattr(cluster, "_kueue_queued", None)
    if index is None:
        index = {(k, o["metadata"].get("namespace", ""), o["metadata"]["name"]) for k in ("Job", "JobSet", "PyTorchJob")
                 for o in cluster.store.objects(k) if (o["metadata"].get("labels") or {}).get(QUEUE_NAME)}

        def on_change(verb: str, kind: str, namespace: str, obj: dict | None) -> None:
            if kind in ("Job", "JobSet", "PyTorchJob") and obj is not None:
                key = (kind, namespace, obj["metadata"]["name"])
                if verb != "DELETED" and (obj["metadata"].get("labels") or {}).get(QUEUE_NAME):
                    index.add(key)
                else:
                    index.discard(key)

        cluster.store.on_change.append(on_change)
        cluster._kueue_queued = index  # type: ignore[attr-defined]
    return index


def sync_workloads(cluster: Cluster) -> None:
    """Run after the Job controller on every reconcile pass; cheap when no such object exists."""
    changed = False
    for kind, ns, name in sorted(_queued(cluster)):
        obj = cluster.store.get(kind, ns, name)
        if obj is not None:
            changed |= _sync_kueue(cluster, kind, obj)
    for js in cluster.store.objects("JobSet"):
        changed |= _sync_jobset(cluster, cluster.store.get("JobSet", js["metadata"]["namespace"],
                                                           js["metadata"]["name"]) or js)
    for pj in cluster.store.objects("PyTorchJob"):
        changed |= _sync_pytorchjob(cluster, pj)
    if changed:
        cluster.reconcile(set())  # inside a pass: asks for one more (the Job controller acts on new child Jobs)


# ---------------------------------------------------------------- JobSet
def _child_name(js: dict, rj: dict, index: int) -> str:
    return f"{js['metadata']['name']}-{rj['name']}-{index}"


def _child_job(cluster: Cluster, js: dict, rj: dict, index: int, global_index: int) -> dict:
    from remedy.sim.admission import default, fix_job_selector

    meta = js["metadata"]
    template = deep_copy(rj.get("template") or {})
    labels = {JOBSET_NAME: meta["name"], RJOB_NAME: rj["name"], RJOB_REPLICAS: str(rj.get("replicas", 1)),
              JOB_INDEX: str(index), JOB_GLOBAL_INDEX: str(global_index),
              RESTART_ATTEMPT: str((js.get("status") or {}).get("restarts", 0))}
    spec = template.get("spec") or {}
    spec["suspend"] = bool(js["spec"].get("suspend"))
    spec.setdefault("completionMode", "Indexed")  # the JobSet webhook's default
    pod_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **labels}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": _child_name(js, rj, index), "namespace": meta["namespace"],
                     "labels": {**((template.get("metadata") or {}).get("labels") or {}), **labels},
                     # the simulator's gang: runs until deleted (real training containers do not exit either)
                     "annotations": {**((template.get("metadata") or {}).get("annotations") or {}), **labels,
                                     WORKLOAD_ANNOTATION: "training"},
                     "ownerReferences": [owner_ref("JobSet", meta["name"], meta["uid"], JOBSET_API)]},
        "spec": spec,
    }
    default(cluster, "Job", job)
    job["metadata"]["uid"], job["metadata"]["generation"] = str(uuid.uuid4()), 1
    fix_job_selector(job)
    return job


def _sync_jobset(cluster: Cluster, js: dict) -> bool:
    meta, spec = js["metadata"], js.get("spec") or {}
    status = deep_copy(js.get("status") or {})
    status.setdefault("restarts", 0)
    conds = status.setdefault("conditions", [])
    if status.get("terminalState"):
        return False
    children = {j["metadata"]["name"]: j for j in owned_by(cluster, "Job", meta["uid"])}
    changed = False
    failed = [j for j in children.values() if _is_true(j, "Failed")]
    if failed:
        max_restarts = int((spec.get("failurePolicy") or {}).get("maxRestarts", 0))
        if status["restarts"] >= max_restarts:
            _cond(conds, "Failed", "True", "FailedJobs",
                  f"jobset failed due to reaching max number of restarts ({max_restarts})")
            status["terminalState"] = "Failed"
            for job in children.values():  # the set is over: its remaining child Jobs go
                _delete_job(cluster, job)
            _set_status(cluster, "JobSet", js, status)
            return True
        # RestartJobSet: recreate every child Job, counted against maxRestarts
        for job in children.values():
            _delete_job(cluster, job)
        status["restarts"] += 1
        status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax", 0)) + 1
        children, changed = {}, True
        js = dict(js, status=status)
    suspend = bool(spec.get("suspend"))
    wanted: set[str] = set()
    global_index = 0
    for rj in spec.get("replicatedJobs") or []:
        for i in range(int(rj.get("replicas", 1))):
            name = _child_name(js, rj, i)
            wanted.add(name)
            job = children.get(name)
            if job is None:
                cluster.store.create("Job", _child_job(cluster, js, rj, i, global_index))
                changed = True
            elif bool(job["spec"].get("suspend")) != suspend:
                cluster.store.mutate("Job", meta["namespace"], name,
                                     lambda j: j["spec"].__setitem__("suspend", suspend))
                changed = True
            global_index += 1
    for name, job in children.items():  # elastic scale-down: the highest indexes go
        if name not in wanted:
            _delete_job(cluster, job)
            changed = True
    children = {j["metadata"]["name"]: j for j in owned_by(cluster, "Job", meta["uid"])}
    rstatus = []
    for rj in spec.get("replicatedJobs") or []:
        mine = [j for j in children.values() if (j["metadata"].get("labels") or {}).get(RJOB_NAME) == rj["name"]]
        want = int((rj.get("template") or {}).get("spec", {}).get("parallelism") or 1)
        st = [j.get("status") or {} for j in mine]
        rstatus.append({
            "name": rj["name"],
            "ready": sum(1 for s in st if int(s.get("ready") or 0) + int(s.get("succeeded") or 0) >= want),
            "succeeded": sum(1 for j in mine if _is_true(j, "Complete")),
            "failed": sum(1 for j in mine if _is_true(j, "Failed")),
            "active": sum(1 for s in st if int(s.get("active") or 0) > 0),
            "suspended": sum(1 for j in mine if j["spec"].get("suspend")),
        })
    status["replicatedJobsStatus"] = rstatus
    if suspend:
        _cond(conds, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
    elif any(c.get("type") == "Suspended" for c in conds):
        _cond(conds, "Suspended", "False", "ResumeJobs", "jobset is resumed")
    _set_status(cluster, "JobSet", js, status)
    return changed


# ---------------------------------------------------------------- PyTorchJob
def _replica_types(pj: dict) -> list[tuple[str, dict]]:
    specs = (pj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return [(t, specs[t]) for t in ("Master", "Worker") if t in specs] + \
        [(t, s) for t, s in specs.items() if t not in ("Master", "Worker")]


def _pytorch_pod(pj: dict, rtype: str, rspec: dict, index: int) -> dict:
    meta = pj["metadata"]
    template = deep_copy(rspec.get("template") or {})
    labels = {**((template.get("metadata") or {}).get("labels") or {}),
              TO_OPERATOR: "pytorchjob-controller", TO_JOB_NAME: meta["name"],
              TO_REPLICA_TYPE: rtype.lower(), TO_REPLICA_INDEX: str(index)}
    if rtype == "Master":
        labels[TO_JOB_ROLE] = "master"
    spec = template.get("spec") or {}
    # the replica's restartPolicy overrides the template's (ExitCode runs as Never in the pod)
    policy = rspec.get("restartPolicy") or "OnFailure"
    spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
    spec.setdefault("terminationGracePeriodSeconds", 30)
    add_default_tolerations(spec)
    add_extended_resource_tolerations(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-{rtype.lower()}-{index}", "namespace": meta["namespace"],
                         "labels": labels, "annotations": dict((template.get("metadata") or {}).get("annotations")
                                                               or {}),
                         "ownerReferences": [owner_ref("PyTorchJob", meta["name"], meta["uid"], PYTORCH_API)]},
            "spec": spec, "status": {"phase": "Pending"}}


def _sync_pytorchjob(cluster: Cluster, pj: dict) -> bool:
    from remedy.sim.admission import resolve_priority

    meta, spec = pj["metadata"], pj.get("spec") or {}
    ns, uid = meta["namespace"], meta["uid"]
    status = deep_copy(pj.get("status") or {})
    conds = status.setdefault("conditions", [])
    if _is_true(pj, "Succeeded") or _is_true(pj, "Failed"):
        return False
    suspend = bool((spec.get("runPolicy") or {}).get("suspend"))
    pods = {p["metadata"]["name"]: p for p in cluster.index.owned(uid)}
    changed = False
    statuses: dict[str, dict] = {}
    for rtype, rspec in _replica_types(pj):
        replicas = int(rspec.get("replicas", 1))
        prefix = f"{meta['name']}-{rtype.lower()}-"
        mine = {n: p for n, p in pods.items() if n.startswith(prefix)}
        for name, pod in mine.items():
            index = int(name[len(prefix):]) if name[len(prefix):].isdigit() else replicas
            if (suspend or index >= replicas) and not terminating(pod) and not finished(pod):
                delete_pod(cluster, ns, name)  # suspended, or scaled down: the highest indexes go
                changed = True
        if not suspend:
            for index in range(replicas):
                name = f"{prefix}{index}"
                pod = mine.get(name)
                if pod is None:  # missing (deleted, evicted and gone): created again under its name
                    pod = _pytorch_pod(pj, rtype, rspec, index)
                    try:
                        resolve_priority(cluster, pod["spec"])
                    except ValueError:
                        pass
                    _place(cluster, pod, uid, rtype)
                    cluster.store.create("Pod", pod)
                    changed = True
                elif not pod["spec"].get("nodeName") and not terminating(pod):
                    copy = deep_copy(pod)
                    if _place(cluster, copy, uid, rtype):
                        cluster.store.put("Pod", copy)
                        changed = True
        live = [p for p in cluster.index.owned(uid)
                if p["metadata"]["name"].startswith(prefix) and not terminating(p) and not finished(p)]
        statuses[rtype] = {
            "active": sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running"),
            "succeeded": sum(1 for p in cluster.index.owned(uid) if p["metadata"]["name"].startswith(prefix)
                             and (p.get("status") or {}).get("phase") == "Succeeded"),
            "failed": sum(1 for p in cluster.index.owned(uid) if p["metadata"]["name"].startswith(prefix)
                          and (p.get("status") or {}).get("phase") == "Failed"),
            "selector": f"{TO_JOB_NAME}={meta['name']},{TO_OPERATOR}=pytorchjob-controller,"
                        f"{TO_REPLICA_TYPE}={rtype.lower()}",
        }
    status["replicaStatuses"] = statuses
    status.setdefault("startTime", now_iso())
    _cond(conds, "Created", "True", "PyTorchJobCreated", f"PyTorchJob {meta['name']} is created.")
    if suspend:
        _cond(conds, "Suspended", "True", "PyTorchJobSuspended", f"PyTorchJob {meta['name']} is suspended.")
        _cond(conds, "Running", "False", "PyTorchJobSuspended", f"PyTorchJob {meta['name']} is suspended.")
    else:
        if any(c.get("type") == "Suspended" for c in conds):
            _cond(conds, "Suspended", "False", "PyTorchJobResumed", f"PyTorchJob {meta['name']} is resumed.")
        want = sum(int(r.get("replicas", 1)) for _, r in _replica_types(pj))
        running = sum(s["active"] for s in statuses.values())
        if running >= want:
            _cond(conds, "Running", "True", "PyTorchJobRunning", f"PyTorchJob {meta['name']} is running.")
    _set_status(cluster, "PyTorchJob", pj, status)
    return changed


def _place(cluster: Cluster, pod: dict, uid: str, rtype: str) -> bool:
    """Bind the pod if a node takes it (one pod of the job per node), else leave it Pending with why."""
    occupied = {p["spec"].get("nodeName") for p in cluster.index.owned(uid)
                if p["spec"].get("nodeName") and not finished(p)}
    ok, reasons, total = _candidates(cluster, pod["spec"], occupied, cache_key=f"{uid}/{rtype}")
    if ok:
        _bind(cluster, pod, ok[0])
        return True
    if (pod.get("status", {}).get("conditions") or [{}])[0].get("reason") == "Unschedulable":
        return False
    _pending_status(pod, reasons, total)
    return True


# ---------------------------------------------------------------- Kueue
def workload_name(kind: str, name: str, uid: str) -> str:
    """jobframework.GetWorkloadNameForOwnerWithGVK: <kind>-<name>-<first 5 hex of a hash of name, uid, kind>."""
    digest = hashlib.sha1(f"{name}\0{uid}\0{kind}".encode()).hexdigest()[:5]
    return f"{kind.lower()}-{name}-{digest}"


def _suspend_path(kind: str, obj: dict) -> bool:
    spec = obj.get("spec") or {}
    return bool((spec.get("runPolicy") or {}).get("suspend")) if kind == "PyTorchJob" else bool(spec.get("suspend"))


def _set_suspend(cluster: Cluster, kind: str, obj: dict, value: bool) -> None:
    def change(o: dict) -> None:
        if kind == "PyTorchJob":
            o["spec"].setdefault("runPolicy", {})["suspend"] = value
        else:
            o["spec"]["suspend"] = value

    cluster.store.mutate(kind, obj["metadata"]["namespace"], obj["metadata"]["name"], change)


def _sync_kueue(cluster: Cluster, kind: str, obj: dict) -> bool:
    meta = obj["metadata"]
    ns, uid = meta["namespace"], meta["uid"]
    wl = next(iter(owned_by(cluster, "Workload", uid)), None)
    changed = False
    if wl is None:
        wl = cluster.store.create("Workload", {
            "apiVersion": KUEUE_API, "kind": "Workload",
            "metadata": {"name": workload_name(kind, meta["name"], uid), "namespace": ns,
                         "labels": {JOB_UID: uid, QUEUE_NAME: meta["labels"][QUEUE_NAME]},
                         "ownerReferences": [owner_ref(kind, meta["name"], uid, API_OF.get(kind, "batch/v1"))],
                         "generation": 1},
            "spec": {"active": True, "queueName": meta["labels"][QUEUE_NAME], "podSets": []},
            "status": {},
        })
        changed = True
    active = (wl.get("spec") or {}).get("active", True) is not False
    status = deep_copy(wl.get("status") or {})
    conds = status.setdefault("conditions", [])
    if active:  # no quota modelled: an active Workload is admitted at once
        _cond(conds, "QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue")
        _cond(conds, "Admitted", "True", "Admitted", "The workload is admitted")
        if any(c.get("type") == "Evicted" and c.get("status") == "True" for c in conds):
            _cond(conds, "Evicted", "False", "Reactivated", "The workload was reactivated")
        if _suspend_path(kind, obj):  # reconciler step: admitted and suspended → start the job
            _set_suspend(cluster, kind, obj, False)
            changed = True
    else:
        _cond(conds, "Evicted", "True", "Deactivated", "The workload is deactivated")
        _cond(conds, "QuotaReserved", "False", "Pending", "The workload is deactivated")
        _cond(conds, "Admitted", "False", "NoReservation", "The workload has no reservation")
        if not _suspend_path(kind, obj):  # evicted → stop the job
            _set_suspend(cluster, kind, obj, True)
            changed = True
    _set_status(cluster, "Workload", wl, status)
    return changed


# ---------------------------------------------------------------- the training workload as a CRD
def add_training_workload(cluster: Cluster, kind: str, nodes: int) -> dict:
    """training/llm-pretrain as a JobSet (one single-pod Job per node, the batch Job's pod template and its
    podFailurePolicy, failurePolicy.maxRestarts 3) or an elastic PyTorchJob (`nodes` workers, elasticPolicy
    minReplicas 3/4 of them), as if created through the API; its controller here starts the gang."""
    from remedy.sim.objects import make_training_job

    if kind not in ("JobSet", "PyTorchJob"):
        raise ValueError(f"workload must be Job, JobSet or PyTorchJob, got {kind!r}")
    job = make_training_job(nodes)
    pod = deep_copy(job["spec"]["template"])
    meta = {"name": job["metadata"]["name"], "namespace": job["metadata"]["namespace"],
            "labels": dict(job["metadata"]["labels"]), "uid": str(uuid.uuid4()), "generation": 1}
    if kind == "JobSet":
        obj = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": meta, "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "replicatedJobs": [{"name": "workers", "replicas": nodes, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 6,
                "podFailurePolicy": deep_copy(job["spec"]["podFailurePolicy"]), "template": pod}}}]}}
    else:
        pod["spec"]["restartPolicy"] = "OnFailure"
        obj = {"apiVersion": PYTORCH_API, "kind": "PyTorchJob", "metadata": meta, "spec": {
            "runPolicy": {"backoffLimit": 6},
            "elasticPolicy": {"minReplicas": max(1, nodes * 3 // 4), "maxReplicas": nodes, "rdzvBackend": "c10d"},
            "pytorchReplicaSpecs": {"Worker": {"replicas": nodes, "restartPolicy": "OnFailure", "template": pod}}}}
    return cluster.store.create(kind, obj)
