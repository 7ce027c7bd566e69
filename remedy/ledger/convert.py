"""Rows → records, and checks on input shared by the ledger's methods."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar, overload

from sqlalchemy import Row

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from remedy.ledger.records import (
    ActionRecord,
    ApprovalRecord,
    BreakerEventRecord,
    IncidentRecord,
    LeaseRecord,
    NodeRecord,
    TransitionRecord,
    ValidationRecord,
)

E = TypeVar("E", bound=StrEnum)


def as_enum(enum: type[E], value: Any, what: str) -> E:
    """Accept the enum or its string value; anything else is a one-line ValueError listing the choices."""
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(m.value for m in enum)
        raise ValueError(f"{what}: unknown value {value!r} (expected one of: {choices})") from None


def require_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def require_choice(value: Any, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise ValueError(f"{what}: unknown value {value!r} (expected one of: {', '.join(choices)})")
    return str(value)


def require_json(value: Any, what: str) -> dict[str, Any]:
    """JSON columns take a dict of JSON-serialisable values; say which one is not rather than fail in the driver."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a dict, got {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None
    return value


@overload
def require_aware(value: datetime, what: str) -> datetime: ...
@overload
def require_aware(value: datetime | None, what: str) -> datetime | None: ...
def require_aware(value: datetime | None, what: str) -> datetime | None:
    if value is not None and (not isinstance(value, datetime) or value.utcoffset() is None):
        raise ValueError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def node_record(row: Row) -> NodeRecord:
    m = row._mapping
    return NodeRecord(
        name=m["name"], gpu_model=m["gpu_model"], gpu_count=m["gpu_count"], zone=m["zone"], rack=m["rack"],
        switch=m["switch"], pdu=m["pdu"], instance_type=m["instance_type"], provider_id=m["provider_id"],
        state=NodeState(m["state"]) if m["state"] is not None else None, state_version=m["state_version"],
        validated_at=m["validated_at"], validation_level=m["validation_level"], updated_at=m["updated_at"],
    )


def transition_record(row: Row) -> TransitionRecord:
    m = row._mapping
    return TransitionRecord(
        id=m["id"], node=m["node"], from_state=NodeState(m["from_state"]) if m["from_state"] is not None else None,
        to_state=NodeState(m["to_state"]), reason=m["reason"], requested_by=m["requested_by"], at=m["at"],
        idempotency_key=m["idempotency_key"],
    )


def incident_record(row: Row) -> IncidentRecord:
    m = row._mapping
    return IncidentRecord(
        id=m["id"], fingerprint=m["fingerprint"], node=m["node"], gpu=m["gpu"], signal=m["signal"], xid=m["xid"],
        first_seen=m["first_seen"], last_seen=m["last_seen"], count=m["count"], status=IncidentStatus(m["status"]),
        detail=m["detail"], severity=m["severity"], flow_run_id=m["flow_run_id"], resolved_at=m["resolved_at"],
        rack=m["rack"], switch=m["switch"], pdu=m["pdu"], evidence=dict(m["evidence"] or {}),
    )


def action_record(row: Row) -> ActionRecord:
    m = row._mapping
    return ActionRecord(
        id=m["id"], kind=m["kind"], node=m["node"], incident_id=m["incident_id"], requested_by=m["requested_by"],
        dry_run=bool(m["dry_run"]), started_at=m["started_at"], finished_at=m["finished_at"],
        outcome=ActionOutcome(m["outcome"]), error=m["error"], detail=dict(m["detail"] or {}),
        idempotency_key=m["idempotency_key"],
    )


def validation_record(row: Row) -> ValidationRecord:
    m = row._mapping
    return ValidationRecord(
        id=m["id"], node=m["node"], level=m["level"], passed=bool(m["passed"]), at=m["at"],
        summary=dict(m["summary"] or {}), requested_by=m["requested_by"],
    )


def breaker_event_record(row: Row) -> BreakerEventRecord:
    m = row._mapping
    return BreakerEventRecord(
        id=m["id"], scope_kind=m["scope_kind"], scope=m["scope"], from_state=m["from_state"],
        to_state=m["to_state"], reason=m["reason"], at=m["at"], by=m["by"],
    )


def approval_record(row: Row) -> ApprovalRecord:
    m = row._mapping
    return ApprovalRecord(
        id=m["id"], incident_id=m["incident_id"], flow_run_id=m["flow_run_id"], kind=m["kind"],
        requested_at=m["requested_at"], decided_at=m["decided_at"], decision=m["decision"],
        decided_by=m["decided_by"], reason=m["reason"], slack_ts=m["slack_ts"],
    )


def lease_record(row: Row) -> LeaseRecord:
    m = row._mapping
    return LeaseRecord(run_id=m["run_id"], process=m["process"], acquired_at=m["acquired_at"],
                       renewed_at=m["renewed_at"], expires_at=m["expires_at"], ended_at=m["ended_at"],
                       end_reason=m["end_reason"])
