"""PodGC, kube-controller-manager's pod garbage collector, in simulated time (pkg/controller/podgc/gc_controller.go,
v1.36.2). It makes one pass every gcCheckPeriod (20 s); each pass:

- gcTerminated: deletes the oldest terminated pods beyond --terminated-pod-gc-threshold (12,500 by default). Not
  modelled: a simulated cluster never holds that many, and below it finished pods stay (as here).
- gcTerminating: a terminating pod on a NotReady node tainted `node.kubernetes.io/out-of-service` (non-graceful
  node shutdown) is marked Failed and deleted — at the first pass after it qualifies, up to 20 s later, not at once.
- gcOrphaned: a pod bound to a node that no longer exists puts the node in a queue for quarantineTime (40 s) at the
  first pass that sees it; the first pass after that, if the node is still gone, marks the pod Failed with
  DisruptionTarget (DeletionByPodGC, "PodGC: node no longer exists") and deletes it: 40-60 s after the node went.

Passes fall every 20 simulated seconds from the cluster's boot. The orphan delay is beyond
what a test on the real lane can wait for; tests/sim/conformance/test_pods.py pins both in scaled time on the simulator,
and the out-of-service pass on the real server too.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

GC_CHECK_PERIOD = 20.0  # gc_controller.go gcCheckPeriod
QUARANTINE_TIME = 40.0  # gc_controller.go quarantineTime


def until_next_pass(cluster: Cluster) -> float:
    """Simulated seconds until PodGC's next pass (passes every GC_CHECK_PERIOD since boot)."""
    if cluster.time_scale <= 0:
        return 0.0
    elapsed = (time.monotonic() - cluster.booted) / cluster.time_scale
    return GC_CHECK_PERIOD - elapsed % GC_CHECK_PERIOD


def _pass_index(cluster: Cluster, at: float) -> int:
    if cluster.time_scale <= 0:
        return 0
    return int((at - cluster.booted) / cluster.time_scale // GC_CHECK_PERIOD)


def node_deleted(cluster: Cluster, node: str) -> None:
    """gcOrphaned for `node`'s pods: seen at the next pass, quarantined 40 s, then deleted if the node is still gone."""
    from remedy.sim.controller import BY_POD_GC, delete_pod

    def collect() -> None:
        if cluster.store.get("Node", "", node) is not None:
            return  # back meanwhile (discoverDeletedNodes checks the API server): its pods are not orphans
        for pod in list(cluster.index.on_node(node)):
            delete_pod(cluster, pod["metadata"]["namespace"], pod["metadata"]["name"], 0, disruption=BY_POD_GC)

    cluster.call_later(until_next_pass(cluster) + QUARANTINE_TIME, collect)


def terminating_collected(cluster: Cluster, key: tuple[str, str]) -> bool:
    """gcTerminating: True once a pass has come since the pod `key` qualified (first asked about now); until then
    its next pass is on the timer so the caller is asked again."""
    now = time.monotonic()
    seen = cluster.podgc_seen.setdefault(key, now)
    if _pass_index(cluster, now) > _pass_index(cluster, seen):
        cluster.podgc_seen.pop(key, None)
        return True
    if seen == now:
        cluster.call_later(until_next_pass(cluster) + 1e-3, lambda: None)  # wake the loop at that pass
    return False
