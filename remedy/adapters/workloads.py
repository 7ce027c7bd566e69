"""The training workload as its own controller runs it: a `TrainingWorkload` port, one implementation per kind.

gpu-remedy keeps one gang-scheduled training workload at full size (settings `workload.kind`, `.namespace`,
`.job`). What "suspend", "resize" and "restart" mean is the workload controller's, not ours, so each kind does them
the way its controller defines them:

- batch/v1 Job: suspend = `spec.suspend` (the Job controller deletes the pods); resize = `spec.parallelism` (and
  `completions` for an Indexed Job: elastic Indexed Jobs change both); restart = evict the pods, the Job controller
  replaces them; budget = `status.failed` against `backoffLimit`. Kubernetes knows no elastic range: an Indexed Job
  with completions = parallelism declares one with `remedy.io/elastic-nodes: "MIN:MAX"` (torchrun's --nnodes).
- JobSet jobset.x-k8s.io/v1alpha2: suspend = `spec.suspend` (passed to every child Job); resize =
  `replicatedJobs[].replicas`, refused by JobSet's webhook unless the controller has elastic JobSets (KEP-463);
  restart = evict the pods: without a podFailurePolicy ignoring DisruptionTarget the child Job fails and the
  JobSet recreates every child Job; budget = `status.restarts` against `failurePolicy.maxRestarts` (a restart
  that would cost one with none left is refused).
- PyTorchJob kubeflow.org/v1: suspend = `spec.runPolicy.suspend`; resize = `pytorchReplicaSpecs.Worker.replicas`
  (the scale subresource's spec path) inside `elasticPolicy` min/maxReplicas; restart = evict the pods, the
  operator recreates them under their names; budget = `runPolicy.backoffLimit`.

Sources: kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go and pkg/webhooks/jobset_webhook.go (ValidateUpdate:
replicatedJobs immutable), keps/463-ElasticJobsets; kubeflow/training-operator pkg/apis/kubeflow.org/v1/
pytorch_types.go (`+kubebuilder:subresource:scale:specpath=.spec.pytorchReplicaSpecs.Worker.replicas`,
ElasticPolicy) and common_types.go (RunPolicy.Suspend, labels `training.kubeflow.org/*`); kubernetes
pkg/controller/job/job_controller.go (suspend, elastic Indexed Jobs).

Kueue (kubernetes-sigs/kueue): a workload labelled `kueue.x-k8s.io/queue-name` is admitted by Kueue, whose
reconciler (pkg/controller/jobframework/reconciler.go) unsuspends an admitted job that anyone else suspended. So
for such a workload suspend/resume never touch its suspend field: they set `spec.active` on its Kueue Workload
(apis/kueue/v1beta1/workload_types.go; found by label `kueue.x-k8s.io/job-uid`), and Kueue evicts it (condition
Evicted, reason Deactivated) or re-queues it.

Custom resources take JSON merge patches (a strategic merge patch is 415 on a CR); a list inside one (JobSet's
replicatedJobs) is replaced whole, so it is written with a resourceVersion precondition.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from remedy.config import WorkloadKind
from remedy.domain import events
from remedy.domain.checkpoints import REQUESTED, Checkpoints
from remedy.elastic import ELASTIC_NODES, parse_elastic_nodes
from remedy.errors import Forbidden, RemedyError

if TYPE_CHECKING:
    from remedy.adapters.kubernetes import KubernetesCluster

MERGE = "application/merge-patch+json"
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
KUEUE_WORKLOAD = ("kueue.x-k8s.io", "v1beta1", "workloads")
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
TO_JOB_NAME = "training.kubeflow.org/job-name"
TO_OPERATOR = "training.kubeflow.org/operator-name"
SUSPENDABLE = frozenset({WorkloadKind.JOB, WorkloadKind.JOBSET, WorkloadKind.PYTORCHJOB})
# What this port asks of custom resources (remedy.production.rbac reads it: the calls name their resource in
# arguments). Cluster-wide: preemption suspends lower-priority work of these kinds wherever it runs.
CRD_RBAC = (
    ("jobset.x-k8s.io", "jobsets", "get"), ("jobset.x-k8s.io", "jobsets", "patch"),
    ("kubeflow.org", "pytorchjobs", "get"), ("kubeflow.org", "pytorchjobs", "patch"),
    ("kueue.x-k8s.io", "workloads", "list"), ("kueue.x-k8s.io", "workloads", "patch"),
)


class WorkloadRefused(RemedyError):
    """The workload's controller does not allow this (a size outside its elastic range, an immutable JobSet, no
    restart left): nothing was changed; a person decides."""


@dataclass(frozen=True)
class WorkloadState:
    kind: WorkloadKind
    name: str  # namespace/name
    ready: int  # pods running and ready
    desired: int  # pods the gang needs
    suspended: bool
    restarts: int = 0  # what counts toward the controller's limit (failed pods, JobSet restarts)
    restart_limit: int | None = None
    elastic: tuple[int, int] | None = None  # (fewest, most) pods the controller may run it with; None: fixed size
    kueue_queue: str = ""  # the Kueue LocalQueue that admits it ("" when Kueue does not manage it)
    ignores_disruptions: bool = False  # its Jobs' podFailurePolicy ignores DisruptionTarget: evictions cost nothing


@dataclass
class WorkloadChange:
    """What a call did (or, in dry-run, would do) to the workload."""

    workload: str  # namespace/name
    kind: WorkloadKind
    action: str  # resize | suspend | resume | restart
    changed: bool
    dry_run: bool = False
    via: str = ""  # the field written, e.g. "spec.suspend" or "Kueue Workload job-x-1a2b3 spec.active"
    detail: str = ""
    pods: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"kind": self.kind.value, "pods": list(self.pods)}


class TrainingWorkload(Protocol):
    """A gang-scheduled training workload, driven through its own controller."""

    kind: WorkloadKind
    namespace: str
    name: str

    def state(self) -> WorkloadState: ...
    def pod_selector(self) -> str: ...
    def resize(self, nodes: int) -> WorkloadChange: ...
    def suspend(self) -> WorkloadChange: ...
    def resume(self) -> WorkloadChange: ...
    def restart(self, node: str) -> WorkloadChange: ...
    def checkpoints(self) -> Checkpoints: ...
    def request_checkpoint(self, at: datetime) -> WorkloadChange: ...
    def annotations(self) -> dict[str, str]: ...
    def annotate(self, values: dict[str, str | None], why: str) -> WorkloadChange: ...


def open_workload(cluster: KubernetesCluster, kind: WorkloadKind | str, namespace: str, name: str
                  ) -> TrainingWorkload:
    kind = WorkloadKind(kind)
    impl: dict[WorkloadKind, type[BatchJob | JobSet | PyTorchJob]] = {
        WorkloadKind.JOB: BatchJob, WorkloadKind.JOBSET: JobSet, WorkloadKind.PYTORCHJOB: PyTorchJob}
    return impl[kind](cluster, namespace, name)


def workload_of_pod(pod: dict) -> tuple[str, str]:
    """("namespace/name", kind) of the workload a pod belongs to: a JobSet's child-Job pods belong to the JobSet
    (its label), a PyTorchJob's pods to the PyTorchJob, a Job's to the Job; a bare pod is its own workload."""
    meta = pod["metadata"]
    ns = meta.get("namespace", "")
    jobset = (meta.get("labels") or {}).get(JOBSET_NAME)
    if jobset:
        return f"{ns}/{jobset}", WorkloadKind.JOBSET.value
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return f"{ns}/{owner['name'] if owner else meta['name']}", (owner or {}).get("kind", "")


def _ignores_disruptions(job_spec: dict) -> bool:
    """A Job spec whose podFailurePolicy ignores pods with DisruptionTarget (evicted, drained, preempted)."""
    return any(r.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget"
                                                   for c in r.get("onPodConditions") or [])
               for r in (job_spec.get("podFailurePolicy") or {}).get("rules") or [])


def _ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


class _Workload:
    kind: WorkloadKind
    suspend_path: tuple[str, ...] = ("spec", "suspend")

    def __init__(self, cluster: KubernetesCluster, namespace: str, name: str) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.key = f"{namespace}/{name}"

    # -- the object
    def read(self) -> dict:
        raise NotImplementedError

    def _patch(self, body: dict, what: str) -> dict:
        raise NotImplementedError

    def pod_selector(self) -> str:
        raise NotImplementedError

    def state(self) -> WorkloadState:
        raise NotImplementedError

    def pods(self) -> list[dict]:
        return self.cluster._list(f"list pods of {self.key}", self.cluster.core.list_namespaced_pod, self.namespace,
                                  label_selector=self.pod_selector())

    def _ready_pods(self) -> int:
        return sum(1 for p in self.pods() if _ready(p))

    def _change(self, action: str, changed: bool, **kw: Any) -> WorkloadChange:
        return WorkloadChange(self.key, self.kind, action, changed, dry_run=self.cluster.dry_run, **kw)

    def _suspended(self, obj: dict) -> bool:
        value: Any = obj
        for part in self.suspend_path:
            value = (value or {}).get(part)
        return bool(value)

    def _suspend_body(self, value: bool) -> dict:
        body: dict = {}
        cur = body
        for part in self.suspend_path[:-1]:
            cur = cur.setdefault(part, {})
        cur[self.suspend_path[-1]] = value
        return body

    # -- the checkpoint handshake (remedy.domain.checkpoints): annotations on the workload object
    def checkpoints(self) -> Checkpoints:
        return Checkpoints.from_annotations(self.annotations())

    def annotations(self) -> dict[str, str]:
        return dict(self.read()["metadata"].get("annotations") or {})

    def annotate(self, values: dict[str, str | None], why: str) -> WorkloadChange:
        """Set (None: remove) annotations on the workload object: gpu-remedy's notes to itself and to the job
        (remedy.elastic), e.g. the size a shrunk job grows back to."""
        via = f"metadata.annotations[{', '.join(sorted(values))}]"
        if self.cluster.dry_run:
            return self._change("annotate", True, via=via, detail=f"would note: {why}")
        self._patch({"metadata": {"annotations": values}}, f"annotate {self.kind.value} {self.key}: {why}")
        return self._change("annotate", True, via=via, detail=why)

    def request_checkpoint(self, at: datetime) -> WorkloadChange:
        """Ask the job for a checkpoint now; it answers by advancing its last-checkpoint annotation."""
        stamp = at.astimezone(UTC).isoformat()
        if self.cluster.dry_run:
            return self._change("checkpoint", True, via=f"metadata.annotations[{REQUESTED}]",
                                detail=f"would ask for a checkpoint at {stamp}")
        self._patch({"metadata": {"annotations": {REQUESTED: stamp}}}, f"ask {self.key} for a checkpoint")
        return self._change("checkpoint", True, via=f"metadata.annotations[{REQUESTED}]",
                            detail=f"asked for a checkpoint at {stamp}")

    # -- suspend / resume, through Kueue when Kueue manages the workload
    def suspend(self) -> WorkloadChange:
        return self._set_suspended(True)

    def resume(self) -> WorkloadChange:
        return self._set_suspended(False)

    def _set_suspended(self, value: bool) -> WorkloadChange:
        action = "suspend" if value else "resume"
        obj = self.read()
        queue = (obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE)
        if queue:
            return self._kueue_active(obj, not value, action)
        via = ".".join(self.suspend_path)
        if self._suspended(obj) == value:
            return self._change(action, False, via=via, detail=f"already {'suspended' if value else 'running'}")
        if self.cluster.dry_run:
            return self._change(action, True, via=via, detail=f"would set {via}={str(value).lower()}")
        self._patch(self._suspend_body(value), f"{action} {self.kind.value} {self.key}")
        words = "its controller deletes its pods and keeps it" if value else "its controller creates its pods again"
        return self._change(action, True, via=via, detail=f"set {via}={str(value).lower()}: {words}")

    def _kueue_active(self, obj: dict, active: bool, action: str) -> WorkloadChange:
        uid = obj["metadata"]["uid"]
        group, version, plural = KUEUE_WORKLOAD
        items = self.cluster._list(f"find the Kueue Workload of {self.key}",
                                   self.cluster.custom.list_namespaced_custom_object, group, version, self.namespace,
                                   plural, label_selector=f"{KUEUE_JOB_UID}={uid}")
        if not items:
            raise RemedyError(f"{self.key} is managed by Kueue but Kueue has no Workload for it yet; its suspend "
                              "is Kueue's to set, so it was left alone")
        wl = items[0]["metadata"]["name"]
        via = f"Kueue Workload {wl} spec.active"
        if ((items[0].get("spec") or {}).get("active", True) is not False) == active:
            return self._change(action, False, via=via,
                                detail=f"Kueue Workload already {'active' if active else 'inactive'}")
        if self.cluster.dry_run:
            return self._change(action, True, via=via, detail=f"would set {via}={str(active).lower()}")
        self.cluster._call(f"set spec.active={str(active).lower()} on Kueue Workload {self.namespace}/{wl}",
                           self.cluster.custom.patch_namespaced_custom_object, group, version, self.namespace,
                           plural, wl, {"spec": {"active": active}}, _content_type=MERGE, _preload_content=False)
        words = ("Kueue evicts it and suspends it (not fought: Kueue re-admits it only when active again)"
                 if not active else "Kueue re-queues it and unsuspends it once admitted")
        return self._change(action, True, via=via, detail=f"set {via}={str(active).lower()}: {words}")

    # -- restart in place
    def restart(self, node: str) -> WorkloadChange:
        """Evict the workload's pods on `node` (the Eviction API: DisruptionTarget, which a podFailurePolicy can
        ignore; PodDisruptionBudgets honoured for up to a minute); its controller brings them back and the node
        stays in service."""
        st = self.state()
        if self._restart_is_counted() and st.restart_limit is not None and st.restarts >= st.restart_limit:
            raise WorkloadRefused(f"{self.key}: no JobSet restart left ({st.restarts} of failurePolicy.maxRestarts "
                                  f"{st.restart_limit}); a pod restart would fail the whole JobSet")
        pods = self.cluster._list(f"list pods of {self.key} on {node}", self.cluster.core.list_namespaced_pod,
                                  self.namespace, label_selector=self.pod_selector(),
                                  field_selector=f"spec.nodeName={node}")
        names = tuple(p["metadata"]["name"] for p in pods
                      if not p["metadata"].get("deletionTimestamp")
                      and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
        if not names:
            return self._change("restart", False, detail=f"no pod of {self.key} on {node}")
        if self.cluster.dry_run:
            return self._change("restart", True, pods=names, detail=f"would evict {len(names)} pod(s) on {node}")
        deadline = min(60.0, self.cluster.settings.drain.eviction_deadline_seconds)
        evicted, not_evicted, _, _ = self.cluster._evict([f"{self.namespace}/{n}" for n in names], None,
                                                         time.monotonic(), deadline)
        for key, why in sorted(not_evicted.items()):
            self.cluster.record_event(node, reason=events.RESTART_REFUSED, type="Warning",
                                      message=f"Cannot restart {key}: {why}")
        done = tuple(k.split("/", 1)[1] for k in evicted)
        self.cluster.record_event(node, reason=events.RESTART_APP,
                                  message=f"Restarted {len(done)} pod(s) of {self.kind.value} {self.key}; "
                                  "the node stays in service")
        return self._change("restart", bool(done), pods=done, detail=self._restart_words(len(done)))

    def _restart_is_counted(self) -> bool:
        """Does a restart cost the workload a restart its controller counts toward failing it (JobSet only)?"""
        return False

    def _restart_words(self, n: int) -> str:
        return f"evicted {n} pod(s); the controller replaces them"


class BatchJob(_Workload):
    """batch/v1 Job (kubernetes pkg/controller/job/job_controller.go)."""

    kind = WorkloadKind.JOB

    def read(self) -> dict:
        return self.cluster._json(f"read job {self.key}", self.cluster.batch.read_namespaced_job, self.name,
                                  self.namespace)

    def _patch(self, body: dict, what: str) -> dict:
        resp: Any = self.cluster._call(what, self.cluster.batch.patch_namespaced_job, self.name, self.namespace,
                                       body, _content_type=MERGE, _preload_content=False)  # raw: an HTTPResponse
        out: dict = json.loads(resp.data)
        return out

    def pod_selector(self) -> str:
        return f"job-name={self.name}"

    def state(self) -> WorkloadState:
        obj = self.read()
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ready = int(status["ready"] if status.get("ready") is not None else status.get("active") or 0)
        return WorkloadState(self.kind, self.key, ready, int(spec.get("parallelism") or 0), bool(spec.get("suspend")),
                             restarts=int(status.get("failed") or 0), restart_limit=int(spec.get("backoffLimit", 6)),
                             elastic=self._elastic(obj),
                             kueue_queue=(obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE, ""),
                             ignores_disruptions=_ignores_disruptions(spec))

    @staticmethod
    def _elastic(obj: dict) -> tuple[int, int] | None:
        """The range the job declares (remedy.io/elastic-nodes), if the Job controller lets it be resized: an
        Indexed Job only with completions = parallelism (both change together), a NonIndexed one always."""
        spec = obj.get("spec") or {}
        bounds = parse_elastic_nodes((obj["metadata"].get("annotations") or {}).get(ELASTIC_NODES))
        if bounds is None:
            return None
        if spec.get("completionMode") == "Indexed" and spec.get("completions") != spec.get("parallelism"):
            return None
        return bounds

    def resize(self, nodes: int) -> WorkloadChange:
        """spec.parallelism; an Indexed Job is elastic only with completions == parallelism, changed together."""
        if nodes < 1:
            raise WorkloadRefused(f"{self.key}: cannot run on {nodes} nodes")
        obj = self.read()
        spec = obj.get("spec") or {}
        bounds = self._elastic(obj)
        if bounds is not None and not bounds[0] <= nodes <= bounds[1]:
            raise WorkloadRefused(f"{self.key}: {nodes} nodes is outside the range it declares "
                                  f"({ELASTIC_NODES} {bounds[0]}:{bounds[1]})")
        body: dict = {"spec": {"parallelism": nodes}}
        if spec.get("completionMode") == "Indexed":
            body["spec"]["completions"] = nodes
        if int(spec.get("parallelism") or 0) == nodes:
            return self._change("resize", False, via="spec.parallelism", detail=f"already {nodes}")
        if self.cluster.dry_run:
            return self._change("resize", True, via="spec.parallelism", detail=f"would set parallelism {nodes}")
        self._patch(body, f"resize job {self.key} to {nodes}")
        return self._change("resize", True, via="spec.parallelism", detail=f"parallelism {nodes}")

    def _restart_words(self, n: int) -> str:
        return f"evicted {n} pod(s); the Job controller replaces them"


class _Custom(_Workload):
    api: tuple[str, str, str]

    def read(self) -> dict:
        group, version, plural = self.api
        return self.cluster._json(f"read {self.kind.value} {self.key}",
                                  self.cluster.custom.get_namespaced_custom_object, group, version, self.namespace,
                                  plural, self.name)

    def _patch(self, body: dict, what: str) -> dict:
        group, version, plural = self.api
        resp: Any = self.cluster._call(what, self.cluster.custom.patch_namespaced_custom_object, group, version,
                                       self.namespace, plural, self.name, body, _content_type=MERGE,
                                       _preload_content=False)  # raw: an HTTPResponse
        out: dict = json.loads(resp.data)
        return out


class JobSet(_Custom):
    """JobSet jobset.x-k8s.io/v1alpha2 (kubernetes-sigs/jobset)."""

    kind = WorkloadKind.JOBSET
    api = JOBSET

    def pod_selector(self) -> str:
        return f"{JOBSET_NAME}={self.name}"

    def _replicated(self, obj: dict) -> list[dict]:
        return list((obj.get("spec") or {}).get("replicatedJobs") or [])

    @staticmethod
    def _pods_per_replica(rj: dict) -> int:
        return int(((rj.get("template") or {}).get("spec") or {}).get("parallelism") or 1)

    def state(self) -> WorkloadState:
        obj = self.read()
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        desired = sum(int(rj.get("replicas", 1)) * self._pods_per_replica(rj) for rj in self._replicated(obj))
        return WorkloadState(self.kind, self.key, self._ready_pods(), desired, bool(spec.get("suspend")),
                             restarts=int(status.get("restarts") or 0),
                             restart_limit=int((spec.get("failurePolicy") or {}).get("maxRestarts", 0)),
                             kueue_queue=(obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE, ""),
                             ignores_disruptions=self._all_ignore(obj))

    def resize(self, nodes: int) -> WorkloadChange:
        """replicas of the replicatedJob named by settings `workload.replicated_job` (the only one, if there is
        one). JobSet's webhook keeps replicatedJobs immutable; a controller with elastic JobSets (KEP-463) takes
        the change and deletes the highest job indexes on a scale-down."""
        obj = self.read()
        rjs = self._replicated(obj)
        wanted = self.cluster.settings.workload.replicated_job
        target = next((r for r in rjs if r.get("name") == wanted), rjs[0] if len(rjs) == 1 else None)
        if target is None:
            raise WorkloadRefused(f"{self.key}: no replicatedJob {wanted!r} to resize "
                                  f"(has {', '.join(r.get('name', '?') for r in rjs)}); set workload.replicated_job")
        per = self._pods_per_replica(target)
        others = sum(int(r.get("replicas", 1)) * self._pods_per_replica(r) for r in rjs if r is not target)
        replicas, rest = divmod(nodes - others, per)
        if rest or replicas < 1:
            raise WorkloadRefused(f"{self.key}: {nodes} pods is not a whole number of {target['name']} jobs of "
                                  f"{per} pod(s) beside the other {others}")
        via = f"spec.replicatedJobs[{target['name']}].replicas"
        if int(target.get("replicas", 1)) == replicas:
            return self._change("resize", False, via=via, detail=f"already {replicas}")
        if self.cluster.dry_run:
            return self._change("resize", True, via=via, detail=f"would set {replicas}")
        new = [dict(r, replicas=replicas) if r is target else r for r in rjs]
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"replicatedJobs": new}}
        try:
            self._patch(body, f"resize JobSet {self.key} to {replicas} {target['name']} job(s)")
        except Forbidden as exc:
            if "denied the request" not in str(exc):
                raise
            raise WorkloadRefused(f"{self.key}: the JobSet controller keeps replicatedJobs immutable (its webhook "
                                  f"denied the change); resizing needs elastic JobSets (KEP-463). {exc}") from None
        return self._change("resize", True, via=via, detail=f"{replicas} {target['name']} job(s)")

    def _restart_is_counted(self) -> bool:
        """An evicted pod fails its child Job (and so restarts the gang, one of failurePolicy.maxRestarts) unless
        every replicatedJob's Job template has a podFailurePolicy that ignores DisruptionTarget."""
        return not self._all_ignore(self.read())

    def _all_ignore(self, obj: dict) -> bool:
        return all(_ignores_disruptions((rj.get("template") or {}).get("spec") or {}) for rj in self._replicated(obj))

    def _restart_words(self, n: int) -> str:
        return (f"evicted {n} pod(s); unless its Job template's podFailurePolicy ignores DisruptionTarget, the child "
                "Job fails and the JobSet recreates every child Job (one restart of failurePolicy.maxRestarts)")


class PyTorchJob(_Custom):
    """PyTorchJob kubeflow.org/v1 (kubeflow/training-operator)."""

    kind = WorkloadKind.PYTORCHJOB
    api = PYTORCHJOB
    suspend_path = ("spec", "runPolicy", "suspend")

    def pod_selector(self) -> str:
        return f"{TO_JOB_NAME}={self.name},{TO_OPERATOR}=pytorchjob-controller"

    @staticmethod
    def _replicas(obj: dict) -> dict[str, int]:
        specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        return {t: int((s or {}).get("replicas", 1)) for t, s in specs.items()}

    def _elastic(self, obj: dict) -> tuple[int, int] | None:
        policy = (obj.get("spec") or {}).get("elasticPolicy")
        if not policy:
            return None
        fixed = sum(n for t, n in self._replicas(obj).items() if t != "Worker")
        workers = self._replicas(obj).get("Worker", 0)
        low = policy.get("minReplicas", workers)
        high = policy.get("maxReplicas", workers)
        return fixed + int(low), fixed + int(high)

    def state(self) -> WorkloadState:
        obj = self.read()
        run = (obj.get("spec") or {}).get("runPolicy") or {}
        limit = run.get("backoffLimit")
        return WorkloadState(self.kind, self.key, self._ready_pods(), sum(self._replicas(obj).values()),
                             bool(run.get("suspend")), restart_limit=int(limit) if limit is not None else None,
                             elastic=self._elastic(obj),
                             kueue_queue=(obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE, ""))

    def resize(self, nodes: int) -> WorkloadChange:
        """Worker replicas (the scale subresource's spec path), only for an elastic job and inside its
        elasticPolicy min/maxReplicas: torchrun's rendezvous (--nnodes=MIN:MAX) takes nothing outside them."""
        obj = self.read()
        bounds = self._elastic(obj)
        if bounds is None:
            raise WorkloadRefused(f"{self.key} has no elasticPolicy: torchrun was started with a fixed --nnodes, "
                                  "so it cannot run on fewer nodes")
        if not bounds[0] <= nodes <= bounds[1]:
            raise WorkloadRefused(f"{self.key}: {nodes} nodes is outside its elasticPolicy range "
                                  f"{bounds[0]}..{bounds[1]} (minReplicas..maxReplicas plus the master)")
        workers = nodes - sum(n for t, n in self._replicas(obj).items() if t != "Worker")  # the master stays
        via = "spec.pytorchReplicaSpecs.Worker.replicas"
        if self._replicas(obj).get("Worker") == workers:
            return self._change("resize", False, via=via, detail=f"already {workers}")
        if self.cluster.dry_run:
            return self._change("resize", True, via=via, detail=f"would set {workers} workers")
        self._patch({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}},
                    f"resize PyTorchJob {self.key} to {workers} workers")
        return self._change("resize", True, via=via, detail=f"{workers} workers")

    def _restart_words(self, n: int) -> str:
        return f"evicted {n} pod(s); the training operator creates them again under their names"
