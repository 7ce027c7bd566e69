"""The simulator's control loop, run after every mutation and on timers.

It plays the parts of the real control plane a remediation touches: the node lifecycle controller
(Ready condition, `node.kubernetes.io/unreachable` / `unschedulable` taints, NoExecute evictions), the
kubelet (pods finishing their grace period), the scheduler (binding pods to eligible nodes) and the Job
controller (pods per Job, status counts, backoff). Pods a controller owns are found by ownerReferences.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from remedy.sim import podgc
from remedy.sim.index import gpu_request
from remedy.sim.objects import owner_ref, random_suffix
from remedy.sim.store import deep_copy, now_iso, parse_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"  # non-graceful node shutdown: PodGC force-deletes
CONTROLLER_TAINTS = (UNREACHABLE, UNSCHEDULABLE)
DEFAULT_TOLERATION_SECONDS = 300  # the DefaultTolerationSeconds admission plugin's value
HOSTNAME = "kubernetes.io/hostname"
SIM_NODES = "remedy.io/sim-node"  # annotation on a per-node check pod: the node it must run on


# ---------------------------------------------------------------- helpers
def pod_key(pod: dict) -> tuple[str, str]:
    return pod["metadata"].get("namespace", ""), pod["metadata"]["name"]


def controller_kind(obj: dict) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind")
    return None


def controller_uid(obj: dict) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def finished(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def pod_ready(pod: dict) -> bool:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def tolerates(tolerations: list[dict], taint: dict) -> dict | None:
    """The toleration that tolerates `taint`, if any (Kubernetes' ToleratesTaint)."""
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if op == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return t
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return t
    return None


def _node_selector_requirement(expr: dict, labels: dict) -> bool:
    """One NodeSelectorRequirement (k8s.io/component-helpers/scheduling/corev1/nodeaffinity): In, NotIn, Exists,
    DoesNotExist, Gt, Lt."""
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def matches_node_affinity(spec: dict, labels: dict) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution: the terms are ORed, each term's expressions ANDed; no
    required affinity matches every node."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(all(_node_selector_requirement(e, labels) for e in term.get("matchExpressions") or [])
               and not term.get("matchFields")
               or (term.get("matchFields") and all(_node_selector_requirement(
                   e, {"metadata.name": labels.get(HOSTNAME, "")}) for e in term["matchFields"]))
               for term in required.get("nodeSelectorTerms") or [])


def affinity_hosts(spec: dict) -> list[str] | None:
    """The hosts a pod is pinned to: nodeSelector kubernetes.io/hostname, or required node affinity whose only
    term is `kubernetes.io/hostname In [...]` (what gpu-remedy's node Jobs carry); None: not pinned that way.
    Lets the scheduler look at those nodes only (a 12,500-node cluster is not scanned per check pod)."""
    pinned = (spec.get("nodeSelector") or {}).get(HOSTNAME)
    if pinned is not None:
        return [pinned]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if len(terms) == 1 and not terms[0].get("matchFields"):
        exprs = terms[0].get("matchExpressions") or []
        hosts = [e for e in exprs if e.get("key") == HOSTNAME and e.get("operator") == "In"]
        if hosts:
            return list(hosts[0].get("values") or [])
    return None


def anti_affinity_conflict(cluster: Cluster, spec: dict, namespace: str, node: dict) -> bool:
    """Required pod anti-affinity: does a live pod matching a term's labelSelector (in the pod's namespace unless
    the term names others) already run in the same topology domain as `node`? (kube-scheduler's
    InterPodAffinity plugin; only existing pods are weighed, as there.)"""
    from remedy.domain.selectors import selects as label_match

    terms = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or []
    if not terms:
        return False
    for term in terms:
        key = term.get("topologyKey") or HOSTNAME
        domain = (node["metadata"].get("labels") or {}).get(key)
        if domain is None:
            continue
        namespaces = set(term.get("namespaces") or [namespace])
        if key == HOSTNAME:
            hosts = [node["metadata"]["name"]]
        else:
            hosts = [n["metadata"]["name"] for n in cluster.store.objects("Node")
                     if (n["metadata"].get("labels") or {}).get(key) == domain]
        for host in hosts:
            for pod in cluster.index.on_node(host):
                if finished(pod) or pod["metadata"].get("namespace") not in namespaces:
                    continue
                if label_match(term.get("labelSelector") or {}, pod["metadata"].get("labels") or {}):
                    return True
    return False


def unschedulable_reason(node: dict, spec: dict, ready: bool) -> str | None:
    """Why a pod with this spec cannot go on `node` (None: it can), as the scheduler words it."""
    labels = node["metadata"].get("labels", {})
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return "didn't match Pod's node affinity/selector"
    if not matches_node_affinity(spec, labels):
        return "didn't match Pod's node affinity/selector"
    tolerations = spec.get("tolerations") or []
    if node.get("spec", {}).get("unschedulable") and not tolerates(
            tolerations, {"key": UNSCHEDULABLE, "effect": "NoSchedule"}):
        return "were unschedulable"
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    if not ready:
        return "were not ready"
    return None


def _set_condition(conds: list[dict], type_: str, status: str, reason: str | None = None) -> None:
    ts = now_iso()
    for c in conds:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["status"], c["lastTransitionTime"] = status, ts
            if reason:
                c["reason"] = reason
            return
    cond = {"type": type_, "status": status, "lastTransitionTime": ts}
    if reason:
        cond["reason"] = reason
    conds.append(cond)


# ---------------------------------------------------------------- the loop
def reconcile(cluster: Cluster, nodes: set[str] | None) -> None:
    store, index = cluster.store, cluster.index
    names = cluster.node_names() if nodes is None else [n for n in nodes if store.get("Node", "", n)]
    for name in names:
        _sync_node(cluster, name)
    _finish_deletions(cluster)
    _noexecute_evictions(cluster)
    for pod in list(index.unbound_bare.values()):
        _schedule_bare_pod(cluster, pod)
    from remedy.sim.jobs import job_done, sync_job

    nodes_changed, index.nodes_changed = index.nodes_changed, False
    from remedy.sim.checkpoints import sync_checkpoints

    for job in store.objects("Job"):
        uid = job["metadata"]["uid"]
        sync_checkpoints(cluster, job)
        dirty = uid in index.dirty_owners or uid in cluster.job_started or uid in cluster.job_new_failures
        if dirty or (nodes_changed and not job_done(job)):
            sync_job(cluster, job, dirty)
    index.dirty_owners.clear()
    from remedy.sim.crds import sync_workloads

    sync_workloads(cluster)  # JobSet, PyTorchJob and Kueue's Workload
    from remedy.sim.disruption import sync_budgets

    sync_budgets(cluster)


def _sync_node(cluster: Cluster, name: str) -> None:
    """Ready condition and the node lifecycle controller's taints follow the hidden health."""
    store = cluster.store
    node = store.get("Node", "", name)
    ready = cluster.node_ready(name)
    conds = node.get("status", {}).get("conditions") or []
    was_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    want = []
    if not ready:
        want += [{"key": UNREACHABLE, "effect": "NoSchedule"}, {"key": UNREACHABLE, "effect": "NoExecute"}]
    if node.get("spec", {}).get("unschedulable"):
        want.append({"key": UNSCHEDULABLE, "effect": "NoSchedule"})
    taints = node.get("spec", {}).get("taints") or []
    have = [(t.get("key"), t.get("effect")) for t in taints if t.get("key") in CONTROLLER_TAINTS]
    want_keys = [(t["key"], t["effect"]) for t in want]
    # the device plugin takes unhealthy GPUs (off the bus, or a non-application XID) out of allocatable
    health = cluster.health_of(name)
    want_gpus = str(sum(1 for g in health.gpus if not g.fallen_off_bus and not g.pending_xids))
    allocatable = node.get("status", {}).get("allocatable") or {}
    gpus_ok = "nvidia.com/gpu" not in allocatable or allocatable["nvidia.com/gpu"] == want_gpus
    if was_ready == ready and sorted(have) == sorted(want_keys) and gpus_ok:
        return

    def change(n: dict) -> None:
        if not gpus_ok:
            n["status"]["allocatable"]["nvidia.com/gpu"] = want_gpus
        if was_ready != ready:
            from remedy.sim.objects import node_conditions

            ts = now_iso()
            fresh = {c["type"]: c for c in node_conditions(ready, ts)}
            n["status"]["conditions"] = [fresh.get(c.get("type"), c) for c in n["status"].get("conditions", [])]
        kept = [t for t in n["spec"].get("taints") or [] if t.get("key") not in CONTROLLER_TAINTS
                or (t.get("key"), t.get("effect")) in want_keys]
        for t in want:
            if (t["key"], t["effect"]) not in [(k.get("key"), k.get("effect")) for k in kept]:
                kept.append(dict(t, timeAdded=now_iso()))
                if t["effect"] == "NoExecute":
                    cluster.noexecute_since[(name, t["key"])] = time.monotonic()
        if kept:
            n["spec"]["taints"] = kept
        else:
            n["spec"].pop("taints", None)

    store.mutate("Node", "", name, change)
    if was_ready != ready:
        status = "NodeReady" if ready else "NodeNotReady"
        cluster.record_event(name, status, f"Node {name} status is now: {status}",
                             "Normal" if ready else "Warning", "node-controller")
        for pod in cluster.index.on_node(name):  # the node controller marks its pods not ready
            if not finished(pod) and pod_ready(pod) != ready:
                store.mutate("Pod", *pod_key(pod), lambda p: _mark_ready(p, ready))


def _mark_ready(pod: dict, ready: bool) -> None:
    conds = pod.setdefault("status", {}).setdefault("conditions", [])
    _set_condition(conds, "Ready", "True" if ready else "False")
    _set_condition(conds, "ContainersReady", "True" if ready else "False")
    for cs in pod["status"].get("containerStatuses") or []:
        cs["ready"] = ready


# ---------------------------------------------------------------- deletion
# DisruptionTarget condition reasons and messages, as the components that set them word them (v1.36):
# pkg/registry/core/pod/storage/eviction.go, pkg/controller/tainteviction/taint_eviction.go,
# pkg/controller/podgc/gc_controller.go. A Job's podFailurePolicy can ignore failures that carry it.
BY_EVICTION_API = ("EvictionByEvictionAPI", "Eviction API: evicting")
BY_TAINT_MANAGER = ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
BY_POD_GC = ("DeletionByPodGC", "PodGC: node no longer exists")


def delete_pod(cluster: Cluster, namespace: str, name: str, grace: int | None = None,
               disruption: tuple[str, str] | None = None) -> dict:
    """Graceful pod deletion: set deletionTimestamp; the pod is gone after its (scaled) grace period.
    Unbound or finished pods and grace 0 go at once. `disruption` (reason, message): first add the
    DisruptionTarget condition, as the eviction subresource, the taint manager and PodGC do. Returns the pod as
    the API returns it."""
    store = cluster.store
    pod = store.require("Pod", namespace, name)
    if disruption is not None and not terminating(pod):
        pod = store.mutate("Pod", namespace, name, lambda p: _disruption_target(p, *disruption))
    if grace is None:
        grace = int(pod.get("spec", {}).get("terminationGracePeriodSeconds", 30))
    if grace <= 0 or not pod.get("spec", {}).get("nodeName") or finished(pod):
        _remove_pod(cluster, namespace, name)
        return pod
    if terminating(pod) and pod["metadata"].get("deletionGracePeriodSeconds", grace) <= grace:
        return pod  # already going, at least as fast

    def change(p: dict) -> None:
        # staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go (BeforeDelete): deletionTimestamp is when the
        # grace period ends, now + grace; a shorter grace on a pod already terminating moves it back by the
        # difference, never before now. Simulated seconds: it is when the pod will be gone here.
        meta, now = p["metadata"], datetime.now(UTC)
        at = now + timedelta(seconds=cluster.scaled(grace))
        if meta.get("deletionTimestamp"):
            at = max(now, parse_iso(meta["deletionTimestamp"]) - timedelta(
                seconds=cluster.scaled(int(meta.get("deletionGracePeriodSeconds") or 0)))
                + timedelta(seconds=cluster.scaled(grace)))
        meta["deletionTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["deletionGracePeriodSeconds"] = grace

    out = store.mutate("Pod", namespace, name, change)
    cluster.deletions[(namespace, name)] = time.monotonic() + cluster.scaled(grace)
    cluster.call_later(grace, lambda: None)  # wake the loop when the grace period is over
    return out


def _disruption_target(pod: dict, reason: str, message: str) -> None:
    conds = pod.setdefault("status", {}).setdefault("conditions", [])
    conds[:] = [c for c in conds if c.get("type") != "DisruptionTarget"]
    conds.append({"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
                  "lastProbeTime": None, "lastTransitionTime": now_iso()})


def _remove_pod(cluster: Cluster, namespace: str, name: str) -> None:
    pod = cluster.store.get("Pod", namespace, name)
    if pod is not None:
        if controller_kind(pod) == "Job":  # the Job controller sees how it ended before the object goes
            from remedy.sim.jobs import pod_gone

            pod_gone(cluster, pod)
        cluster.store.remove("Pod", namespace, name)
    cluster.deletions.pop((namespace, name), None)
    cluster.runs.pop((namespace, name), None)
    cluster.logs.pop((namespace, name), None)


def _finish_deletions(cluster: Cluster) -> None:
    """Terminating pods go once their grace period is over, but only if their kubelet can confirm it: on a
    NotReady node they stay Terminating until it is back, a force delete (grace 0), or — PodGC's gcTerminating
    (pkg/controller/podgc/gc_controller.go, non-graceful node shutdown) — the node is tainted
    `node.kubernetes.io/out-of-service`: then they are marked Failed and deleted at PodGC's next pass (every 20 s,
    remedy.sim.podgc), as on a real cluster."""
    now = time.monotonic()
    for key, due in list(cluster.deletions.items()):
        pod = cluster.store.get("Pod", *key)
        node_name = (pod or {}).get("spec", {}).get("nodeName")
        node = cluster.store.get("Node", "", node_name) if node_name else None
        down = bool(node and node_name in cluster.health and not cluster.node_ready(node_name))
        if down and any(t.get("key") == OUT_OF_SERVICE for t in node.get("spec", {}).get("taints") or []):
            if podgc.terminating_collected(cluster, key):  # PodGC's next pass, not the grace period
                _remove_pod(cluster, *key)
            continue
        if due > now or down:
            continue
        _remove_pod(cluster, *key)


def _noexecute_evictions(cluster: Cluster) -> None:
    """Pods that do not tolerate a node's NoExecute taint are deleted (after tolerationSeconds)."""
    now = time.monotonic()
    live = set()
    for name in sorted(cluster.index.noexecute_nodes):
        node = cluster.store.get("Node", "", name)
        taints = [t for t in node.get("spec", {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        for taint in taints:
            live.add((name, taint.get("key")))
        for pod in cluster.index.on_node(name):
            if terminating(pod) or finished(pod):
                continue
            for taint in taints:
                since = cluster.noexecute_since.setdefault((name, taint.get("key")), now)
                tol = tolerates(pod["spec"].get("tolerations") or [], taint)
                if tol is not None and tol.get("tolerationSeconds") is None:
                    continue
                wait = 0.0 if tol is None else cluster.scaled(max(0, int(tol["tolerationSeconds"])))
                if now >= since + wait:
                    delete_pod(cluster, *pod_key(pod), disruption=BY_TAINT_MANAGER)
                    break
                timer = (name, taint.get("key"), pod["metadata"]["uid"])
                if timer not in cluster.eviction_timers:
                    cluster.eviction_timers.add(timer)
                    cluster.call_later((since + wait - now) / cluster.time_scale, lambda: None)
    for key in [k for k in cluster.noexecute_since if k not in live]:
        del cluster.noexecute_since[key]


# ---------------------------------------------------------------- scheduling
def _bind(cluster: Cluster, pod: dict, node_name: str) -> None:
    """Bind and start the pod on the node (in place on a fresh copy, before it is stored)."""
    node = cluster.store.get("Node", "", node_name)
    node_ip = node["status"]["addresses"][0]["address"]
    ts = now_iso()
    seq = cluster.next_pod_ip()
    pod["spec"]["nodeName"] = node_name
    containers = pod["spec"].get("containers") or []
    pod["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
            {"type": "Initialized", "status": "True", "lastTransitionTime": ts},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ts},
            {"type": "Ready", "status": "True", "lastTransitionTime": ts},
        ],
        "hostIP": node_ip, "hostIPs": [{"ip": node_ip}],
        "podIP": f"10.{128 + seq // 65536 % 64}.{seq // 256 % 256}.{seq % 256}",
        "startTime": ts, "qosClass": "BestEffort",
        "containerStatuses": [{"name": c.get("name", "main"), "image": c.get("image", ""), "imageID": "",
                               "containerID": f"containerd://{random_suffix(12)}", "ready": True, "started": True,
                               "restartCount": 0, "state": {"running": {"startedAt": ts}}} for c in containers],
    }
    pod["status"]["podIPs"] = [{"ip": pod["status"]["podIP"]}]


def start_bound_pod(cluster: Cluster, namespace: str, name: str) -> None:
    """A pod created with spec.nodeName skips the scheduler: that node's kubelet runs it (Running, Ready) if the
    node exists and is Ready, as a real cluster does (the real lane's stand-in kubelet too). A pod a Job owns is
    the simulated Job controller's (it starts its own runners), so it is left to it."""
    pod = cluster.store.get("Pod", namespace, name)
    if pod is None or (pod.get("status") or {}).get("phase") not in (None, "Pending"):
        return
    if any(o.get("kind") == "Job" for o in pod["metadata"].get("ownerReferences") or []):
        return
    node = pod["spec"]["nodeName"]
    if cluster.store.get("Node", "", node) is None or node not in cluster.health or not cluster.node_ready(node):
        return
    copy = deep_copy(pod)
    _bind(cluster, copy, node)
    cluster.store.put("Pod", copy)


INSUFFICIENT_GPU = "Insufficient nvidia.com/gpu"


def _pending_status(pod: dict, reasons: dict[str, int], total: int) -> None:
    # as kube-scheduler words it: "1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu"
    detail = ", ".join(f"{n} {r}" if r.startswith("Insufficient ") else f"{n} node(s) {r}"
                       for r, n in sorted(reasons.items())) or "no nodes available"
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now_iso(),
        "message": f"0/{total} nodes are available: {detail}. preemption: not eligible due to preemptionPolicy=Never.",
    }]}


def _candidates(cluster: Cluster, spec: dict, exclude: set[str],
                cache_key: str | None = None, namespace: str = "default") -> tuple[list[str], dict[str, int], int]:
    """Nodes a pod with `spec` may go on (sorted, minus `exclude`), and why the others may not.
    With cache_key (a Job uid: all its pods share one spec) each node's verdict is reused until that node
    changes (resourceVersion) or its readiness does, so a drain does not re-judge 2,048 nodes per eviction.
    Free GPUs are not part of that verdict (pods binding or leaving do not change the node's resourceVersion):
    they are checked on every pass against the index's per-node sum of requests."""
    nodes = cluster.store.objects("Node")
    gpus = gpu_request(spec)
    pinned = affinity_hosts(spec)
    reasons: dict[str, int] = {}
    if pinned is not None:  # those nodes to look at; the rest fail the selector
        to_check = [n for n in (cluster.store.get("Node", "", h) for h in dict.fromkeys(pinned)) if n]
        reasons["didn't match Pod's node affinity/selector"] = len(nodes) - len(to_check)
    else:
        to_check = nodes
    repels = bool(((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    cache = cluster.eligible_cache.setdefault(cache_key, {}) if cache_key else {}
    ok = []
    for node in to_check:
        name = node["metadata"]["name"]
        rv, ready = node["metadata"].get("resourceVersion"), cluster.node_ready(name)
        seen = cache.get(name)
        if seen is not None and seen[0] == rv and seen[1] == ready:
            why = seen[2]
        else:
            why = unschedulable_reason(node, spec, ready)
            if cache_key:
                cache[name] = (rv, ready, why)
        if why is None and gpus and cluster.index.free_gpus(node) < gpus:
            why = INSUFFICIENT_GPU
        if why is None and repels and anti_affinity_conflict(cluster, spec, namespace, node):
            why = "didn't match pod anti-affinity rules"
        if why is None and name in exclude:
            why = "already run a pod of this job"
        if why:
            reasons[why] = reasons.get(why, 0) + 1
        else:
            ok.append(name)
    ok.sort()
    return ok, {k: v for k, v in reasons.items() if v}, len(nodes)


def _schedule_bare_pod(cluster: Cluster, pod: dict) -> None:
    ok, reasons, total = _candidates(cluster, pod.get("spec", {}), set(),
                                     namespace=pod["metadata"].get("namespace", "default"))
    copy = deep_copy(pod)
    if ok:
        _bind(cluster, copy, ok[0])
    elif pod.get("status", {}).get("phase") == "Pending" and pod["status"].get("conditions"):
        return
    else:
        _pending_status(copy, reasons, total)
    cluster.store.put("Pod", copy)


# ---------------------------------------------------------------- jobs
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def new_job_pod(job: dict, index: int | None = None, node: str | None = None) -> dict:
    """A pod from the Job's template, with the labels and owner reference the Job controller sets."""
    meta = job["metadata"]
    template = deep_copy(job["spec"].get("template") or {})
    uid = meta["uid"]
    labels = dict(template.get("metadata", {}).get("labels") or {})
    labels.update({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": meta["name"],
                   "controller-uid": uid, "job-name": meta["name"]})
    annotations = dict(template.get("metadata", {}).get("annotations") or {})
    spec = template.get("spec") or {}
    if index is not None:
        annotations["batch.kubernetes.io/job-completion-index"] = str(index)
        labels["batch.kubernetes.io/job-completion-index"] = str(index)
    if node is not None:
        spec.setdefault("nodeSelector", {})[HOSTNAME] = node
        annotations[SIM_NODES] = node
    add_default_tolerations(spec)
    add_extended_resource_tolerations(spec)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{meta['name']}-{random_suffix()}", "namespace": meta.get("namespace", "default"),
                     "labels": labels, "annotations": annotations,
                     "ownerReferences": [owner_ref("Job", meta["name"], uid, "batch/v1")],
                     # job_controller.go (appendJobCompletionFinalizerIfNotFound): the controller counts a pod's
                     # end only while the pod carries it (remedy.sim.jobs._count)
                     "finalizers": [JOB_TRACKING_FINALIZER]},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def create_generated(cluster: Cluster, pod: dict) -> dict:
    """Create a pod whose name came from generateName, drawing a new suffix on the rare collision. Its priority
    is resolved from its priorityClassName as the API server's Priority admission plugin does for the Job
    controller's pods."""
    from remedy.sim.admission import resolve_priority

    try:
        resolve_priority(cluster, pod["spec"])
    except ValueError:
        pass  # an unknown class: the real API server refuses the pod; here it simply carries no priority
    base = pod["metadata"]["name"].rsplit("-", 1)[0]
    while cluster.store.get("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"]) is not None:
        pod["metadata"]["name"] = f"{base}-{random_suffix()}"
    return cluster.store.create("Pod", pod)


def add_default_tolerations(spec: dict) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready/unreachable for 300 s."""
    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY, UNREACHABLE):
        if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations) and \
                not any(t.get("operator") == "Exists" and not t.get("key") for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})


def add_extended_resource_tolerations(spec: dict) -> None:
    """The ExtendedResourceToleration admission plugin (plugin/pkg/admission/extendedresourcetoleration, enabled
    where providers taint GPU nodes): a pod requesting an extended resource such as nvidia.com/gpu tolerates the
    taint of that name (operator Exists, effect NoSchedule)."""
    wanted = set()
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for name in {**(res.get("requests") or {}), **(res.get("limits") or {})}:
            if "/" in name and not name.startswith(("kubernetes.io/", "requests.")):
                wanted.add(name)
    tolerations = spec.setdefault("tolerations", [])
    for name in sorted(wanted):
        if not any(t.get("key") == name for t in tolerations):
            tolerations.append({"key": name, "operator": "Exists", "effect": "NoSchedule"})
