"""The capability gpu-remedy needs from a cluster (`ClusterPort`) and the values it trades in.

Flows and tasks depend on this interface only; `remedy.adapters.kubernetes.KubernetesCluster` implements it with
the official client (against a real API server or the simulator).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from remedy.domain.model import Node
from remedy.spares.preemption import Workload

if TYPE_CHECKING:
    from remedy.adapters.workloads import TrainingWorkload
    from remedy.safety.disruption import PodBudgets
    from remedy.safety.fence import NodeFence


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute
    value: str = "true"

    def to_k8s(self) -> dict:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass
class Change:
    """What a mutating call did (or, in dry-run, would have done)."""

    node: str
    action: str
    changed: bool  # False when the node already was in the wanted state (idempotent success)
    dry_run: bool = False
    detail: str = ""


@dataclass
class DrainReport:
    node: str
    evicted: list[str] = field(default_factory=list)  # namespace/name
    skipped: list[str] = field(default_factory=list)  # DaemonSet, mirror and finished pods, with why
    not_evicted: dict[str, str] = field(default_factory=dict)  # namespace/name -> reason
    blocked_retries: int = 0  # 429s from PodDisruptionBudgets
    # pods the Eviction API refuses whatever the wait (covered by more than one PodDisruptionBudget), with why and
    # the budgets' names: a person must act; also in not_evicted
    refused: dict[str, str] = field(default_factory=dict)
    # pods left Terminating past their grace period on a NotReady node (no kubelet to confirm): force-deleted
    force_deleted: list[str] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False

    @property
    def complete(self) -> bool:
        return not self.not_evicted


@dataclass(frozen=True)
class NodeJobSpec:
    """A Job pinned to one node, or spread over a group of nodes (health checks, GPU reset, reboot).

    Pinned by required node affinity on `kubernetes.io/hostname` (In `nodes`, default the one `node`); with
    `parallelism` > 1 it is an Indexed Job whose pods repel each other (required pod anti-affinity per host), so
    a real scheduler puts exactly one on each node of the group."""

    name: str  # Job name; must be unique per run (caller adds a suffix)
    node: str
    check: str  # value of the `remedy.io/check` label: which tool/runner
    image: str = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    privileged: bool = False
    gpus: int = 0  # nvidia.com/gpu requested and limited per pod
    see_all_gpus: bool = False  # no GPU request, NVIDIA_VISIBLE_DEVICES=all: read-only view (the NVML probe)
    timeout_seconds: int = 600
    labels: tuple[tuple[str, str], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()  # instead of the hostname affinity (e.g. a batch label)
    parallelism: int = 1
    nodes: tuple[str, ...] = ()  # the group a multi-node Job spreads over (default: just `node`)

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.nodes or (self.node,)


@dataclass
class JobResult:
    name: str
    node: str
    succeeded: bool
    phase: str  # Succeeded | Failed | Timeout | Planned
    logs: str = ""
    seconds: float = 0.0
    dry_run: bool = False


@dataclass(frozen=True)
class Drift:
    """The live node disagrees with what gpu-remedy last did to it: an operator acted by hand."""

    node: str
    what: str  # e.g. "uncordoned by hand"
    detail: str = ""


class LogFollower(Protocol):
    """Many pods' logs followed at once (the batch smoke test reads every pod of its Job); close when done."""

    def lines(self, pod: str, timeout: float) -> Iterator[str]: ...
    def close(self) -> None: ...


class ClusterPort(Protocol):
    """Every call tasks and flows make on the cluster (`remedy.runtime.cluster()` is typed as this, so mypy
    finds a call the port does not declare); `tests/adapters/test_ports.py` checks the adapter implements each."""

    dry_run: bool

    def list_gpu_nodes(self) -> list[Node]: ...
    def get_node(self, name: str) -> Node: ...
    # `fence`: a call made for an incident is refused by the API server once another run holds the incident
    # (remedy.safety.fence; FenceLost); None for calls made for no incident
    def cordon(self, name: str, *, reason: str, by: str, adopt: str | None = None,
               fence: NodeFence | None = None) -> Change: ...
    def uncordon(self, name: str, *, reason: str, by: str, fence: NodeFence | None = None) -> Change: ...
    def set_taints(self, name: str, *, add: list[Taint] = ..., remove: list[str] = ...,
                   fence: NodeFence | None = None) -> Change: ...
    def set_labels(self, name: str, labels: dict[str, str | None], fence: NodeFence | None = None) -> Change: ...
    def fence_node(self, name: str, fence: NodeFence | None) -> None: ...
    def drain(self, name: str, *, grace_period_seconds: int, deadline_seconds: float,
              fence: NodeFence | None = None) -> DrainReport: ...
    def pod_budgets(self, node: str) -> list[PodBudgets]: ...
    def pods_on_node(self, name: str) -> list[dict]: ...

    # Jobs in the jobs namespace: one node's check (run_node_job), or a batch Job followed pod by pod
    def render_node_job(self, spec: NodeJobSpec) -> dict: ...
    def run_node_job(self, spec: NodeJobSpec, *, fence: NodeFence | None = None) -> JobResult: ...
    def create_job(self, manifest: dict) -> bool: ...
    def job_status(self, job: str) -> dict: ...
    def job_pods(self, job: str) -> list[dict]: ...
    def log_follower(self, streams: int) -> LogFollower: ...
    def delete_job(self, job: str) -> None: ...
    def record_event(self, node: str, *, reason: str, message: str, type: str = "Normal") -> None: ...
    def detect_drift(self, name: str) -> Drift | None: ...
    def read_job(self, namespace: str, job: str) -> dict: ...

    def workload(self, namespace: str, name: str, kind: str | None = None) -> TrainingWorkload: ...
    def workload_size(self, namespace: str, job: str) -> tuple[int, int]: ...
    def resize_workload(self, namespace: str, job: str, nodes: int) -> dict: ...
    def workload_running_on(self, namespace: str, job: str, node: str) -> bool: ...
    def restart_pods(self, node: str, namespace: str, fence: NodeFence | None = None) -> list[str]: ...
    def workload_nodes(self, namespace: str, job: str) -> list[str]: ...
    def joined(self, name: str) -> tuple[bool, str]: ...
    def gpu_workloads(self) -> list[Workload]: ...
    def preempt_workload(self, name: str, *, grace_period_seconds: int, reason: str) -> dict: ...
