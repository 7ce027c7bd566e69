"""A simulated GPU cluster: the object store, each node's hidden health, simulated time, and save/load.

Time is real wall-clock time; `time_scale` shrinks every simulated duration (grace periods, job
run times, reboots): 0.01 makes a 30 s grace period last 0.3 s.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remedy.errors import NodeNotFound, RemedyError
from remedy.sim.health import NodeHealth
from remedy.sim.index import ClusterIndex
from remedy.sim.objects import WORKLOAD_ANNOTATION  # noqa: F401  (the Job controller imports it from here)
from remedy.sim.store import ObjectStore, deep_copy
from remedy.sim.throttle import Throttle

TRAINING_NAMESPACE = "training"
TRAINING_JOB = "llm-pretrain"
CHECK_LABEL = "remedy.io/check"  # pod-template label that picks the job runner
SAVE_FORMAT = "gpu-remedy-sim/1"


class SimStateError(RemedyError):
    """A saved simulator state that cannot be loaded."""


@dataclass
class PodRun:
    """A finite pod's run: what its runner decided, and when each log line and the end become visible."""

    started: float
    exit_code: int
    finish_due: float
    lines: list[tuple[float, str]] = field(default_factory=list)


class Cluster:
    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        seed: int = 0,
        alert_url: str | None = None,
        alert_token: str | None = None,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.store = ObjectStore()
        self.index = ClusterIndex()
        self.store.on_change.append(self.index.on_change)
        self.lock = self.store.lock
        self.time_scale = float(time_scale)
        self.seed = seed
        self.alert_url = alert_url
        self.alert_token = alert_token
        self.health: dict[str, NodeHealth] = {}  # hidden: never served through the Kubernetes API
        self.dmesg: dict[str, list[str]] = {}
        self.logs: dict[tuple[str, str], list[tuple[float, str]]] = {}  # (ns, pod) -> (visible at, line)
        self.runs: dict[tuple[str, str], PodRun] = {}
        self.rebooting: dict[str, float] = {}  # node -> monotonic time it is back
        self.alerts: list[dict] = []  # every alert the injector tried to post, with the outcome
        self.firing: dict[str, list[dict]] = {}  # node -> alerts still firing (resolved by `heal`)
        self.deletions: dict[tuple[str, str], float] = {}  # terminating pod -> monotonic time it is gone
        self.noexecute_since: dict[tuple[str, str], float] = {}  # (node, taint key) -> when first seen
        self.eviction_timers: set[tuple[str, str, str]] = set()
        self.job_targets: dict[str, list[tuple[int, str | None]]] = {}  # Job uid -> (index, pinned node)
        self.job_started: dict[str, float] = {}
        self.eligible_cache: dict[str, dict[str, tuple]] = {}  # Job uid -> node -> (rv, ready, why not)
        self.job_settled: dict[str, bool] = {}  # Job uid -> every pod it needs is placed
        # Job failure counting (remedy.sim.jobs): pods already seen ending, failures not yet in status, FailJob
        self.job_counted: dict[str, set[str]] = {}
        self.job_new_failures: dict[str, int] = {}
        self.job_fail_reason: dict[str, tuple[str, str]] = {}
        # True: deleted pods count toward backoffLimit as on a real cluster; False: only pods that end Failed while
        # present count (the simulator before issue 18, for tests that want the lenient controller)
        self.count_deleted_pods = True
        # The Job controller's pod-failure back-off (remedy.sim.jobs.pod_failure_backoff): no new pod for a Job until
        # 10 s x 2^(n-1) (max 10 min, simulated seconds) after its latest failure; False replaces at once
        self.pod_failure_backoff = True
        self.job_backoff: dict[str, tuple[int, float]] = {}  # Job uid -> (failures since last success, when: monotonic)
        self.job_backoff_wake: set[str] = set()  # Job uids with a timer set for the end of their back-off
        self.podgc_seen: dict[tuple[str, str], float] = {}  # pod key -> when PodGC's gcTerminating first could take it
        self.checkpoint_cadence: set[str] = set()  # training Job uids whose checkpoint cadence runs (remedy.sim.checkpoints)
        self.checkpoint_asked: set[str] = set()  # training Job uids with a requested checkpoint under way
        self._pod_ips = itertools.count(1)
        self.booted = time.monotonic()
        self.nfs_counters: dict[str, Any] = {}  # node -> its NFS mount's counters (remedy.sim.nfs)
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition(self.lock)
        self._clock: threading.Thread | None = None
        self._stopping = False
        self._reconciling = False
        self._again: set[str] | None = None
        self.throttle: Throttle | None = None  # API throttling (429 + Retry-After under load); off by default
        self.jobset_elastic = False  # True: JobSet replicas may change (elastic JobSets, KEP-463); remedy.sim.crds

    # -- time --
    def scaled(self, seconds: float) -> float:
        """Real seconds a simulated duration takes."""
        return max(0.0, float(seconds)) * self.time_scale

    def call_later(self, sim_seconds: float, fn: Callable[[], None]) -> float:
        """Run `fn` (under the lock, then reconcile) once `sim_seconds` of simulated time have passed."""
        due = time.monotonic() + self.scaled(sim_seconds)
        with self.lock:
            heapq.heappush(self._timers, (due, next(self._seq), fn))
            self._wake.notify_all()
        return due

    def run_due(self) -> float | None:
        """Fire every timer that is due, reconcile; return the monotonic time of the next timer."""
        with self.lock:
            fired = False
            while self._timers and self._timers[0][0] <= time.monotonic():
                _, _, fn = heapq.heappop(self._timers)
                fn()
                fired = True
            if fired:
                self.reconcile(set())  # timers that change nodes reconcile those nodes themselves
            return self._timers[0][0] if self._timers else None

    def start_clock(self) -> None:
        """Start the background thread that fires timers (SimServer does this)."""
        if self._clock and self._clock.is_alive():
            return
        self._stopping = False
        self._clock = threading.Thread(target=self._tick_forever, name="sim-clock", daemon=True)
        self._clock.start()

    def stop_clock(self) -> None:
        with self.lock:
            self._stopping = True
            self._wake.notify_all()
        if self._clock:
            self._clock.join(timeout=2)
            self._clock = None

    def _tick_forever(self) -> None:
        while True:
            with self.lock:
                if self._stopping:
                    return
                nxt = self.run_due()
                if self._stopping:
                    return
                self._wake.wait(timeout=None if nxt is None else max(0.0, nxt - time.monotonic()) + 0.001)

    def settle(self, timeout: float = 5.0, until: Callable[[], bool] | None = None) -> bool:
        """Fire timers until `until()` holds (or no timer is left); for tests without a clock thread."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nxt = self.run_due()
            if until is not None and until():
                return True
            if until is None and nxt is None:
                return True
            time.sleep(0.005 if nxt is None else min(0.05, max(0.0, nxt - time.monotonic())))
        return bool(until and until())

    # -- controller --
    def reconcile(self, nodes: set[str] | None = None) -> None:
        from remedy.sim.controller import reconcile

        with self.lock:
            if self._reconciling:  # a runner mutating state mid-pass: run another pass when this one ends
                self._again = (self._again or set()) | (set(self.health) if nodes is None else set(nodes))
                return
            self._reconciling = True
            try:
                passes = 0
                while True:
                    self._again = None
                    reconcile(self, nodes)
                    passes += 1
                    if self._again is None or passes > 10:
                        break
                    nodes = self._again
            finally:
                self._reconciling = False

    def next_pod_ip(self) -> int:
        return next(self._pod_ips)

    # -- nodes and health --
    def node_names(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.store.objects("Node"))

    def node(self, name: str) -> dict:
        obj = self.store.get("Node", "", name)
        if obj is None:
            raise NodeNotFound(name)
        return obj

    def health_of(self, name: str) -> NodeHealth:
        """The node's hidden hardware health (mutable; call `reconcile({name})` after changing it)."""
        try:
            return self.health[name]
        except KeyError:
            raise NodeNotFound(name) from None

    def node_ready(self, name: str) -> bool:
        return not self.health_of(name).not_ready and name not in self.rebooting

    def nodes_matching(self, node_selector: dict[str, str]) -> list[str]:
        """Names of nodes whose labels contain every key=value of a pod nodeSelector."""
        out = []
        for node in self.store.objects("Node"):
            labels = node["metadata"].get("labels", {})
            if all(labels.get(k) == v for k, v in node_selector.items()):
                out.append(node["metadata"]["name"])
        return sorted(out)

    def pods_on(self, node: str) -> list[dict]:
        return self.index.on_node(node)

    def reboot_node(self, name: str, sim_seconds: float = 180.0) -> None:
        """Take the node NotReady for `sim_seconds`; then it is back, with faults cleared if `reboot_clears`."""
        with self.lock:
            self.health_of(name)
            self.rebooting[name] = time.monotonic() + self.scaled(sim_seconds)
            self.kernel_log(name, "reboot: Restarting system")

            def back() -> None:
                self.rebooting.pop(name, None)
                # the kubelet reads a new /proc/sys/kernel/random/boot_id after a boot and reports it
                self.store.mutate("Node", "", name, lambda n: n["status"].setdefault("nodeInfo", {}).update(
                    bootID=str(uuid.uuid4())))
                health = self.health.get(name)
                if health is not None:
                    health.clear_after_reboot()
                self.dmesg[name] = ["Linux version 6.8.0-sim (buildd@sim) #1 SMP"]
                self.record_event(name, "Rebooted", f"Node {name} has been rebooted", "Warning")
                self.reconcile({name})

            self.call_later(sim_seconds, back)
            self.reconcile({name})

    def kernel_log(self, node: str, line: str) -> None:
        uptime = time.monotonic() - self.booted
        self.dmesg.setdefault(node, []).append(f"[{uptime:12.6f}] {line}")

    def record_event(self, node: str, reason: str, message: str, type_: str = "Normal",
                     component: str = "gpu-remedy-sim") -> None:
        """A core/v1 Event about a node, filed like the kubelet does (namespace default, uid = node name)."""
        from remedy.sim.objects import node_event

        with self.lock:
            self.store.create("Event", node_event(node, reason, message, type_, component))

    # -- pod logs --
    def append_log(self, namespace: str, pod: str, line: str, at: float | None = None) -> None:
        self.logs.setdefault((namespace, pod), []).append((time.monotonic() if at is None else at, line))

    def visible_log(self, namespace: str, pod: str) -> list[str]:
        now = time.monotonic()
        return [line for due, line in self.logs.get((namespace, pod), []) if due <= now]

    # -- the training job --
    def training_job(self) -> dict | None:
        return self.store.get("Job", TRAINING_NAMESPACE, TRAINING_JOB)

    def training_size(self) -> int:
        """Running, ready pods of the training job (its effective size)."""
        job = self.training_job()
        return int((job or {}).get("status", {}).get("ready", 0))

    def sessions(self) -> dict[str, str]:
        """Interactive sessions still alive (not terminating): pod name -> node ("" while Pending)."""
        from remedy.sim.objects import SESSIONS_NAMESPACE

        with self.lock:
            return {p["metadata"]["name"]: p["spec"].get("nodeName") or ""
                    for _, p in self.index.in_namespace(SESSIONS_NAMESPACE)
                    if not p["metadata"].get("deletionTimestamp")
                    and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")}

    # -- state, save and load --
    def state(self, include_objects: bool = True) -> dict:
        with self.lock:
            out = {
                "format": SAVE_FORMAT,
                "time_scale": self.time_scale,
                "seed": self.seed,
                "resource_version": self.store.resource_version,
                "health": {n: h.to_dict() for n, h in sorted(self.health.items())},
                "ready": {n: self.node_ready(n) for n in sorted(self.health)},
                "dmesg": deep_copy(self.dmesg),
                "training": {"parallelism": (self.training_job() or {}).get("spec", {}).get("parallelism", 0),
                             "ready": self.training_size()},
                "sessions": self.sessions(),
                "alerts": deep_copy(self.alerts),
            }
            if include_objects:
                out["objects"] = deep_copy(self.store.dump())
                out["logs"] = {f"{ns}/{name}": [line for _, line in lines] for (ns, name), lines in self.logs.items()}
            return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.state(include_objects=True), indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path, **overrides) -> Cluster:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise SimStateError(f"simulator state file not found: {path}") from None
        except json.JSONDecodeError as exc:
            raise SimStateError(f"simulator state file {path} is not JSON: {exc}") from None
        return cls.from_state(data, source=str(path), **overrides)

    @classmethod
    def from_state(cls, data: dict, source: str = "state", **overrides) -> Cluster:
        if not isinstance(data, dict) or data.get("format") != SAVE_FORMAT:
            raise SimStateError(f"{source}: not a simulator state (expected format {SAVE_FORMAT!r})")
        kwargs = {"time_scale": data.get("time_scale", 1.0), "seed": data.get("seed", 0)}
        kwargs.update(overrides)
        cluster = cls(**kwargs)
        try:
            cluster.store.restore(data.get("objects", {}))
            cluster.health = {n: NodeHealth.from_dict(h) for n, h in data.get("health", {}).items()}
        except (KeyError, TypeError) as exc:
            raise SimStateError(f"{source}: malformed simulator state ({exc})") from None
        cluster.store.resource_version = max(cluster.store.resource_version, int(data.get("resource_version", 0)))
        cluster.dmesg = {n: list(lines) for n, lines in data.get("dmesg", {}).items()}
        cluster.alerts = list(data.get("alerts", []))
        for key, lines in data.get("logs", {}).items():
            ns, _, name = key.partition("/")
            cluster.logs[(ns, name)] = [(0.0, line) for line in lines]
        cluster._resume()
        cluster.reconcile()
        cluster.store.start_watch_history()
        return cluster

    def _resume(self) -> None:
        """After a load: clocks that lived only in memory start again (grace periods end now, check pods rerun)."""
        from remedy.sim.controller import finished, terminating
        from remedy.sim.jobs import is_training, job_done, start_run

        now = time.monotonic()
        jobs = {j["metadata"]["uid"]: j for j in self.store.objects("Job")}
        for pod in self.store.objects("Pod"):
            key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
            if terminating(pod):
                self.deletions[key] = now
                continue
            job = jobs.get(next((r.get("uid") for r in pod["metadata"].get("ownerReferences") or []
                                 if r.get("kind") == "Job"), None))
            if job and not is_training(job) and not job_done(job) and pod["spec"].get("nodeName") \
                    and not finished(pod):
                start_run(self, job, pod)


def build_cluster(
    nodes: int = 63,
    spares: int = 3,
    gpus_per_node: int = 8,
    racks: int | None = None,
    nodes_per_rack: int = 8,
    time_scale: float = 1.0,
    seed: int = 0,
    *,
    prefix: str = "gpu",
    alert_url: str | None = None,
    alert_token: str | None = None,
    training_job: bool = True,
    sessions: int = 0,
    gpu_taint: bool = False,
    throttle: Throttle | None = None,
    workload: str = "Job",
    node_images: bool = True,
) -> Cluster:
    """A GPU cluster of `nodes` nodes in total (seed 002: 63 B200 nodes, 60 of them training), of which
    `spares` are warm spares, with its workloads; `sessions` of the training pool's nodes run one low-priority
    single-node interactive session each instead of the training job (parallelism = nodes - spares - sessions).
    `gpu_taint` puts the provider's nvidia.com/gpu=present:NoSchedule taint on every GPU node, as GKE does.
    `throttle` turns on API throttling (remedy.sim.throttle): 429 with Retry-After beyond its rate.
    `workload`: the training workload's kind, "Job" (batch/v1), "JobSet" or "PyTorchJob" (remedy.sim.crds).
    `node_images`: each Node reports its 50 largest images in status.images, as a kubelet does (False: none, as
    the simulator's nodes had before; only for measuring what they cost).
    See remedy/sim/objects.py for the exact objects."""
    from remedy.sim.objects import populate

    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    if not 0 <= spares < nodes:
        raise ValueError(f"spares must be between 0 and nodes-1 ({nodes - 1}), got {spares}")
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if racks is not None and racks < 1:
        raise ValueError(f"racks must be >= 1, got {racks}")
    if nodes_per_rack < 1:
        raise ValueError(f"nodes_per_rack must be >= 1, got {nodes_per_rack}")
    if not 0 <= sessions <= nodes - spares:
        raise ValueError(f"sessions must be between 0 and nodes-spares ({nodes - spares}), got {sessions}")
    cluster = Cluster(time_scale=time_scale, seed=seed, alert_url=alert_url, alert_token=alert_token)
    populate(cluster, nodes=nodes, spares=spares, gpus_per_node=gpus_per_node, racks=racks,
             nodes_per_rack=nodes_per_rack, prefix=prefix, training_job=training_job and workload == "Job",
             sessions=sessions, gpu_taint=gpu_taint, node_images=node_images)
    if training_job and workload != "Job":
        from remedy.sim.crds import add_training_workload

        add_training_workload(cluster, workload, nodes - spares - sessions)
    cluster.reconcile()
    cluster.throttle = throttle
    # the objects above are the cluster as the API server found it at start: its watch cache begins here
    cluster.store.start_watch_history()
    return cluster


def load(path: str | Path, **overrides) -> Cluster:
    """Load a cluster saved with `Cluster.save(path)`."""
    return Cluster.load(path, **overrides)


def save(cluster: Cluster, path: str | Path) -> Path:
    return cluster.save(path)
