"""What the real API server's defaulting and admission add to a new object before it is stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remedy.sim.controller import add_default_tolerations, add_extended_resource_tolerations
from remedy.sim.store import ApiError, now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster


# The API server's built-in classes (scheduling.k8s.io/v1); the simulator's own are added by objects.populate.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def resolve_priority(cluster: Cluster, spec: dict) -> None:
    """The Priority admission plugin: spec.priority (and preemptionPolicy) from spec.priorityClassName, or from
    the globalDefault class, else 0. ValueError when the class does not exist or a different priority was given."""
    name = spec.get("priorityClassName")
    if name:
        pc = cluster.store.get("PriorityClass", "", name)
        if pc is None:
            if name not in SYSTEM_PRIORITY_CLASSES:
                raise ValueError(f"no PriorityClass with name {name} was found")
            value, policy = SYSTEM_PRIORITY_CLASSES[name], "PreemptLowerPriority"
        else:
            value, policy = int(pc.get("value", 0)), pc.get("preemptionPolicy") or "PreemptLowerPriority"
    else:
        default = next((pc for pc in cluster.store.objects("PriorityClass") if pc.get("globalDefault")), None)
        value = int(default.get("value", 0)) if default else 0
        policy = (default or {}).get("preemptionPolicy") or "PreemptLowerPriority"
        if default:
            spec["priorityClassName"] = default["metadata"]["name"]
    if spec.get("priority") is not None and spec["priority"] != value:
        raise ValueError(f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                         f"priority admission controller computed {value} from the given PriorityClass name")
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", policy)


def default(cluster: Cluster, kind: str, obj: dict) -> None:
    """What the real server's defaulting and admission add on create."""
    if kind == "Pod":
        obj.setdefault("spec", {}).setdefault("restartPolicy", "Always")
        obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
        add_default_tolerations(obj["spec"])
        add_extended_resource_tolerations(obj["spec"])
        try:
            resolve_priority(cluster, obj["spec"])
        except ValueError as exc:
            raise ApiError(403, "Forbidden", f'pods "{obj["metadata"].get("name", "")}" is forbidden: {exc}',
                           {"name": obj["metadata"].get("name", ""), "kind": "pods"}) from None
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif kind == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        obj.setdefault("globalDefault", False)
    elif kind == "Job":
        spec = obj["spec"]
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        # pkg/apis/batch/v1/defaults.go: only failed pods are replaced when a podFailurePolicy is given
        spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        uid_label = "batch.kubernetes.io/controller-uid"
        spec.setdefault("selector", {"matchLabels": {uid_label: "pending"}})
        obj["status"] = {}
    elif kind == "Event":
        # no count default: the real server stores an Event's count as sent (checked on v1.36.2)
        obj.setdefault("type", "Normal")
    elif kind == "Namespace":
        obj["status"] = {"phase": "Active"}
        obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif kind == "Node":
        obj.setdefault("spec", {})
        obj.setdefault("status", {})


def adopt_node(cluster: Cluster, node: dict) -> None:
    """A Node created through the API (e.g. a replacement joining) gets healthy hidden hardware."""
    from remedy.sim.health import NodeHealth
    from remedy.sim.objects import node_conditions

    name = node["metadata"]["name"]
    gpus = int((node.get("status", {}).get("capacity") or {}).get("nvidia.com/gpu", 8) or 8)
    cluster.health.setdefault(name, NodeHealth.healthy(gpus=gpus, node_index=len(cluster.health) + 1))
    cluster.dmesg.setdefault(name, ["Linux version 6.8.0-sim (buildd@sim) #1 SMP"])
    if not node.get("status", {}).get("conditions"):
        cluster.store.mutate("Node", "", name, lambda n: n["status"].__setitem__("conditions",
                                                                                  node_conditions(True, now_iso())))


def fix_job_selector(obj: dict) -> None:
    uid = obj["metadata"]["uid"]
    for labels in (obj["spec"]["selector"].setdefault("matchLabels", {}),):
        if labels.get("batch.kubernetes.io/controller-uid") == "pending":
            labels["batch.kubernetes.io/controller-uid"] = uid
    tmeta = obj["spec"]["template"].setdefault("metadata", {})
    tmeta.setdefault("labels", {}).update({"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                                           "batch.kubernetes.io/job-name": obj["metadata"]["name"],
                                           "job-name": obj["metadata"]["name"]})
