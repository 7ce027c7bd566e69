"""Kubernetes adapter: the `ClusterPort` over the official `kubernetes` client.

Same code against a real API server (kubeconfig / in-cluster) and the embedded simulator (plain HTTP).
Design choices worth knowing:
- Reads go through the client with `_preload_content=False` and are parsed as JSON dicts: deserialising 2,048
  V1Node models costs seconds, the JSON a few tens of milliseconds. Every list is read in pages
  (`cluster.list_page_size`, `limit` / `continue`); a continue token that expired (410) restarts the list once.
- The GPU nodes are listed once per process and then kept current by a watch (`NodeCache`, an informer):
  `list_gpu_nodes` and `get_node` answer from it while it is fresh, so a gate decision at 12,500 nodes does not
  read the fleet from the API server. Writes read the node from the server (never act on a cached view) and put
  their answer into the cache at once.
- Node.spec.taints is an atomic list on the API server, so taints are merged by (key, effect) here and written with
  a resourceVersion precondition; a 409 means someone else wrote first: re-read and merge again.
- Every mutation is idempotent ("already cordoned" is success, `changed=False`) and records a Kubernetes Event on
  the Node so `kubectl describe node` tells the story. In dry-run nothing is written, not even events.
- Every call goes through one retry policy (remedy.adapters.apierrors): busy answers (429, 503, ...) and
  connection errors are retried honouring Retry-After; every other answer raises an error named by its meaning.
- gpu-remedy marks what it did in annotations (`remedy.io/cordoned-by` …); a node that carries the mark but is
  schedulable again was uncordoned by a person. `detect_drift` reports it and the flows never fight it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import random
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from remedy.adapters.apierrors import ApiRetry, DisruptionRefused, MultipleBudgets
from remedy.adapters.cluster import Change, DrainReport, Drift, JobResult, NodeJobSpec, Taint
from remedy.adapters.workloads import (
    SUSPENDABLE,
    TrainingWorkload,
    WorkloadRefused,
    _ignores_disruptions,
    _ready,
    open_workload,
    workload_of_pod,
)
from remedy.config import ClusterMode, RemedySettings, WorkloadKind
from remedy.domain import events
from remedy.domain.model import Node, NodeState, Topology
from remedy.domain.names import event_name
from remedy.errors import (
    AlreadyExists,
    ClusterUnreachable,
    Conflict,
    NodeNotFound,
    ObjectNotFound,
    RemedyError,
)
from remedy.ledger.errors import LeaseLost
from remedy.safety.disruption import BudgetView, PodBudgets
from remedy.safety.fence import ANN_FENCE, FenceLost, NodeFence, stood_down_line
from remedy.safety.fleet import next_version
from remedy.spares.preemption import Workload

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"  # k8s.io/api/batch/v1 JobTrackingFinalizer
log = logging.getLogger(__name__)
T = TypeVar("T")

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
SMP = "application/strategic-merge-patch+json"
ANN_CORDONED_BY = "remedy.io/cordoned-by"
ANN_CORDONED_AT = "remedy.io/cordoned-at"
ANN_REASON = "remedy.io/cordon-reason"
EVENT_NAMESPACE = "default"  # where the API server keeps events about cluster-scoped objects such as Nodes


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _api_configuration(settings: RemedySettings) -> k8s.Configuration:
    access = settings.cluster
    cfg = k8s.Configuration()
    if access.mode is ClusterMode.SIMULATOR:
        cfg.host = access.simulator_url.rstrip("/")
    elif access.mode is ClusterMode.KUBECONFIG:
        k8s_config.load_kube_config(config_file=access.kubeconfig, context=access.context, client_configuration=cfg)
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)
    cfg.retries = False  # retries are ours (`ApiRetry`: Retry-After honoured, a clear error at the end)
    cfg.connection_pool_maxsize = 64  # burn-in polls one Job per node from many threads at once
    return cfg


def render_node_job(spec: NodeJobSpec, settings: RemedySettings) -> dict:
    """The Job manifest for `spec` (templates/node-job.yaml.j2), without a cluster: `remedy deploy` shows these."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=False)
    text = env.get_template("node-job.yaml.j2").render(spec=spec, namespace=settings.cluster.jobs_namespace,
                                                       taints=settings.taints)
    return yaml.safe_load(text)


class KubernetesCluster:
    """ClusterPort over the official client. `dry_run` is passed down from the flow, never branched on there."""

    def __init__(self, settings: RemedySettings, *, dry_run: bool | None = None, actor: str = "gpu-remedy",
                 watch_nodes: bool = True) -> None:
        """`watch_nodes`: keep the GPU nodes in a watch-fed cache from the first `list_gpu_nodes` on (NodeCache);
        False lists them from the API server every time."""
        self.settings = settings
        self.watch_nodes = watch_nodes
        self._cache: NodeCache | None = None
        self._cache_lock = threading.Lock()
        self.dry_run = settings.dry_run if dry_run is None else dry_run
        self.actor = actor
        self._cfg = _api_configuration(settings)
        self.api = k8s.ApiClient(self._cfg)
        self.core = k8s.CoreV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.policy = k8s.PolicyV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)  # JobSet, PyTorchJob, Kueue Workload (remedy.adapters.workloads)
        self._timeout = settings.cluster.request_timeout_seconds
        self._retry = ApiRetry(settings.cluster.api_retries + 1)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.stop()
        self.api.close()

    def node_cache(self, start: bool = True) -> NodeCache | None:
        """The watch-fed GPU node cache, started (and its first list awaited) on first use; None when off."""
        if not self.watch_nodes:
            return None
        with self._cache_lock:
            if self._cache is None and start:
                self._cache = NodeCache(self._cfg, self.settings).start()
                weakref.finalize(self, self._cache.stop)  # the thread holds the cache, never this adapter
            cache = self._cache
        if cache is not None and start:
            cache.synced.wait(self._timeout * 2)
        return cache

    def __enter__(self) -> KubernetesCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call the API through the one retry policy (remedy.adapters.apierrors): busy answers and connection
        errors are retried, honouring Retry-After; the rest raise an error named by its meaning (ObjectNotFound,
        Conflict, Rejected, Forbidden, ...) that says what we tried, in one line."""
        kwargs.setdefault("_request_timeout", self._timeout)
        return self._retry.call(what, self._cfg.host, fn, *args, **kwargs)

    def _json(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        resp = self._call(what, fn, *args, _preload_content=False, **kwargs)
        return json.loads(resp.data)

    def _list(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict]:
        """Every item of a list, read in pages of `cluster.list_page_size` (paged_list)."""
        return paged_list(self._json, self.settings.cluster.list_page_size, what, fn, *args, **kwargs)[0]

    def _node_json(self, name: str) -> dict:
        try:
            return self._json(f"read node {name}", self.core.read_node, name)
        except ObjectNotFound:
            raise NodeNotFound(name) from None

    def _patch_node(self, name: str, body: dict, what: str) -> dict:
        try:
            resp = self._call(f"{what} on {name}", self.core.patch_node, name, body, _content_type=SMP,
                              _preload_content=False)
            obj = json.loads(resp.data)
        except ObjectNotFound:
            raise NodeNotFound(name) from None
        if self._cache is not None:
            self._cache.apply(obj)
        return obj

    def _read_node(self, name: str) -> Node:
        """The node as the API server has it now: what a write decides on."""
        node_json = self._node_json(name)
        if self._cache is not None:
            self._cache.apply(node_json)
        return self._to_node(node_json)

    # ------------------------------------------------------------------ reads
    def list_gpu_nodes(self) -> list[Node]:
        """Every GPU node (`cluster.node_selector`): from the watch-fed cache while it is fresh (shared objects:
        read them, do not change them), else listed."""
        cache = self.node_cache()
        if cache is not None and cache.fresh():
            return cache.nodes()
        items = self._list("list GPU nodes", self.core.list_node, label_selector=self.settings.cluster.node_selector)
        return [self._to_node(item) for item in items]

    def gpu_node_snapshot(self) -> tuple[int | None, list[Node]]:
        """(version, every GPU node): from the watch-fed cache while it is fresh, its generation naming exactly that
        state of the nodes (remedy.safety.fleet keeps the gate's summary of it); else listed, with no version."""
        cache = self.node_cache()
        if cache is not None and cache.fresh():
            return cache.snapshot()
        return None, self.list_gpu_nodes()

    def get_node(self, name: str) -> Node:
        """One node: from the node cache if this process keeps one and it is fresh (a node it does not hold, e.g.
        outside the GPU selector, is read from the API server), else read."""
        cache = self._cache
        if cache is not None and cache.fresh():
            node = cache.get(name)
            if node is not None:
                return node
        return self._read_node(name)

    def node_addresses(self) -> dict[str, str]:
        """Every address a GPU node reports (status.addresses: InternalIP, ExternalIP, Hostname, …) → the node's
        name: from the watch-fed node cache while it is fresh, else one list of the Nodes (the receiver's identity
        index reads it at most once per its TTL)."""
        cache = self.node_cache()  # the receiver's process keeps the GPU nodes watch-fed from its first alert on
        if cache is not None and cache.fresh():
            served: dict[str, str] = {}
            for node in cache.nodes():
                for address in node.addresses:
                    served.setdefault(address, node.name)
            return served
        items = self._list("list GPU node addresses", self.core.list_node,
                           label_selector=self.settings.cluster.node_selector)
        out: dict[str, str] = {}
        for item in items:
            name = (item.get("metadata") or {}).get("name", "")
            for addr in (item.get("status") or {}).get("addresses") or []:
                if addr.get("address") and name:
                    out.setdefault(addr["address"], name)
        return out

    def pod_node(self, pod: str, namespace: str | None = None) -> str | None:
        """The node a pod runs on (spec.nodeName), found by name (in `namespace`, else in any namespace): an
        exporter's `Hostname` label is its pod's name unless it runs with hostNetwork or NODE_NAME. None when no
        such pod is scheduled, or the name is ambiguous across namespaces."""
        selector = f"metadata.name={pod}" + (f",metadata.namespace={namespace}" if namespace else "")
        items = self._list(f"find pod {pod}", self.core.list_pod_for_all_namespaces, field_selector=selector)
        nodes = {(i.get("spec") or {}).get("nodeName") for i in items} - {None, ""}
        return nodes.pop() if len(nodes) == 1 else None

    def pods_on_node(self, name: str) -> list[dict]:
        return self._list(
            f"list pods on {name}",
            self.core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={name},status.phase!=Succeeded,status.phase!=Failed",
        )

    def read_job(self, namespace: str, job: str) -> dict:
        """A Job as the API serves it (spec and status), e.g. for its failed pods against its backoffLimit."""
        return self._json(f"read job {namespace}/{job}", self.batch.read_namespaced_job, job, namespace)

    def workload(self, namespace: str, name: str, kind: WorkloadKind | str | None = None) -> TrainingWorkload:
        """The training workload (settings `workload.kind` unless `kind` is given), driven through its controller."""
        return open_workload(self, kind or self.settings.workload.kind, namespace, name)

    def workload_size(self, namespace: str, job: str) -> tuple[int, int]:
        """(ready pods, desired pods) of the gang-scheduled training workload."""
        state = self.workload(namespace, job).state()
        return state.ready, state.desired

    def restart_pods(self, node: str, namespace: str, fence: NodeFence | None = None) -> list[str]:
        """Evict the workload's pods on `node` (not DaemonSet/mirror ones); their controller recreates them.
        The node stays schedulable: this is the in-place RESTART_APP fix, not a drain. Evicted, not deleted: the
        Eviction API marks a pod DisruptionTarget, which a Job's podFailurePolicy can ignore, whereas a plain
        delete counts toward the Job's backoffLimit (job_controller.go isPodFailed). A budget that refuses
        for longer than a minute leaves the pod running; the returned names are the pods restarted.
        In the training workload's namespace it is that workload's restart, as its controller defines it (a JobSet's
        may be a gang restart, refused when failurePolicy.maxRestarts is used up: WorkloadRefused)."""
        work = self.settings.workload
        self.fence_node(node, fence)  # the incident's fence, right before the restart (remedy.safety.fence)
        if namespace == work.namespace:
            return list(self.workload(namespace, work.job).restart(node).pods)
        pods = [p for p in self.pods_on_node(node)
                if p["metadata"].get("namespace") == namespace and not _skip_reason(p)]
        names = [p["metadata"]["name"] for p in pods]
        if self.dry_run:
            return names
        deadline = min(60.0, self.settings.drain.eviction_deadline_seconds)
        evicted, not_evicted, _, _ = self._evict([f"{namespace}/{n}" for n in names], None, time.monotonic(),
                                                 deadline, self._job_backoff_exempt(pods))
        for key, why in sorted(not_evicted.items()):
            self.record_event(node, reason="RemedyRestartRefused", type="Warning",
                              message=f"Cannot restart {key}: {why}")
        restarted = [k.split("/", 1)[1] for k in evicted]
        self.record_event(node, reason="RemedyRestartApp",
                          message=f"Restarted {len(restarted)} pod(s) in {namespace}; the node stays in service")
        return restarted

    def workload_nodes(self, namespace: str, job: str) -> list[str]:
        """Nodes that run a pod of the training Job (the suspects when the job, not a node, reports a fault)."""
        pods = self._list(f"list pods of {namespace}/{job}", self.core.list_namespaced_pod, namespace,
                          label_selector=self.workload(namespace, job).pod_selector())
        return sorted({p["spec"]["nodeName"] for p in pods
                       if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") == "Running"})

    def workload_running_on(self, namespace: str, job: str, node: str) -> bool:
        """Is a pod of the training Job running on `node` (the promoted spare took its share of the work)?"""
        pods = self._list(f"list pods of {namespace}/{job} on {node}", self.core.list_namespaced_pod, namespace,
                          label_selector=self.workload(namespace, job).pod_selector(),
                          field_selector=f"spec.nodeName={node}")
        return any((p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
                   for p in pods)

    def resize_workload(self, namespace: str, job: str, nodes: int) -> dict:
        """Set the training workload's size as its controller allows (elastic jobs continue with fewer nodes inside
        their min:max range). A size the controller refuses is reported under "refused", nothing changed."""
        try:
            change = self.workload(namespace, job).resize(nodes)
        except WorkloadRefused as exc:
            return {"job": f"{namespace}/{job}", "nodes": nodes, "changed": False, "refused": str(exc),
                    "dry_run": self.dry_run}
        return change.as_dict() | {"job": f"{namespace}/{job}", "nodes": nodes, "parallelism": nodes}

    def joined(self, name: str) -> tuple[bool, str]:
        """Did the node really join the pool: Ready, schedulable, all its GPUs allocatable (seed 002 lost hours
        to a replaced node that never rejoined)?"""
        node = self.get_node(name)
        problems = []
        if not node.ready:
            problems.append("not Ready")
        if node.unschedulable:
            problems.append("cordoned")
        tolerated = set(self.settings.taints.tolerated)  # provider GPU taints: GPU pods tolerate them
        blocking = sorted({f"{k}:{e}" for k, e in node.taints
                           if e in ("NoSchedule", "NoExecute") and k not in tolerated})
        if blocking:
            problems.append("tainted " + ", ".join(blocking))
        if node.gpu_count and node.allocatable_gpus < node.gpu_count:
            problems.append(f"only {node.allocatable_gpus}/{node.gpu_count} GPUs allocatable")
        return (not problems, "; ".join(problems) or "Ready, schedulable, all GPUs allocatable")

    def _to_node(self, obj: dict) -> Node:
        return node_from_json(obj, self.settings.labels)

    # ------------------------------------------------------------------ cordon / taints / labels
    def cordon(self, name: str, *, reason: str, by: str, adopt: str | None = None,
               fence: NodeFence | None = None) -> Change:
        """Cordon with who and why in annotations. `adopt` names a cordon owner this caller takes over (the
        receiver's quarantine at intake of the same incident): its cordon becomes this caller's; the same
        quarantine uncordoned by hand since is left as the operator set it (the flow's drift check stops there).
        `fence`: only while the run still holds its incident (remedy.safety.fence), enforced by the API server."""

        def plan(node: Node, obj: dict) -> tuple[Change, dict | None]:
            owner = node.annotations.get(ANN_CORDONED_BY)
            if adopt and owner == adopt and not node.unschedulable:
                return Change(name, "cordon", changed=False, dry_run=self.dry_run,
                              detail="quarantined at intake, then uncordoned by hand: left as the operator set it"), None
            if node.unschedulable and adopt and owner == adopt:
                if self.dry_run:
                    return Change(name, "cordon", changed=True, dry_run=True,
                                  detail=f"would take over {owner}'s cordon"), None
                return (Change(name, "cordon", changed=True, detail=f"took over the cordon of {owner}: {reason}"),
                        {"metadata": {"annotations": {ANN_CORDONED_BY: by, ANN_CORDONED_AT: _now(),
                                                      ANN_REASON: reason[:250]}}})
            if node.unschedulable:
                detail = "already cordoned" + (f" by {owner}" if owner else " by someone else")
                return Change(name, "cordon", changed=False, dry_run=self.dry_run, detail=detail), None
            if self.dry_run:
                return Change(name, "cordon", changed=True, dry_run=True, detail=f"would cordon: {reason}"), None
            return Change(name, "cordon", changed=True, detail=reason), {
                "spec": {"unschedulable": True},
                "metadata": {"annotations": {ANN_CORDONED_BY: by, ANN_CORDONED_AT: _now(), ANN_REASON: reason[:250]}},
            }

        change, _ = self._write_node(name, "cordon", plan, fence)
        if change.changed and not change.dry_run and not change.detail.startswith("took over"):
            self.record_event(name, reason=events.CORDON, message=f"Cordoned by {by}: {reason}", type="Warning")
        return change

    def uncordon(self, name: str, *, reason: str, by: str, fence: NodeFence | None = None) -> Change:
        def plan(node: Node, obj: dict) -> tuple[Change, dict | None]:
            if not node.unschedulable and ANN_CORDONED_BY not in node.annotations:
                return Change(name, "uncordon", changed=False, dry_run=self.dry_run, detail="already schedulable"), None
            if self.dry_run:
                return Change(name, "uncordon", changed=True, dry_run=True, detail=f"would uncordon: {reason}"), None
            return Change(name, "uncordon", changed=True, detail=reason), {
                "spec": {"unschedulable": None},
                "metadata": {"annotations": {ANN_CORDONED_BY: None, ANN_CORDONED_AT: None, ANN_REASON: None}},
            }

        change, node = self._write_node(name, "uncordon", plan, fence)
        if not change.changed or change.dry_run:
            return change
        if (OUT_OF_SERVICE, "NoExecute") in node.taints:  # a drain marked it while it was down (_release_stuck)
            self.set_taints(name, remove=[OUT_OF_SERVICE], fence=fence)
        self.record_event(name, reason=events.UNCORDON, message=f"Uncordoned by {by}: {reason}")
        return change

    def set_taints(self, name: str, *, add: list[Taint] | None = None, remove: list[str] | None = None,
                   fence: NodeFence | None = None) -> Change:
        """Merge taints as `kubectl taint` does: a taint is its (key, effect), so add replaces the same key and effect
        (its value) and keeps the key's other effects; remove drops every effect of a key. Written with a
        resourceVersion precondition."""
        add, remove = list(add or []), set(remove or [])
        replaced = {(a.key, a.effect) for a in add}
        summary = _taint_summary(add, remove)

        def plan(node: Node, obj: dict) -> tuple[Change, dict | None]:
            current = list((obj.get("spec") or {}).get("taints") or [])
            wanted = [t for t in current
                      if t.get("key") not in remove and (t.get("key"), t.get("effect")) not in replaced]
            wanted += [a.to_k8s() for a in add]
            if _taint_set(wanted) == _taint_set(current):
                return Change(name, "taint", changed=False, dry_run=self.dry_run,
                              detail="taints already as wanted"), None
            if self.dry_run:
                return Change(name, "taint", changed=True, dry_run=True, detail=f"would set taints: {summary}"), None
            # an atomic list: the whole list is written, so only over the version it was merged from
            return Change(name, "taint", changed=True, detail=summary), {
                "metadata": {"resourceVersion": node.resource_version}, "spec": {"taints": wanted}}

        change, _ = self._write_node(name, "set taints", plan, fence,
                                     note=f"{name}: taints changed concurrently, re-reading")
        if change.changed and not change.dry_run:
            self.record_event(name, reason=events.TAINT, message=f"Taints changed by {self.actor}: {summary}")
        return change

    def set_labels(self, name: str, labels: dict[str, str | None], fence: NodeFence | None = None) -> Change:
        summary = ", ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in sorted(labels.items()))

        def plan(node: Node, obj: dict) -> tuple[Change, dict | None]:
            if all(node.labels.get(k) == v for k, v in labels.items()):
                return Change(name, "label", changed=False, dry_run=self.dry_run,
                              detail="labels already as wanted"), None
            if self.dry_run:
                return Change(name, "label", changed=True, dry_run=True, detail=f"would label: {summary}"), None
            return Change(name, "label", changed=True, detail=summary), {"metadata": {"labels": labels}}

        change, _ = self._write_node(name, "set labels", plan, fence)
        if change.changed and not change.dry_run:
            self.record_event(name, reason=events.LABEL, message=f"Labels changed by {self.actor}: {summary}")
        return change

    # ------------------------------------------------------------------ the incident's fence (remedy.safety.fence)
    def fence_node(self, name: str, fence: NodeFence | None) -> None:
        """Right before a call that is not a Node write (evictions, a reset or reboot Job, a pod restart): may this
        run still act on `name` for its incident? The fence is read fresh from the API server; if it is this
        run's, nothing is written (a conditional write that changes nothing would prove no more: the API server
        does not even store it, storage/etcd3/store.go GuaranteedUpdate); else the ledger is asked and the fence
        written with the resourceVersion precondition. Raises FenceLost (with a log line and an Event) if the run
        no longer holds the incident. In dry-run nothing is read or written."""
        if fence is None or self.dry_run:
            return
        self._write_node(name, "fence", lambda node, obj: (Change(name, "fence", changed=False), None), fence)

    def _write_node(self, name: str, what: str, plan: Callable[[Node, dict], tuple[Change, dict | None]],
                    fence: NodeFence | None, note: str = "") -> tuple[Change, Node]:
        """Read the Node as the API server has it, `plan` the change on it, write it. With a `fence`: the write
        also sets the run's fence and carries the resourceVersion read (a 409 if the Node changed since: read and
        plan again), and a fence that is not this run's is first confirmed with the ledger, refused with FenceLost.
        A body that carries its own resourceVersion (an atomic list) is retried the same way without a fence."""

        def once() -> tuple[Change, Node]:
            obj = self._node_json(name)
            if self._cache is not None:
                self._cache.apply(obj)
            node = self._to_node(obj)
            change, body = plan(node, obj)
            if self.dry_run:
                return change, node
            if fence is not None:
                holder = node.annotations.get(ANN_FENCE, "")
                if holder != fence.token:
                    self._confirm_fence(name, fence, what, holder)
                    body = body or {}
                if body is not None:
                    meta = body.setdefault("metadata", {})
                    meta["resourceVersion"] = node.resource_version
                    meta["annotations"] = dict(meta.get("annotations") or {}, **{ANN_FENCE: fence.token})
            if body is not None:
                self._patch_node(name, body, what)
            return change, node

        try:
            return _on_conflict(note or f"{name}: changed while we wrote ({what}), re-reading")(once)
        except Conflict:
            raise Conflict(f"{name}: kept changing underneath us ({what}); gave up after "
                           f"{CONFLICT_ATTEMPTS} attempts") from None

    def _confirm_fence(self, name: str, fence: NodeFence, what: str, holder: str) -> None:
        """The node's fence is not this run's: the ledger says whether the run still holds the incident. Refused:
        one log line, one Event on the node, FenceLost."""
        try:
            fence.confirm()
        except LeaseLost as exc:
            line = stood_down_line(name, fence, what, holder)
            log.warning("%s (%s)", line, exc)
            self.record_event(name, reason=events.STOOD_DOWN, type="Warning", message=line)
            raise FenceLost(line) from exc

    def detect_drift(self, name: str) -> Drift | None:
        node = self._read_node(name)
        if node.annotations.get(ANN_CORDONED_BY) and not node.unschedulable:
            return Drift(
                name,
                "uncordoned by hand",
                f"cordoned by {node.annotations[ANN_CORDONED_BY]} at {node.annotations.get(ANN_CORDONED_AT, '?')}, "
                "schedulable now",
            )
        return None

    # ------------------------------------------------------------------ drain
    def drain(self, name: str, *, grace_period_seconds: int, deadline_seconds: float,
              fence: NodeFence | None = None) -> DrainReport:
        """Evict every pod but DaemonSet, mirror and finished ones; retry PDB 429s with backoff until the deadline.
        `fence`: checked on the Node before each round of evictions and before a force-delete (fence_node)."""
        start = time.monotonic()
        report = DrainReport(node=name, dry_run=self.dry_run)
        down = not self._read_node(name).ready  # NodeNotFound early, before listing pods
        self.fence_node(name, fence)  # the incident's fence first, even with nothing left to evict
        to_evict: list[dict] = []
        for pod in self.pods_on_node(name):
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            why = _skip_reason(pod)
            if why:
                report.skipped.append(f"{key} ({why})")
            else:
                to_evict.append(pod)
        if self.dry_run:
            report.evicted = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in to_evict]
            return report
        keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in to_evict]
        rounds = [0]

        def again() -> None:  # the fence again before each later round of evictions (they can span minutes)
            rounds[0] += 1
            if rounds[0] > 1:
                self.fence_node(name, fence)

        report.evicted, report.not_evicted, report.blocked_retries, report.refused = self._evict(
            keys, grace_period_seconds, start, deadline_seconds, self._job_backoff_exempt(to_evict), guard=again)
        if down and self.settings.drain.force_delete_when_not_ready:
            # no kubelet to confirm their end: waiting out the grace period would only delay the job's move
            self._release_stuck(name, self.pods_on_node(name), report, at_once=True, fence=fence)
        else:
            self._wait_pods_gone(name, report, start, deadline_seconds, grace_period_seconds, fence=fence)
        for key, why in report.refused.items():  # no wait helps these: say so where on-call looks
            self.record_event(name, reason="RemedyEvictionRefused", type="Warning",
                              message=f"Cannot evict {key}: {why}")
        report.seconds = time.monotonic() - start
        self.record_event(
            name,
            reason="RemedyDrain",
            message=f"Drained by {self.actor}: {len(report.evicted)} evicted, {len(report.skipped)} skipped, "
            f"{len(report.not_evicted)} not evicted",
            type="Normal" if report.complete else "Warning",
        )
        return report

    def _evict(self, keys: list[str], grace_period_seconds: int | None, start: float, deadline_seconds: float,
               exempt: set[str] | frozenset[str] = frozenset(), guard: Callable[[], None] | None = None
               ) -> tuple[list[str], dict[str, str], int, dict[str, str]]:
        """Evict "namespace/name" pods through the Eviction API. A PodDisruptionBudget's 429 is retried with back-off
        (`drain.pdb_backoff_seconds`, doubling to 30 s) until the deadline, then reported; a pod under more than one
        budget is refused by the API on every attempt, so it is reported at once with the budgets' names, never
        retried. `exempt` ("namespace/name", from `_job_backoff_exempt`): pods taken out of their Job's failure
        back-off right after their eviction is accepted. Returns (evicted, not evicted with why, 429s seen, refused
        with why)."""
        evicted: list[str] = []
        not_evicted: dict[str, str] = {}
        refused: dict[str, str] = {}
        blocked = 0
        pending = list(keys)

        def one_round() -> list[str]:
            nonlocal blocked
            if guard is not None and pending:  # the incident's fence, right before this round's evictions
                guard()
            for key in list(pending):
                ns, pod_name = key.split("/", 1)
                body = k8s.V1Eviction(
                    metadata=k8s.V1ObjectMeta(name=pod_name, namespace=ns),
                    delete_options=k8s.V1DeleteOptions(grace_period_seconds=grace_period_seconds),
                )
                try:
                    self._call(f"evict {key}", self.core.create_namespaced_pod_eviction, pod_name, ns, body)
                    evicted.append(key)
                    if key in exempt:
                        self._leave_job_backoff(ns, pod_name)
                except ObjectNotFound:  # already gone: the goal is reached
                    evicted.append(key)
                except DisruptionRefused as exc:  # the budget may allow it later: keep it pending
                    blocked += 1
                    not_evicted[key] = str(exc)
                    continue
                except MultipleBudgets:
                    refused[key] = not_evicted[key] = self._multiple_budgets(ns, pod_name)
                except ClusterUnreachable:
                    raise
                except RemedyError as exc:
                    not_evicted[key] = str(exc)
                pending.remove(key)
            return pending

        backoff = wait_exponential(multiplier=self.settings.drain.pdb_backoff_seconds, max=30.0)

        def until_deadline(state: RetryCallState) -> float:
            return min(backoff(state), max(0.0, deadline_seconds - (time.monotonic() - start)))

        # rounds over the pods still pending, until none is or the deadline has passed
        remaining = max(0.0, deadline_seconds - (time.monotonic() - start))
        Retrying(retry=retry_if_result(bool), stop=stop_after_delay(remaining), wait=until_deadline,
                 retry_error_callback=lambda state: state.outcome.result())(one_round)
        for key in evicted:
            not_evicted.pop(key, None)
        return evicted, not_evicted, blocked, refused

    def _job_backoff_exempt(self, pods: list[dict]) -> set[str]:
        """The "namespace/name" pods among `keys` whose eviction should not delay their Job's next pod: pods of a
        batch/v1 Job whose podFailurePolicy ignores DisruptionTarget, still carrying the job-tracking finalizer.

        Why: the Job controller waits 10 s x 2^(n-1), capped at 10 min, after the n-th pod failure since the Job's
        last success before it creates a pod (pkg/controller/job/job_controller.go v1.36.2, manageJob →
        backoffRecord.getRemainingTime; backoff_utils.go newBackoffRecord, getRemainingTimeForFailuresCount). The
        failures are every pod getNewFinishedPods finds isPodFailed — an evicted pod its policy Ignores included —
        and only a succeeded pod, or the Job's deletion or end, resets them; a training gang never succeeds, so from
        the 7th drain in its life every replacement waited 10 min. getValidPodsWithFilter looks only at pods that
        still carry `batch.kubernetes.io/job-tracking`, and deleteJobPods removes it before it deletes a pod, which
        is why the controller's own deletions (suspend, scale-down) never count; `_leave_job_backoff` does the same
        once such a pod is evicted. A Job without that Ignore rule is left alone: there a drained pod is a failure
        by the Job's own rules. Read before evicting (the pods as listed, their Jobs once each), so after an eviction
        only one write is left to race the pod's end. Best effort: a Job that cannot be read exempts nothing."""
        exempt: set[str] = set()
        jobs: dict[tuple[str, str], dict | None] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            ns = meta.get("namespace", "")
            key = f"{ns}/{meta.get('name', '')}"
            owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            if JOB_TRACKING_FINALIZER not in (meta.get("finalizers") or []) or not owner \
                    or owner.get("kind") != "Job" or not str(owner.get("apiVersion", "")).startswith("batch/"):
                continue
            if (ns, owner["name"]) not in jobs:
                try:
                    jobs[(ns, owner["name"])] = self._json(f"read job {ns}/{owner['name']}",
                                                           self.batch.read_namespaced_job, owner["name"], ns)
                except RemedyError:
                    jobs[(ns, owner["name"])] = None
            job = jobs[(ns, owner["name"])]
            if job and job["metadata"].get("uid") == owner.get("uid") and _ignores_disruptions(job.get("spec") or {}):
                exempt.add(key)
        return exempt

    def _leave_job_backoff(self, namespace: str, pod_name: str) -> None:
        """Take an evicted pod's job-tracking finalizer off while it terminates (see `_job_backoff_exempt`), as the
        Job controller's deleteJobPods does: its end is then never counted, so the Job's next pod does not wait out
        the failure back-off. A failed patch leaves the pod evicted and only costs that wait."""
        try:
            self._call(f"release {namespace}/{pod_name} from its Job's failure back-off",
                       self.core.patch_namespaced_pod, pod_name, namespace,
                       {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}},
                       _content_type="application/strategic-merge-patch+json")
            log.info("evicted %s/%s: job-tracking finalizer removed (its Job's podFailurePolicy ignores the "
                     "disruption; no failure back-off)", namespace, pod_name)
        except ObjectNotFound:
            pass
        except RemedyError as exc:
            log.warning("evicted %s/%s but could not remove its job-tracking finalizer (the Job's next pod may wait "
                        "out its failure back-off): %s", namespace, pod_name, exc)

    def pod_budgets(self, node: str) -> list[PodBudgets]:
        """The pods a drain of `node` would evict, each with the PodDisruptionBudgets over it (spec and the disruption
        controller's status), read before draining (remedy.safety.disruption judges them)."""
        pods = [p for p in self.pods_on_node(node) if not _skip_reason(p)]
        budgets: dict[str, list[dict]] = {}
        for ns in sorted({p["metadata"].get("namespace", "") for p in pods}):
            budgets[ns] = self._list(f"list PodDisruptionBudgets in {ns}",
                                     self.policy.list_namespaced_pod_disruption_budget, ns)
        out = []
        for p in pods:
            meta = p["metadata"]
            ns, labels = meta.get("namespace", ""), meta.get("labels") or {}
            owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            over = tuple(BudgetView.from_api(b | {"metadata": {"namespace": ns, **(b.get("metadata") or {})}})
                         for b in budgets[ns] if _selects((b.get("spec") or {}).get("selector"), labels))
            out.append(PodBudgets(pod=f"{ns}/{meta['name']}", owner=f"{owner['kind']} {ns}/{owner['name']}"
                                  if owner else "", ready=_ready(p), budgets=over))
        return out

    def _multiple_budgets(self, namespace: str, pod: str) -> str:
        """Why the Eviction API refuses `pod`, naming the budgets (the API's 500 does not: it says only "more than
        one PodDisruptionBudget"). Best effort: a failed look-up still gives the API's words."""
        names: list[str] = []
        try:
            labels = (self._json(f"read pod {namespace}/{pod}", self.core.read_namespaced_pod, pod, namespace)
                      .get("metadata") or {}).get("labels") or {}
            budgets = self._list(f"list PodDisruptionBudgets in {namespace}",
                                 self.policy.list_namespaced_pod_disruption_budget, namespace)
            names = sorted(b["metadata"]["name"] for b in budgets if _selects((b.get("spec") or {}).get("selector"),
                                                                              labels))
        except RemedyError as exc:
            log.warning("could not name the budgets covering %s/%s: %s", namespace, pod, exc)
        which = f" ({', '.join(names)})" if names else ""
        return (f"covered by more than one PodDisruptionBudget{which}: the Eviction API refuses such a pod every "
                "time; a person must merge the budgets or delete the pod")

    def _wait_pods_gone(self, name: str, report: DrainReport, start: float, deadline: float, grace: int,
                        fence: NodeFence | None = None) -> None:
        """Evicted pods terminate within their grace period; wait for that (bounded by grace + deadline). On a
        NotReady node no kubelet confirms their end, so pods still Terminating after their grace period
        (deletionTimestamp passed) are force-deleted — see _release_stuck."""
        evicted = set(report.evicted)
        limit = start + deadline + grace
        first = True
        while evicted or first:
            pods = self.pods_on_node(name)
            if (first or evicted) and self.settings.drain.force_delete_when_not_ready:
                self._release_stuck(name, pods, report, fence=fence)
            first = False
            left = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods} - set(report.force_deleted)
            evicted &= left
            if not evicted or time.monotonic() > limit:
                break
            time.sleep(0.1)
        for key in evicted:
            report.not_evicted[key] = "evicted but still terminating at the deadline"

    def _release_stuck(self, name: str, pods: list[dict], report: DrainReport, at_once: bool = False,
                       fence: NodeFence | None = None) -> None:
        """Pods Terminating past their grace period on a NotReady node: its kubelet cannot confirm their end, so
        they would hold their place (and a Job with podReplacementPolicy Failed would never replace them) until
        the node came back. Taint the node `node.kubernetes.io/out-of-service` (non-graceful node shutdown:
        PodGC marks such pods Failed and deletes them, pkg/controller/podgc/gc_controller.go gcTerminating)
        and force-delete them (grace 0, as `kubectl delete --force`). Only for a NotReady node: on a Ready one
        the kubelet is still stopping them. `at_once`: every terminating pod, not only those past their grace
        period (the node was NotReady when drained). Off with drain.force_delete_when_not_ready = false.
        Uncordon removes the taint."""
        now = datetime.now(UTC)
        stuck = []
        for p in pods:
            meta = p["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            at = _parse_time(meta.get("deletionTimestamp") or "")
            if at is None or (at > now and not at_once) or key in report.force_deleted or _skip_reason(p) in ("mirror pod",
                                                                                           "DaemonSet pod"):
                continue
            stuck.append((key, meta))
        if not stuck or self._read_node(name).ready:
            return
        self.set_taints(name, add=[Taint(OUT_OF_SERVICE, "NoExecute", "nodeshutdown")], fence=fence)
        for key, meta in stuck:
            try:
                self._call(f"force-delete pod {key}", self.core.delete_namespaced_pod, meta["name"],
                           meta["namespace"], grace_period_seconds=0,
                           body=k8s.V1DeleteOptions(grace_period_seconds=0,
                                                    preconditions=k8s.V1Preconditions(uid=meta.get("uid"))))
            except (ObjectNotFound, Conflict):  # gone already, or a new pod of that name: nothing stuck
                pass
            report.force_deleted.append(key)
        self.record_event(name, reason="RemedyForceDelete", type="Warning",
                          message=f"{name} is NotReady: force-deleted {len(stuck)} pod(s) stuck Terminating "
                                  f"and marked the node out-of-service ({', '.join(k for k, _ in stuck)})")

    # ------------------------------------------------------------------ preemption
    def gpu_workloads(self) -> list[Workload]:
        """Live GPU work grouped by controller: pods requesting nvidia.com/gpu, one Workload per owning Job (or
        other controller) or per bare pod, named "namespace/name", with the nodes it runs on, its highest
        spec.priority (none = 0) and its earliest start. DaemonSet, mirror, finished, terminating and unbound pods
        are left out."""
        pods = self._list("list GPU pods", self.core.list_pod_for_all_namespaces,
                          field_selector="status.phase!=Succeeded,status.phase!=Failed")
        groups: dict[str, list[dict]] = {}
        for pod in pods:
            if _skip_reason(pod) or not (pod.get("spec") or {}).get("nodeName") or not _gpu_request(pod):
                continue
            groups.setdefault(_workload_of(pod)[0], []).append(pod)
        out = []
        for name, pods in sorted(groups.items()):
            starts = [_parse_time(t) for p in pods if (t := (p.get("status") or {}).get("startTime"))]
            out.append(Workload(
                name=name,
                nodes=tuple(sorted({p["spec"]["nodeName"] for p in pods})),
                priority=max(int((p.get("spec") or {}).get("priority") or 0) for p in pods),
                started_at=min((t for t in starts if t is not None), default=None),
            ))
        return out

    def preempt_workload(self, name: str, *, grace_period_seconds: int, reason: str) -> dict:
        """Stop lower-priority work so its nodes are free: a Job is suspended (spec.suspend=true: the Job controller
        deletes its pods gracefully and keeps it, to be resumed later — how Kueue preempts); other pods are evicted
        through the Eviction API (a PodDisruptionBudget's 429 is retried until the drain deadline, then reported).
        Records an Event on each node it frees. Idempotent: a workload already gone or suspended is success."""
        ns, sep, short = name.partition("/")
        if not sep or not ns or not short:
            raise RemedyError(f"workload name must be namespace/name, got {name!r}")
        listed = self._list(f"list pods of {name}", self.core.list_namespaced_pod, ns,
                            field_selector="status.phase!=Succeeded,status.phase!=Failed")
        pods = [p for p in listed if _workload_of(p)[0] == name and not _skip_reason(p)]
        kind = _workload_of(pods[0])[1] if pods else ""
        nodes = sorted({p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")})
        keys = [f"{ns}/{p['metadata']['name']}" for p in pods]
        priority = max((int((p.get("spec") or {}).get("priority") or 0) for p in pods), default=0)
        how = "suspend" if kind in SUSPENDABLE else "evict"
        out: dict[str, Any] = {"workload": name, "how": how, "kind": kind or "gone", "pods": keys, "nodes": nodes,
                               "priority": priority, "not_evicted": {}, "changed": bool(pods),
                               "dry_run": self.dry_run}
        if not pods:
            out["detail"] = "no live pods: already stopped"
            return out
        if self.dry_run:
            out["detail"] = f"would {how} {name} ({len(keys)} pod(s) on {', '.join(nodes)})"
            return out
        start = time.monotonic()
        if how == "suspend":  # through its controller (a Kueue-managed one through its Kueue Workload)
            try:
                change = self.workload(ns, short, kind).suspend()
                out["via"] = change.via
                out["detail"] = f"suspended {kind} {name} ({change.via}); its {len(keys)} pod(s) are deleted"
            except ObjectNotFound:  # deleted meanwhile: its pods go with it
                out["detail"] = f"{kind} {name} was deleted meanwhile; its pods go with it"
        else:
            evicted, not_evicted, blocked, refused = self._evict(keys, grace_period_seconds, start,
                                                                 self.settings.drain.eviction_deadline_seconds)
            out |= {"not_evicted": not_evicted, "blocked_retries": blocked, "refused": refused}
            out["detail"] = f"evicted {len(evicted)}/{len(keys)} pod(s) of {name}" + (
                f" (owned by {kind}: it may recreate them)" if kind else "")
        stuck = {_node_of(pods, k) for k in out["not_evicted"]}
        freed = [n for n in nodes if n not in stuck]
        for node in freed:
            self.record_event(node, reason="RemedyPreempt", type="Warning",
                              message=f"Preempted {name} (priority {priority}) by {self.actor}: {reason}")
        out["freed"] = freed
        return out

    # ------------------------------------------------------------------ jobs
    def render_node_job(self, spec: NodeJobSpec) -> dict:
        return render_node_job(spec, self.settings)

    def run_node_job(self, spec: NodeJobSpec, *, poll_seconds: float = 0.2, fence: NodeFence | None = None
                     ) -> JobResult:
        """Create the Job, wait until it succeeds, fails or times out, return its pods' logs. `fence`: checked on
        each node of the Job right before it is created (remedy.safety.fence: the residual window is until its pod
        runs)."""
        if self.dry_run:
            self.render_node_job(spec)  # still validates the template
            return JobResult(spec.name, spec.node, succeeded=True, phase="Planned", dry_run=True)
        manifest = self.render_node_job(spec)
        for host in spec.hosts:
            self.fence_node(host, fence)
        start = time.monotonic()
        self.create_job(manifest)  # exists already: a retry of this same task created it; just wait for it
        phase = "Timeout"
        while time.monotonic() - start < spec.timeout_seconds:
            status = self.job_status(spec.name)
            if int(status.get("succeeded") or 0) >= spec.parallelism:
                phase = "Succeeded"
                break
            if int(status.get("failed") or 0) > 0:
                phase = "Failed"
                break
            time.sleep(poll_seconds)
            poll_seconds = min(poll_seconds * 1.5, 2.0)  # long checks: back off, 2,048 nodes must not poll at 5 Hz
        logs = self.job_logs(spec.name)
        if phase == "Timeout":
            self.delete_job(spec.name)
        return JobResult(spec.name, spec.node, phase == "Succeeded", phase, logs, time.monotonic() - start)

    def create_job(self, manifest: dict) -> bool:
        """Create a Job in the jobs namespace; False if it exists already (a retried task created it)."""
        ns = self.settings.cluster.jobs_namespace
        name = manifest["metadata"]["name"]
        try:
            self._call(f"create job {ns}/{name}", self.batch.create_namespaced_job, ns, manifest)
            return True
        except AlreadyExists:
            return False

    def job_status(self, job: str) -> dict:
        """The Job's status block (succeeded, failed, active, conditions) in the jobs namespace."""
        ns = self.settings.cluster.jobs_namespace
        return self._json(f"read job {job}", self.batch.read_namespaced_job, job, ns).get("status") or {}

    def log_follower(self, streams: int) -> PodLogFollower:
        """Follow many pods' logs at once on a connection pool of their own (`streams` + 4 connections), so the
        streams cannot crowd out this adapter's polling. Close it when done."""
        return PodLogFollower(self._cfg, streams, self.settings.cluster.jobs_namespace)

    def job_pods(self, job: str) -> list[dict]:
        ns = self.settings.cluster.jobs_namespace
        return self._list(f"list pods of job {job}", self.core.list_namespaced_pod, ns, label_selector=f"job-name={job}")

    def job_logs(self, job: str) -> str:
        ns = self.settings.cluster.jobs_namespace
        parts = []
        for pod in self.job_pods(job):
            name = pod["metadata"]["name"]
            try:
                resp = self._call(f"read log of {name}", self.core.read_namespaced_pod_log, name, ns, _preload_content=False)
                parts.append(resp.data.decode(errors="replace"))
            except ClusterUnreachable:
                raise
            except RemedyError as exc:
                parts.append(f"[log of {name} unavailable: {exc}]\n")
        return "".join(parts)

    def delete_job(self, job: str) -> None:
        if self.dry_run:
            return
        ns = self.settings.cluster.jobs_namespace
        try:
            self._call(
                f"delete job {job}", self.batch.delete_namespaced_job, job, ns,
                body=k8s.V1DeleteOptions(propagation_policy="Background"),
            )
        except ObjectNotFound:
            pass

    # ------------------------------------------------------------------ events
    def record_event(self, node: str, *, reason: str, message: str, type: str = "Normal") -> None:
        """Best effort: an event that cannot be written is logged, never fails the action it describes.

        The same reason and message on the same node is one Event whose count grows, as client-go's
        EventCorrelator aggregates (tools/record/events_cache.go): a name derived from them makes a second
        writer — another run of the same incident, a retried task — bump the count instead of adding a twin."""
        if self.dry_run:
            return
        now = datetime.now(UTC)
        digest = hashlib.sha1(f"{self.actor}\0{reason}\0{message}".encode()).hexdigest()[:16]
        name = event_name(node, digest)
        event = k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name=name, namespace=EVENT_NAMESPACE),
            involved_object=k8s.V1ObjectReference(kind="Node", name=node, api_version="v1", uid=node),  # as the kubelet
            reason=reason,
            message=message[:1024],
            type=type,
            source=k8s.V1EventSource(component=self.actor, host=socket.gethostname()),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            reporting_component=self.actor,
            reporting_instance=socket.gethostname(),
        )
        try:
            try:
                self._call(f"record event on {node}", self.core.create_namespaced_event, EVENT_NAMESPACE, event)
            except AlreadyExists:
                seen = self._json(f"read event {name}", self.core.read_namespaced_event, name, EVENT_NAMESPACE)
                self._call(f"update event on {node}", self.core.patch_namespaced_event, name, EVENT_NAMESPACE,
                           {"count": int(seen.get("count") or 1) + 1,
                            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
        except RemedyError as exc:
            log.warning("could not record event %s on %s: %s", reason, node, exc)

    def node_events(self, node: str) -> list[dict]:
        return self._list(
            f"list events of {node}",
            self.core.list_namespaced_event,
            EVENT_NAMESPACE,
            field_selector=f"involvedObject.kind=Node,involvedObject.name={node}",
        )


# ---------------------------------------------------------------------- list and watch
def paged_list(read: Callable[..., dict], size: int, what: str, fn: Callable[..., Any], *args: Any,
               **kwargs: Any) -> tuple[list[dict], str]:
    """(every item, the list's resourceVersion) of a list read in pages of `size` (`limit` / `continue`).

    The API server serves each page from the snapshot of the first; once that revision is compacted (etcd
    compacts every 5 minutes) the next page is a 410 Expired (staging/src/k8s.io/apiserver/pkg/storage/etcd3/
    errors.go). Its offered token would continue an inconsistent list, so the whole list is read again, once."""
    for attempt in (1, 2):
        items: list[dict] = []
        token: str | None = None
        version = ""
        try:
            while True:
                page = read(what, fn, *args, limit=size, **({"_continue": token} if token else {}), **kwargs)
                items += page.get("items") or []
                meta = page.get("metadata") or {}
                version = version or meta.get("resourceVersion") or ""
                token = meta.get("continue")
                if not token:
                    return items, version
        except RemedyError as exc:
            if getattr(exc, "status", None) != 410 or token is None or attempt == 2:
                raise
            log.info("%s: continue token expired after %d items; listing again from the start", what, len(items))
    raise AssertionError("unreachable")


def node_from_json(obj: dict, keys: Any, topologies: dict[Topology, Topology] | None = None) -> Node:
    """A Node as gpu-remedy sees it, from the API object (`keys`: settings.labels, the topology label keys;
    `topologies`: equal Topology values share one object, as a fleet has few: cheaper to hold and to group by)."""
    meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
    labels: dict[str, str] = meta.get("labels") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    pool = labels.get(keys.pool)
    try:
        state = NodeState(pool) if pool else None
    except ValueError:
        state = None
    gpus = labels.get(keys.gpu_count) or (status.get("capacity") or {}).get("nvidia.com/gpu") or 0
    topology = Topology(zone=labels.get(keys.zone, ""), rack=labels.get(keys.rack, ""),
                        switch=labels.get(keys.switch, ""), pdu=labels.get(keys.pdu, ""))
    if topologies is not None:
        topology = topologies.setdefault(topology, topology)
    return Node(
        name=meta.get("name", ""),
        gpu_model=labels.get(keys.gpu_product, ""),
        gpu_count=int(gpus),
        topology=topology,
        state=state,
        instance_type=labels.get(keys.instance_type, ""),
        provider_id=spec.get("providerID", ""),
        ready=conditions.get("Ready") == "True",
        unschedulable=bool(spec.get("unschedulable")),
        taints={(t["key"], t.get("effect", "")): t.get("value") or "" for t in spec.get("taints") or []},
        labels=labels,
        annotations=meta.get("annotations") or {},
        allocatable_gpus=int((status.get("allocatable") or {}).get("nvidia.com/gpu", 0) or 0),
        resource_version=meta.get("resourceVersion", ""),
        boot_id=(status.get("nodeInfo") or {}).get("bootID", ""),
        addresses=tuple(a["address"] for a in status.get("addresses") or [] if a.get("address")),
    )


def _newer(rv: str, than: str) -> bool:
    """Is resourceVersion `rv` at least `than`? They are etcd revisions (opaque to clients by the API's rules,
    integers in practice); one that is not an integer is taken as newer."""
    try:
        return int(rv) >= int(than)
    except ValueError:
        return True


class _Expired(Exception):
    """The watch's resourceVersion is older than the server remembers (410): list again."""


class NodeCache:
    """The GPU nodes kept current by a watch, as client-go's reflector and informer do
    (staging/src/k8s.io/client-go/tools/cache/reflector.go ListAndWatch): list once (paged), then watch from the
    list's resourceVersion with allowWatchBookmarks; each ADDED/MODIFIED/DELETED updates the cache and each event
    or BOOKMARK moves its resourceVersion on; a watch that ends (timeoutSeconds) is started again from there; a 410
    (an ERROR event carrying Status 410 Expired, or the answer itself) means the server no longer remembers that
    far back, so the nodes are listed again. Any other failure: the cache is not served (`fresh()` is False) until a
    new list succeeds, retried with back-off.

    Its own ApiClient (one watch connection, one list), so a long watch never holds one of the adapter's
    connections. The thread holds the cache, not the adapter: a dropped adapter stops it (weakref.finalize)."""

    WATCH_SECONDS = (240, 480)  # a watch's timeoutSeconds, random in this range (reflector.go: 5-10 min)
    QUIET_SECONDS = 600.0  # heard nothing (no event, bookmark or new watch) for this long: not fresh
    GAP_SECONDS = 2.0  # between one watch's end and the next one's start the cache is still fresh

    def __init__(self, cfg: k8s.Configuration, settings: RemedySettings) -> None:
        cfg = copy.copy(cfg)
        cfg.connection_pool_maxsize = 2
        self._api = k8s.ApiClient(cfg)
        self._core = k8s.CoreV1Api(self._api)
        self._host = cfg.host
        self._selector = settings.cluster.node_selector
        self._page = settings.cluster.list_page_size
        self._labels = settings.labels
        self._timeout = settings.cluster.request_timeout_seconds
        self._retry = ApiRetry(settings.cluster.api_retries + 1)
        from remedy.sim.selectors import parse_label_selector  # the API server's label selector grammar

        self._matches = parse_label_selector(self._selector)
        self._nodes: dict[str, Node] = {}
        self._topologies: dict[Topology, Topology] = {}
        self._lock = threading.Lock()
        self.generation = next_version()  # moves on every change of the nodes (remedy.safety.fleet)
        self.resource_version = ""
        self.synced = threading.Event()
        self._healthy = False
        self._heard = 0.0
        self._open = False  # a watch stream is established (its answer's headers came): changes reach us
        self._closed_at = 0.0
        self._stop = threading.Event()
        self._resp: Any = None
        self.lists = 0  # how many times the nodes were listed (1 + relists after 410 or failures)
        self.events = 0
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name="node-cache", daemon=True)

    def start(self) -> NodeCache:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:  # end a watch blocked in a read
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # noqa: BLE001 - closing a socket that is going anyway
                pass
        self._api.close()

    def fresh(self) -> bool:
        """Listed, with no failure since, a watch established (or the last one ended a moment ago: the next is
        being opened) and heard from recently. A watch whose answer has not started (a proxy that buffers it, a
        server that does not answer) is not established: the nodes are listed instead."""
        now = time.monotonic()
        return (self.synced.is_set() and self._healthy and now - self._heard < self.QUIET_SECONDS
                and (self._open or now - self._closed_at < self.GAP_SECONDS))

    def nodes(self) -> list[Node]:
        """The cached nodes themselves, as client-go's listers hand out theirs: read them, never change them
        (a copy of 12,500 would cost more than the rest of a gate decision)."""
        with self._lock:
            return list(self._nodes.values())

    def snapshot(self) -> tuple[int, list[Node]]:
        """(generation, the cached nodes): the generation names exactly this state of the nodes, as no other state
        of this or any other cache of the process is named (one counter), so a summary of it may be kept."""
        with self._lock:
            return self.generation, list(self._nodes.values())

    def get(self, name: str) -> Node | None:
        with self._lock:
            return self._nodes.get(name)

    def apply(self, obj: dict) -> None:
        """Our own write's answer, at once: the watch brings the same revision a moment later (read your writes)."""
        meta = obj.get("metadata") or {}
        name, rv = meta.get("name"), meta.get("resourceVersion") or ""
        if not name or not self.synced.is_set():
            return
        with self._lock:
            cur = self._nodes.get(name)
            if cur is not None and not _newer(rv, cur.resource_version):
                return
            if self._matches(meta.get("labels") or {}):
                self._nodes[name] = node_from_json(obj, self._labels, self._topologies)
            else:
                self._nodes.pop(name, None)
            self.generation = next_version()

    # -- the reflector loop
    def _json(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        kwargs.setdefault("_request_timeout", self._timeout)
        resp = self._retry.call(what, self._host, fn, *args, _preload_content=False, **kwargs)
        return json.loads(resp.data)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                version = self._relist()
                backoff = 0.5
                while not self._stop.is_set():
                    version = self._watch(version)
            except _Expired:
                log.info("node cache: resourceVersion %s expired; listing the nodes again", self.resource_version)
                self._healthy = False
            except Exception as exc:  # noqa: BLE001 - a reflector keeps going; `fresh()` says whether to trust it
                self._healthy = False
                if self._stop.is_set():
                    return
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.info("node cache: %s; listing again in %.1f s", self.last_error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _relist(self) -> str:
        items, version = paged_list(self._json, self._page, "list GPU nodes", self._core.list_node,
                                    label_selector=self._selector)
        fresh = {}
        for item in items:
            node = node_from_json(item, self._labels, self._topologies)
            fresh[node.name] = node
        with self._lock:
            self._nodes = fresh
            self.generation = next_version()
            self.resource_version = version
        self.lists += 1
        self._heard = self._closed_at = time.monotonic()  # fresh while its watch is being opened
        self._healthy = True
        self.synced.set()
        return version

    def _watch(self, version: str) -> str:
        seconds = random.randint(*self.WATCH_SECONDS)
        try:
            resp = self._core.list_node(label_selector=self._selector, watch=True, resource_version=version,
                                        allow_watch_bookmarks=True, timeout_seconds=seconds,
                                        _preload_content=False, _request_timeout=(self._timeout, seconds + 60))
        except k8s.ApiException as exc:
            if exc.status == 410:
                raise _Expired() from None
            raise
        self._resp = resp
        self._heard = time.monotonic()
        self._open = True
        try:
            from kubernetes.watch.watch import iter_resp_lines

            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    break
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                meta = obj.get("metadata") or {}
                self._heard = time.monotonic()
                self.events += 1
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired()
                    raise RemedyError(f"node watch ended with an error: {obj.get('message') or obj}")
                if kind in ("ADDED", "MODIFIED"):
                    node = node_from_json(obj, self._labels, self._topologies)
                    with self._lock:
                        cur = self._nodes.get(node.name)
                        if cur is None or _newer(node.resource_version, cur.resource_version):
                            self._nodes[node.name] = node
                            self.generation = next_version()
                elif kind == "DELETED":
                    with self._lock:
                        if self._nodes.pop(meta.get("name", ""), None) is not None:
                            self.generation = next_version()
                version = meta.get("resourceVersion") or version
                self.resource_version = version
        finally:
            self._open = False
            self._closed_at = time.monotonic()
            self._resp = None
            resp.release_conn()
        return version


# ---------------------------------------------------------------------- helpers
class PodLogFollower:
    """Log streams (follow=true) for many pods of the jobs namespace, on their own ApiClient."""

    def __init__(self, cfg: k8s.Configuration, streams: int, namespace: str) -> None:
        cfg = copy.copy(cfg)
        cfg.connection_pool_maxsize = max(16, streams + 4)
        self._api = k8s.ApiClient(cfg)
        self._core = k8s.CoreV1Api(self._api)
        self.namespace = namespace

    def lines(self, pod: str, timeout: float) -> Iterator[str]:
        return follow_pod_log(self._core, pod, self.namespace, timeout)

    def close(self) -> None:
        self._api.close()


def follow_pod_log(core: k8s.CoreV1Api, pod: str, namespace: str, timeout: float) -> Iterator[str]:
    """Yield a pod's log lines as they are written (follow=true). Takes the CoreV1Api so a caller following many
    pods at once can give the streams a connection pool of their own."""
    resp = core.read_namespaced_pod_log(pod, namespace, follow=True, _preload_content=False, _request_timeout=timeout)
    try:
        buf = b""
        for chunk in resp.stream(1024):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line.decode(errors="replace")
        if buf:
            yield buf.decode(errors="replace")
    finally:
        resp.release_conn()


def _skip_reason(pod: dict) -> str:
    meta = pod.get("metadata", {})
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return "mirror pod"
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return "DaemonSet pod"
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return "finished"
    if meta.get("deletionTimestamp"):
        return "already terminating"
    return ""


GPU = "nvidia.com/gpu"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def _gpu_request(pod: dict) -> int:
    """nvidia.com/gpu a pod asks for: its containers' requests (an extended resource's request defaults to its
    limit), or its largest init container if more."""

    def one(c: dict) -> int:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(GPU, (res.get("limits") or {}).get(GPU, 0))
        try:
            return int(str(value))
        except ValueError:
            return 0

    spec = pod.get("spec") or {}
    return max(sum(one(c) for c in spec.get("containers") or []),
               max((one(c) for c in spec.get("initContainers") or []), default=0))


def _workload_of(pod: dict) -> tuple[str, str]:
    """("namespace/name", kind): the workload the pod belongs to (a JobSet for its child Jobs' pods, a Job, a
    PyTorchJob, ...) or, for a bare pod, the pod itself (remedy.adapters.workloads.workload_of_pod)."""
    return workload_of_pod(pod)


def _node_of(pods: list[dict], key: str) -> str:
    return next(((p.get("spec") or {}).get("nodeName", "") for p in pods
                 if f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}" == key), "")


def _parse_time(value: str) -> datetime | None:
    from remedy.domain.times import parse_iso_or_none  # the one ISO reader

    return parse_iso_or_none(value)


def _taint_set(taints: list[dict]) -> set[tuple[str, str, str]]:
    return {(t.get("key", ""), t.get("value") or "", t.get("effect", "")) for t in taints}


def _taint_summary(add: list[Taint], remove: set[str]) -> str:
    parts = [f"+{t.key}={t.value}:{t.effect}" for t in add] + [f"-{k}" for k in sorted(remove)]
    return " ".join(parts)


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """Does a PodDisruptionBudget's selector select these labels? (None: no pod; {}: every pod of the namespace.)"""
    from remedy.domain.selectors import selects  # the one matcher, shared with the simulator

    return selects(selector, labels)


CONFLICT_ATTEMPTS = 5


def _on_conflict(note: str) -> Retrying:
    """Re-run a read-merge-write whose resourceVersion precondition lost a race (409), a few times, with a little
    jitter so two writers do not collide again in lockstep."""
    return Retrying(retry=retry_if_exception_type(Conflict), stop=stop_after_attempt(CONFLICT_ATTEMPTS),
                    wait=wait_random(0, 0.05), reraise=True,
                    before_sleep=lambda state: log.info("%s (attempt %d)", note, state.attempt_number))
