"""Which node an alert is about, from the labels any deployment puts on it, checked against the cluster.

dcgm-exporter's `Hostname` is the exporter *pod's* name unless it runs with hostNetwork or NODE_NAME; the usual
relabelling adds `node` or `kubernetes_node`; node_exporter behind kube-prometheus carries `instance=<node IP>:9100`
and `nodename` on node_uname_info; kube-state-metrics rules carry `node`. So candidates are read in this order, and
the first one the cluster confirms wins:

1. `receiver.identity.extra_labels` (your own relabelling), in the order given;
2. `node`, `kubernetes_node`, `nodename` — a node name, if the cluster has that node;
3. `Hostname` — a node name, else a pod's name: the pod's `spec.nodeName`;
4. `instance` — without `:port`: a node name, else one of a Node's `status.addresses` (InternalIP, …);
5. `pod` (or `exported_pod`) with `namespace` (or `exported_namespace`) — that pod's `spec.nodeName`.

A value the cluster does not confirm is never used as a node name: the alert is *unresolved*, recorded in the
ledger with its labels and counted (`remedy_receiver_alerts_rejected_total{reason="unresolved-node"}`). Lookups
go through `ClusterIndex`, which keeps the addresses of all Nodes and each pod name it was asked about for
`receiver.identity.index_ttl_seconds` (one Node list per TTL, not one per alert; a pod name asked again within the
TTL, found or not, costs nothing). It reads the cluster adapter's public methods (`node_addresses`, `pod_node`);
a watch-fed cache in the adapter can replace it behind the same two calls.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

NAME_LABELS = ("node", "kubernetes_node", "nodename")
_PORT = re.compile(r"^(?P<host>\[[^\]]+\]|[^:]+):\d+$")


def strip_port(value: str) -> str:
    m = _PORT.match(value)
    return m.group("host").strip("[]") if m else value.strip("[]")


@dataclass(frozen=True)
class Resolution:
    node: str | None  # None: nothing the cluster confirms
    label: str = ""  # which label decided (e.g. "Hostname→pod", "instance→address")
    tried: tuple[str, ...] = ()  # label=value pairs looked at, for the ledger when unresolved

    def why_not(self) -> str:
        if not self.tried:
            return ("no node label: need one of node, kubernetes_node, nodename, Hostname, instance, pod+namespace "
                    "(or receiver.identity.extra_labels)")
        return "no label names a node of this cluster (tried " + ", ".join(self.tried) + ")"


class ClusterIndex:
    """Node addresses and pod→node lookups over the cluster adapter, kept `ttl` seconds. Thread-safe. A failure to
    read the cluster is logged and answers "not found" (the alert is then recorded as unresolved, not lost)."""

    def __init__(self, cluster: Callable[[], Any], ttl: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self._cluster, self.ttl, self._clock = cluster, ttl, clock
        self._lock = threading.Lock()
        self._addresses: dict[str, str] = {}
        self._addresses_at = float("-inf")
        self._pods: dict[tuple[str, str], tuple[float, str | None]] = {}
        self.reads = 0  # cluster reads made (a test and the bench check it stays one per TTL)

    def node_for_address(self, address: str) -> str | None:
        with self._lock:
            hit = self._addresses.get(address)
            if hit is not None or self._clock() - self._addresses_at < self.ttl:
                return hit
            self._addresses_at = self._clock()
        try:
            self.reads += 1
            fresh = dict(self._cluster().node_addresses())
        except Exception as exc:  # noqa: BLE001 - unreachable cluster: the alert is recorded as unresolved
            log.warning("identity index: could not list node addresses: %s", type(exc).__name__)
            return None
        with self._lock:
            self._addresses = fresh
        return fresh.get(address)

    def node_for_pod(self, pod: str, namespace: str | None) -> str | None:
        key = (namespace or "", pod)
        with self._lock:
            hit = self._pods.get(key)
            if hit is not None and self._clock() - hit[0] < self.ttl:
                return hit[1]
            if len(self._pods) > 10_000:  # a storm of made-up names cannot grow it without bound
                self._pods.clear()
        try:
            self.reads += 1
            node: str | None = self._cluster().pod_node(pod, namespace)
        except Exception as exc:  # noqa: BLE001
            log.warning("identity index: could not look up pod %s: %s", pod[:80], type(exc).__name__)
            node = None
        with self._lock:
            self._pods[key] = (self._clock(), node)
        return node


class NodeResolver:
    """`resolve(labels)` → Resolution. `knows(name)` says whether the cluster/ledger has that node (the receiver's
    NodeDirectory); `index` answers address and pod lookups (None: names only)."""

    def __init__(self, knows: Callable[[str], bool], index: ClusterIndex | None = None,
                 extra_labels: tuple[str, ...] | list[str] = ()) -> None:
        self.knows, self.index, self.extra = knows, index, tuple(extra_labels)

    def resolve(self, labels: dict[str, str]) -> Resolution:
        tried: list[str] = []

        def value(key: str) -> str:
            return (labels.get(key) or "").strip()

        for key in self.extra + NAME_LABELS:
            v = value(key)
            if v:
                tried.append(f"{key}={v[:60]}")
                if self.knows(v):
                    return Resolution(v, key, tuple(tried))
        host = value("Hostname")
        if host:
            tried.append(f"Hostname={host[:60]}")
            if self.knows(host):
                return Resolution(host, "Hostname", tuple(tried))
            node = self._pod(host, value("namespace") or value("exported_namespace") or None)
            if node:
                return Resolution(node, "Hostname→pod", tuple(tried))
        instance = value("instance")
        if instance:
            tried.append(f"instance={instance[:60]}")
            bare = strip_port(instance)
            if self.knows(bare):
                return Resolution(bare, "instance", tuple(tried))
            if self.index is not None:
                node = self.index.node_for_address(bare)
                if node and self.knows(node):
                    return Resolution(node, "instance→address", tuple(tried))
        for pod_key, ns_key in (("pod", "namespace"), ("exported_pod", "exported_namespace")):
            pod = value(pod_key)
            if pod:
                tried.append(f"{pod_key}={pod[:60]}")
                node = self._pod(pod, value(ns_key) or None)
                if node:
                    return Resolution(node, f"{pod_key}→node", tuple(tried))
        return Resolution(None, "", tuple(tried))

    def _pod(self, pod: str, namespace: str | None) -> str | None:
        if self.index is None:
            return None
        node = self.index.node_for_pod(pod, namespace)
        return node if node and self.knows(node) else None


__all__ = ["ClusterIndex", "NAME_LABELS", "NodeResolver", "Resolution", "strip_port"]
