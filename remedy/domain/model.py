"""The fleet's vocabulary: nodes, their lifecycle states, incidents and actions.

Plain typed Python, no Prefect and no Kubernetes import, so flows, the ledger, the simulator and
the policy simulator all share one definition.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the ledger's record of an incident (remedy.ledger imports this module)
    from remedy.ledger.records import IncidentRecord


def utcnow() -> datetime:
    return datetime.now(UTC)


class NodeState(StrEnum):
    """Where a GPU node is in its life. Mirrored on the node as the `remedy.io/pool` label."""

    BURN_IN = "burn-in"  # being validated before it may carry work
    SPARE = "spare"  # validated, warm, tainted so nothing lands on it
    ACTIVE = "active"  # in the training pool
    QUARANTINED = "quarantined"  # cordoned + tainted after a fault; work drained
    REPAIR = "repair"  # handed to hardware repair / RMA
    RETIRED = "retired"  # a lemon: out of the fleet for good


# One state machine. Anything not listed is illegal; `retired → burn-in` exists only as an
# explicit operator action (see `OPERATOR_ONLY`), so a lemon never drifts back on its own.
TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.BURN_IN: frozenset({NodeState.SPARE, NodeState.ACTIVE, NodeState.QUARANTINED, NodeState.REPAIR, NodeState.RETIRED}),
    NodeState.SPARE: frozenset({NodeState.ACTIVE, NodeState.BURN_IN, NodeState.QUARANTINED, NodeState.RETIRED}),
    NodeState.ACTIVE: frozenset({NodeState.QUARANTINED, NodeState.SPARE, NodeState.RETIRED}),
    NodeState.QUARANTINED: frozenset({NodeState.ACTIVE, NodeState.REPAIR, NodeState.BURN_IN, NodeState.SPARE, NodeState.RETIRED}),
    NodeState.REPAIR: frozenset({NodeState.BURN_IN, NodeState.RETIRED}),
    NodeState.RETIRED: frozenset({NodeState.BURN_IN}),
}
OPERATOR_ONLY: frozenset[tuple[NodeState, NodeState]] = frozenset({(NodeState.RETIRED, NodeState.BURN_IN)})


class IllegalTransition(ValueError):
    """A state change the lifecycle does not allow."""

    def __init__(self, node: str, current: NodeState, target: NodeState, why: str = "") -> None:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "nothing"
        msg = f"{node}: cannot go from {current.value} to {target.value} (allowed: {allowed})"
        super().__init__(msg + (f"; {why}" if why else ""))
        self.node, self.target = node, target
        self.current: NodeState | None = current  # None: an unmanaged node (remedy.ledger.errors.UnmanagedNode)


def check_transition(node: str, current: NodeState, target: NodeState, *, by_operator: bool = False) -> None:
    """Raise IllegalTransition unless `current → target` is allowed (same state is a no-op, allowed)."""
    if current == target:
        return
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(node, current, target)
    if (current, target) in OPERATOR_ONLY and not by_operator:
        raise IllegalTransition(node, current, target, "only an operator may bring a retired node back")


@dataclass(frozen=True)
class Topology:
    """Failure domains a node shares with its neighbours."""

    zone: str = ""
    rack: str = ""
    switch: str = ""
    pdu: str = ""

    def scopes(self) -> dict[str, str]:
        """Breaker scopes this node belongs to (empty values are skipped)."""
        out = {"cluster": "cluster"}
        for key in ("rack", "switch", "pdu"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


_EFFECT_STRENGTH = {"PreferNoSchedule": 0, "NoSchedule": 1, "NoExecute": 2}


@dataclass
class Node:
    """A GPU node as gpu-remedy sees it (live view from the cluster + lifecycle state)."""

    name: str
    gpu_model: str = ""
    gpu_count: int = 0
    topology: Topology = field(default_factory=Topology)
    state: NodeState | None = None  # from the pool label; None = not yet managed
    instance_type: str = ""
    provider_id: str = ""
    ready: bool = True
    unschedulable: bool = False
    # (key, effect) -> value: one key may carry several effects (`k:NoSchedule` and `k:NoExecute` are two taints on
    # the API server), so keying by key alone would lose one
    taints: dict[tuple[str, str], str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    allocatable_gpus: int = 0
    resource_version: str = ""
    boot_id: str = ""  # status.nodeInfo.bootID: the kubelet reports a new one after every boot
    addresses: tuple[str, ...] = ()  # status.addresses (InternalIP, ExternalIP, Hostname …): an exporter's `instance`

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable and not any(
            effect in ("NoSchedule", "NoExecute") for _, effect in self.taints
        )

    def has_taint(self, key: str, effect: str | None = None) -> bool:
        return any(k == key and (effect is None or e == effect) for k, e in self.taints)

    def taint_effect(self, key: str) -> str | None:
        """The effect of `key`'s taint, the strongest if it has several (NoExecute > NoSchedule > PreferNoSchedule);
        None when the node does not carry `key`."""
        effects = [e for k, e in self.taints if k == key]
        return max(effects, key=lambda e: _EFFECT_STRENGTH.get(e, -1)) if effects else None


class IncidentStatus(StrEnum):
    OPEN = "open"
    ACTING = "acting"
    RESOLVED = "resolved"
    ESCALATED = "escalated"
    IGNORED = "ignored"


def incident_fingerprint(node: str, gpu: int | None, signal: str, xid: int | None = None) -> str:
    """Stable id of 'this fault on this GPU of this node': dedup and idempotency hang on it."""
    raw = f"{node}|{'' if gpu is None else gpu}|{signal}|{'' if xid is None else xid}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


# The incident retire-node opens to swap a lemon out of the job (flows/retire_node.py): a planned move under a
# person's approval, not a fault. It holds the spare's claim; lemon scoring, the RMA report and the correlated-
# failure check leave it out, or a deferred retirement would count as one more failure of the node.
PLANNED_RETIREMENT_SIGNAL = "lemon-retirement"


def is_fault(incident: Incident | IncidentRecord) -> bool:
    """Did the node fail (as opposed to being moved on purpose)?"""
    return incident.signal != PLANNED_RETIREMENT_SIGNAL


@dataclass
class Incident:
    node: str
    signal: str  # e.g. "xid", "row-remap-failure", "node-not-ready"
    gpu: int | None = None
    xid: int | None = None
    first_seen: datetime = field(default_factory=utcnow)
    last_seen: datetime = field(default_factory=utcnow)
    count: int = 1
    status: IncidentStatus = IncidentStatus.OPEN
    detail: str = ""
    id: int | None = None
    # Alert identity: Alertmanager's fingerprint + startsAt (log lines: node + GPU + fault + kernel time). A re-send
    # of the same occurrence is the same incident however late it arrives; empty for incidents opened by hand.
    occurrence: str = ""
    alert_fingerprint: str = ""
    evidence: dict = field(default_factory=dict)  # value, unit, duration, raw text, labels: what the incident saw

    @property
    def fingerprint(self) -> str:
        return incident_fingerprint(self.node, self.gpu, self.signal, self.xid)


class ActionOutcome(StrEnum):
    PLANNED = "planned"  # dry-run: recorded and shown, nothing changed
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # a gate refused; the reason is in `error`


@dataclass
class Action:
    kind: str  # verb_object, e.g. "cordon_node", "drain_node", "promote_spare"
    node: str
    requested_by: str = ""  # flow run id / name, or "operator:<name>"
    dry_run: bool = False
    started_at: datetime = field(default_factory=utcnow)
    finished_at: datetime | None = None
    outcome: ActionOutcome = ActionOutcome.RUNNING
    error: str = ""
    incident_id: int | None = None
    idempotency_key: str | None = None
    detail: dict = field(default_factory=dict)
    id: int | None = None
