"""The incident outbox, kept in the ledger's incidents table (no extra table, so no schema change).

An incident the receiver opened is "unannounced" while it is open, has no `flow_run_id`, and its detail starts with
`RECEIVER_MARK`. Once Prefect acknowledges its `remedy.incident.opened` event, `flow_run_id` becomes
`event:<event id>`; triage's claim later replaces that with its own run id. Incidents opened by flows themselves
(CLI, demo) carry no mark and are never announced. Because the mark is written in the same transaction as the
incident, a receiver that dies after answering 2xx still finds every unannounced incident on restart.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from remedy.domain.model import IncidentStatus
from remedy.ledger import schema
from remedy.ledger.convert import incident_record
from remedy.ledger.records import IncidentRecord

RECEIVER_MARK = "alertmanager:"
EVENT_MARK = "event:"


def unannounced(ledger, limit: int = 500) -> list[IncidentRecord]:
    """Receiver incidents whose event Prefect has not acknowledged yet, oldest first."""
    i = schema.incidents.c
    q = (
        select(schema.incidents)
        .where(i.status == IncidentStatus.OPEN.value, i.flow_run_id.is_(None), i.detail.like(f"{RECEIVER_MARK}%"))
        .order_by(i.id)
        .limit(limit)
    )
    with ledger._read() as conn:
        return [incident_record(r) for r in conn.execute(q)]


def mark_announced(ledger, event_ids: dict[int, str]) -> int:
    """Record acknowledged events (incident id → event id); an incident triage already claimed is left alone."""
    if not event_ids:
        return 0
    i = schema.incidents.c
    done = 0
    with ledger._write() as conn:
        for incident_id, event_id in event_ids.items():
            done += conn.execute(
                update(schema.incidents)
                .where(i.id == incident_id, i.flow_run_id.is_(None))
                .values(flow_run_id=f"{EVENT_MARK}{event_id}")
            ).rowcount
    return done


def touch_resolved(ledger, fingerprint: str, at: datetime) -> int | None:
    """A resolved alert for an open incident: move last_seen forward, change nothing else. Returns its id or None."""
    i = schema.incidents.c
    with ledger._write() as conn:
        row = conn.execute(
            select(i.id, i.last_seen)
            .where(i.fingerprint == fingerprint, i.status != IncidentStatus.RESOLVED.value)
            .order_by(i.last_seen.desc(), i.id.desc())
            .limit(1)
        ).first()
        if row is None:
            return None
        if at > row.last_seen:
            conn.execute(update(schema.incidents).where(i.id == row.id).values(last_seen=at))
        return row.id
