"""What the real API server's defaulting and admission add to a new object before it is stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remedy.sim.controller import add_default_tolerations
from remedy.sim.store import now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster


def default(cluster: "Cluster", kind: str, obj: dict) -> None:
    """What the real server's defaulting and admission add on create."""
    if kind == "Pod":
        obj.setdefault("spec", {}).setdefault("restartPolicy", "Always")
        obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
        add_default_tolerations(obj["spec"])
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif kind == "Job":
        spec = obj["spec"]
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        uid_label = "batch.kubernetes.io/controller-uid"
        spec.setdefault("selector", {"matchLabels": {uid_label: "pending"}})
        obj["status"] = {}
    elif kind == "Event":
        obj.setdefault("count", 1)
        obj.setdefault("type", "Normal")
    elif kind == "Namespace":
        obj["status"] = {"phase": "Active"}
        obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif kind == "Node":
        obj.setdefault("spec", {})
        obj.setdefault("status", {})


def adopt_node(cluster: "Cluster", node: dict) -> None:
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
