"""Indexes the control loop needs, kept current from the store's change feed, so one reconcile pass costs
what changed rather than the whole cluster (a 2,048-node drain runs one pass per API write)."""

from __future__ import annotations


class OwnerStats:
    """Counts over one controller's pods, kept current on every pod write (Job status without a scan)."""

    __slots__ = ("live", "ready", "terminating", "succeeded", "failed", "pending", "nodes")

    def __init__(self) -> None:
        self.live = self.ready = self.terminating = self.succeeded = self.failed = 0
        self.pending: set[tuple[str, str]] = set()  # live pods not bound to a node
        self.nodes: dict[str, int] = {}  # node -> unfinished pods there (terminating ones included)

    def apply(self, key: tuple[str, str], facts: tuple, sign: int) -> None:
        phase, node, deleting, ready = facts
        if phase == "Succeeded":
            self.succeeded += sign
        elif phase == "Failed":
            self.failed += sign
        else:
            if node:
                self.nodes[node] = self.nodes.get(node, 0) + sign
                if not self.nodes[node]:
                    del self.nodes[node]
            if deleting:
                self.terminating += sign
            else:
                self.live += sign
                self.ready += sign if ready and phase == "Running" else 0
                if not node:
                    (self.pending.add if sign > 0 else self.pending.discard)(key)


def pod_facts(pod: dict) -> tuple:
    """(phase, node, being deleted, Ready condition true) of a pod."""
    status = pod.get("status") or {}
    ready = False
    for c in status.get("conditions") or ():
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
            break
    return (status.get("phase"), pod.get("spec", {}).get("nodeName"), bool(pod["metadata"].get("deletionTimestamp")),
            ready)


GPU = "nvidia.com/gpu"


def _quantity(value) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def gpu_request(spec: dict) -> int:
    """nvidia.com/gpu a pod asks for, as the scheduler counts it: the sum over its containers (requests, else
    limits: an extended resource's request defaults to its limit), or the largest init container if that is more."""

    def one(c: dict) -> int:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(GPU)
        if value is None:
            value = (res.get("limits") or {}).get(GPU)
        return _quantity(value) if value is not None else 0

    total = sum(one(c) for c in spec.get("containers") or ())
    init = max((one(c) for c in spec.get("initContainers") or ()), default=0)
    return max(total, init)


def _holds_gpus(pod: dict) -> tuple[str | None, int]:
    """(node, GPUs) a pod holds there: bound and not finished; a terminating pod holds them until it is gone."""
    node = pod.get("spec", {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None, 0
    return node, gpu_request(pod.get("spec") or {})


def _owner(pod: dict) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


class ClusterIndex:
    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict] = {}
        self.by_owner: dict[str, dict[tuple[str, str], dict]] = {}
        self.owner_stats: dict[str, OwnerStats] = {}
        self.by_namespace: dict[str, dict[tuple[str, str], dict]] = {}
        self.healthy: set[tuple[str, str]] = set()  # pods Ready, running, not being deleted (PDB arithmetic)
        self.owner_of: dict[tuple[str, str], str | None] = {}  # pod -> controller uid
        self.finished: set[tuple[str, str]] = set()  # pods Succeeded or Failed
        self.by_node: dict[str, dict[tuple[str, str], dict]] = {}
        self.unbound_bare: dict[tuple[str, str], dict] = {}  # pods no controller owns, not yet scheduled
        self.noexecute_nodes: set[str] = set()
        self.gpus_used: dict[str, int] = {}  # node -> nvidia.com/gpu held by the pods bound there
        self.dirty_owners: set[str] = set()
        self.dirty_namespaces: set[str] = set()
        self.nodes_changed = True

    def on_change(self, verb: str, kind: str, namespace: str, obj: dict | None) -> None:
        if kind == "Pod":
            self._pod(verb, namespace, obj)
        elif kind == "Node":
            self.nodes_changed = True
            name = obj["metadata"]["name"]
            taints = obj.get("spec", {}).get("taints") or []
            if verb != "DELETED" and any(t.get("effect") == "NoExecute" for t in taints):
                self.noexecute_nodes.add(name)
            else:
                self.noexecute_nodes.discard(name)
        elif kind == "Job":
            self.dirty_owners.add(obj["metadata"].get("uid", ""))
        elif kind == "PodDisruptionBudget":
            self.dirty_namespaces.add(namespace)

    def _pod(self, verb: str, namespace: str, pod: dict) -> None:
        key = (namespace, pod["metadata"]["name"])
        old = self.pods.pop(key, None)
        held_node, held = _holds_gpus(old) if old is not None else (None, 0)
        now_node, now = _holds_gpus(pod) if verb != "DELETED" else (None, 0)
        if held and (held_node, held) != (now_node, now):
            self.gpus_used[held_node] -= held
            if not self.gpus_used[held_node]:
                del self.gpus_used[held_node]
            self.nodes_changed = True  # GPUs freed: pending pods may fit now (the node's resourceVersion is the same)
        if now and (held_node, held) != (now_node, now):
            self.gpus_used[now_node] = self.gpus_used.get(now_node, 0) + now
        if old is not None:
            uid, node = _owner(old), old.get("spec", {}).get("nodeName")
            if uid:
                self.by_owner.get(uid, {}).pop(key, None)
                self.owner_stats[uid].apply(key, pod_facts(old), -1)
                self.dirty_owners.add(uid)
            if node:
                self.by_node.get(node, {}).pop(key, None)
            self.unbound_bare.pop(key, None)
            self.by_namespace.get(namespace, {}).pop(key, None)
            self.healthy.discard(key)
            self.finished.discard(key)
            self.owner_of.pop(key, None)
        self.dirty_namespaces.add(namespace)
        if verb == "DELETED":
            return
        self.pods[key] = pod
        self.by_namespace.setdefault(namespace, {})[key] = pod
        facts = pod_facts(pod)
        if facts[3] and facts[0] == "Running" and not facts[2]:
            self.healthy.add(key)
        if facts[0] in ("Succeeded", "Failed"):
            self.finished.add(key)
        uid, node = _owner(pod), facts[1]
        self.owner_of[key] = uid
        if uid:
            self.by_owner.setdefault(uid, {})[key] = pod
            self.owner_stats.setdefault(uid, OwnerStats()).apply(key, facts, +1)
            self.dirty_owners.add(uid)
        elif not node and not pod["metadata"].get("deletionTimestamp"):
            self.unbound_bare[key] = pod
        if node:
            self.by_node.setdefault(node, {})[key] = pod

    def free_gpus(self, node: dict) -> int:
        """nvidia.com/gpu allocatable on the node minus what its bound pods hold."""
        allocatable = _quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0))
        return allocatable - self.gpus_used.get(node["metadata"]["name"], 0)

    def stats(self, uid: str) -> OwnerStats:
        return self.owner_stats.get(uid) or OwnerStats()

    def in_namespace(self, namespace: str) -> list[tuple[tuple[str, str], dict]]:
        return list(self.by_namespace.get(namespace, {}).items())

    def owned(self, uid: str) -> list[dict]:
        return list(self.by_owner.get(uid, {}).values())

    def on_node(self, node: str) -> list[dict]:
        return list(self.by_node.get(node, {}).values())
