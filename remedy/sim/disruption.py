"""PodDisruptionBudgets and the eviction subresource, with the disruption controller's arithmetic."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from remedy.domain.selectors import selects as label_match
from remedy.sim.controller import BY_EVICTION_API, delete_pod, finished, pod_ready, terminating
from remedy.sim.store import ApiError, now_iso, precondition_failed

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster


def _scaled(value, total: int, field: str, name: str) -> int:
    """An IntOrString (3 or "50%") against `total`, rounding up as Kubernetes does for budgets."""
    if isinstance(value, bool):
        raise ApiError(422, "Invalid", f'PodDisruptionBudget "{name}" is invalid: spec.{field}: must be int or percent')
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%") and text[:-1].isdigit():
        return math.ceil(int(text[:-1]) * total / 100)
    if text.isdigit():
        return int(text)
    raise ApiError(422, "Invalid", f'PodDisruptionBudget "{name}" is invalid: spec.{field}: invalid value {value!r}')


NO_SCALE = {"Job": "jobs.batch", "DaemonSet": "daemonsets.apps"}


class SyncFailed(Exception):
    """The disruption controller could not compute the budget (its status condition reason SyncFailed)."""


def budget_status(cluster: "Cluster", pdb: dict) -> dict:
    """currentHealthy, desiredHealthy, expectedPods and disruptionsAllowed for this budget right now."""
    name = pdb["metadata"]["name"]
    spec = pdb.get("spec", {})
    selector = spec.get("selector")
    index = cluster.index
    expected = healthy = 0
    # maxUnavailable and a percentage need the pods' controller's scale
    needs_scale = spec.get("maxUnavailable") is not None or "%" in str(spec.get("minAvailable", ""))
    owner_kinds: set[str | None] = set()
    if selector is not None:  # a nil selector selects nothing; an empty one ({}) selects every pod (policy/v1)
        only_labels = set(selector) <= {"matchLabels"}
        wanted = list((selector.get("matchLabels") or {}).items())
        for key, pod in index.in_namespace(pdb["metadata"].get("namespace", "")):
            if key in index.finished:
                continue
            labels = pod["metadata"].get("labels") or {}
            if only_labels:  # the common case, inline: this runs for every pod on every eviction
                if any(labels.get(k) != v for k, v in wanted):
                    continue
            elif not label_match(selector, labels):
                continue
            expected += 1
            healthy += key in index.healthy
            if needs_scale:
                owner_kinds.add(next((o["kind"] for o in pod["metadata"].get("ownerReferences") or []
                                      if o.get("controller")), None))
    if needs_scale:
        # pkg/controller/disruption/disruption.go (getExpectedScale, getScaleController): a Job or DaemonSet has no
        # scale subresource, so the controller's sync fails (failSafe); pods with no controller are left out of
        # the expected count — checked on a real v1.36.2 server, where the sim once used the Job's parallelism
        for kind in sorted(k for k in owner_kinds if k):
            raise SyncFailed(f"{NO_SCALE.get(kind, kind.lower() + 's')} does not implement the scale subresource")
        if None in owner_kinds:
            expected = healthy = 0
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, "maxUnavailable", name))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, "minAvailable", name)
    else:  # neither given: policy/v1 defaults minAvailable to 1
        desired = min(1, expected)
    # updatePdbStatus: a budget that expects no pods allows nothing, so it is safe when its first pods appear
    allowed = max(0, healthy - desired) if expected > 0 else 0
    return {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
            "disruptionsAllowed": allowed}


def sync_budgets(cluster: "Cluster") -> None:
    dirty, cluster.index.dirty_namespaces = cluster.index.dirty_namespaces, set()
    for pdb in cluster.store.objects("PodDisruptionBudget"):
        if pdb["metadata"].get("namespace") not in dirty:
            continue
        try:
            numbers = budget_status(cluster, pdb)
        except ApiError:
            continue
        except SyncFailed as failed:  # failSafe: nothing allowed, observedGeneration left as it was
            old = pdb.get("status") or {}
            status = {**old, "disruptionsAllowed": 0, "conditions": [{
                "type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": str(failed),
                "observedGeneration": old.get("observedGeneration", 0), "lastTransitionTime": now_iso()}]}
            status.setdefault("currentHealthy", 0)
            status.setdefault("desiredHealthy", 0)
            status.setdefault("expectedPods", 0)
            if old != status and (old.get("conditions") or [{}])[0].get("message") != str(failed):
                cluster.store.mutate("PodDisruptionBudget", pdb["metadata"]["namespace"], pdb["metadata"]["name"],
                                     lambda p, status=status: p.__setitem__("status", status))
            continue
        old = pdb.get("status") or {}
        if all(old.get(k) == v for k, v in numbers.items()):
            continue
        allowed = numbers["disruptionsAllowed"] > 0
        status = dict(numbers, observedGeneration=pdb["metadata"].get("generation", 1), conditions=[{
            "type": "DisruptionAllowed", "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods", "message": "",
            "observedGeneration": pdb["metadata"].get("generation", 1), "lastTransitionTime": now_iso()}])
        cluster.store.mutate("PodDisruptionBudget", pdb["metadata"]["namespace"], pdb["metadata"]["name"],
                             lambda p: p.__setitem__("status", status))


def _sync_failed(pdb: dict, failed: SyncFailed) -> ApiError:
    """eviction.go (checkAndDecrement): a budget whose status never caught up with its generation (failSafe leaves
    observedGeneration alone) is "still being processed", with Retry-After 10; one observed before says why."""
    name = pdb["metadata"]["name"]
    observed = (pdb.get("status") or {}).get("observedGeneration", 0)
    if observed < pdb["metadata"].get("generation", 1):
        message, wait = f"The disruption budget {name} is still being processed by the server.", 10
    else:
        message, wait = (f"The disruption budget {name} does not allow evicting pods currently because it failed "
                         f"sync: {failed}"), 0
    details = {"causes": [{"reason": "DisruptionBudget", "message": message}]}
    if wait:
        details["retryAfterSeconds"] = wait
    return ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                    details)


MULTIPLE_BUDGETS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def evict(cluster: "Cluster", namespace: str, name: str, eviction: dict, dry_run: bool = False) -> dict:
    """POST pods/<name>/eviction: delete the pod unless a matching budget forbids it (429). For a pod under more
    than one budget EvictionREST.Create (pkg/registry/core/pod/storage/eviction.go) returns Status{Failure, code
    500} with no reason; the request finisher turns a non-Success Status into an error (staging/src/k8s.io/
    apiserver/pkg/endpoints/handlers/finisher/finisher.go), so the client gets HTTP 500 with exactly that body."""
    if not isinstance(eviction, dict):
        raise ApiError(400, "BadRequest", "eviction body must be a policy/v1 Eviction object")
    options = eviction.get("deleteOptions") or {}
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        raise ApiError(400, "BadRequest", f"deleteOptions.gracePeriodSeconds must be an integer, got {grace!r}")
    with cluster.lock:
        pod = cluster.store.require("Pod", namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != pod["metadata"].get("uid"):
            raise precondition_failed("Pod", name, "UID", pre["uid"], pod["metadata"].get("uid"))
        if pre.get("resourceVersion") and pre["resourceVersion"] != pod["metadata"].get("resourceVersion"):
            raise precondition_failed("Pod", name, "ResourceVersion", pre["resourceVersion"],
                                      pod["metadata"].get("resourceVersion"))
        simple = terminating(pod) or finished(pod) or pod.get("status", {}).get("phase") == "Pending"
        if not simple:
            labels = pod["metadata"].get("labels") or {}
            pdbs = [p for p in cluster.store.objects("PodDisruptionBudget", namespace)
                    if p.get("spec", {}).get("selector") is not None
                    and label_match(p["spec"]["selector"], labels)]
            if len(pdbs) > 1:
                raise ApiError(500, None, MULTIPLE_BUDGETS)
            if pdbs:
                try:
                    numbers = budget_status(cluster, pdbs[0])
                except SyncFailed as failed:
                    raise _sync_failed(pdbs[0], failed) from None
                # an unready pod does not count as healthy: evicting it disrupts nothing if the budget is met
                # (or the budget says AlwaysAllow)
                always = (pdbs[0].get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                unhealthy_ok = not pod_ready(pod) and (always or (
                    numbers["currentHealthy"] >= numbers["desiredHealthy"] and numbers["desiredHealthy"] > 0))
                if numbers["disruptionsAllowed"] <= 0 and not unhealthy_ok:
                    pdb_name = pdbs[0]["metadata"]["name"]
                    raise ApiError(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.",
                                   {"causes": [{"reason": "DisruptionBudget", "message":
                                                f"The disruption budget {pdb_name} needs "
                                                f"{numbers['desiredHealthy']} healthy pods and has "
                                                f"{numbers['currentHealthy']} currently"}]})
        if not dry_run:  # a server-side dry run answers as the real one would and keeps the pod (eviction.go)
            delete_pod(cluster, namespace, name, grace, disruption=BY_EVICTION_API)
            cluster.reconcile(set())
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
