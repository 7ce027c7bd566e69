"""What the ledger hands back: frozen plain dataclasses, readable after the session that loaded them is gone."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState, Topology


@dataclass(frozen=True)
class NodeRecord:
    name: str
    gpu_model: str
    gpu_count: int
    zone: str
    rack: str
    switch: str
    pdu: str
    instance_type: str
    provider_id: str
    state: NodeState | None  # None = not (yet) managed by gpu-remedy
    state_version: int  # bumped by every state change; the compare-and-swap token
    validated_at: datetime | None
    validation_level: str | None
    updated_at: datetime

    @property
    def topology(self) -> Topology:
        return Topology(zone=self.zone, rack=self.rack, switch=self.switch, pdu=self.pdu)


@dataclass(frozen=True)
class TransitionRecord:
    id: int
    node: str
    from_state: NodeState | None
    to_state: NodeState
    reason: str
    requested_by: str
    at: datetime
    idempotency_key: str | None


@dataclass(frozen=True)
class IncidentRecord:
    id: int
    fingerprint: str
    node: str
    gpu: int | None
    signal: str
    xid: int | None
    first_seen: datetime
    last_seen: datetime
    count: int
    status: IncidentStatus
    detail: str
    severity: str
    flow_run_id: str | None
    resolved_at: datetime | None
    rack: str
    switch: str
    pdu: str
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ActionRecord:
    id: int
    kind: str
    node: str
    incident_id: int | None
    requested_by: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None
    outcome: ActionOutcome
    error: str
    detail: dict[str, Any]
    idempotency_key: str | None


@dataclass(frozen=True)
class ValidationRecord:
    id: int
    node: str
    level: str
    passed: bool
    at: datetime
    summary: dict[str, Any]
    requested_by: str


@dataclass(frozen=True)
class BreakerEventRecord:
    id: int
    scope_kind: str
    scope: str
    from_state: str
    to_state: str
    reason: str
    at: datetime
    by: str


@dataclass(frozen=True)
class ApprovalRecord:
    id: int
    incident_id: int | None
    flow_run_id: str
    kind: str
    requested_at: datetime
    decided_at: datetime | None
    decision: str | None  # None = still pending
    decided_by: str | None
    reason: str
    slack_ts: str | None

    @property
    def pending(self) -> bool:
        return self.decision is None


@dataclass(frozen=True)
class LeaseRecord:
    """A flow run's lease: alive while `expires_at` is ahead (its process renews it); gone once it is behind."""

    run_id: str
    process: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None  # the run finished, or was found gone and reaped
    end_reason: str

    def live(self, now: datetime) -> bool:
        return self.ended_at is None and self.expires_at > now


@dataclass(frozen=True)
class Claim:
    """The answer to "may this run act on the incident?" (`Ledger.claim`)."""

    claimed: bool
    holder: str  # who holds the incident now ("" if nobody)
    status: IncidentStatus
    took_over_from: str | None = None  # the gone run this claim took the incident from
    holder_lease: LeaseRecord | None = None  # the holder's lease: alive when the claim was refused for it
    abandoned: tuple[int, ...] = ()  # actions the gone run left running, now recorded as failed
    reaped: tuple[str, ...] = ()  # gone runs whose leases this claim ended (the holder, runs paused for an answer)


@dataclass(frozen=True)
class Fence:
    """Who writes, for the check every acting write makes inside its own transaction (`LedgerBase._fenced`): the
    write goes through only while the incident is held by one of `holders` (this run and the runs that started it:
    a subflow acts under its triage parent's claim), or by nobody, and while `run`'s own lease, if it has one, is
    live. A run that stalled past its lease and was taken over (or re-announced) is refused at its next write."""

    run: str
    holders: frozenset[str]

    @classmethod
    def of(cls, run: str, *ancestors: str) -> Fence:
        return cls(run, frozenset({run, *(a for a in ancestors if a)}))


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a node's audit trail; `record` is the full transition / action / validation."""

    at: datetime
    kind: str  # "transition" | "action" | "validation"
    summary: str
    by: str
    record: TransitionRecord | ActionRecord | ValidationRecord = field(repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "kind": self.kind, "summary": self.summary, "by": self.by,
                "id": self.record.id}
