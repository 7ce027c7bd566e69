"""The incident outbox, kept in the ledger's incidents table (no extra table, so no schema change).

An incident the receiver opened is "unannounced" while it is open, has no `flow_run_id`, and its detail starts with
`RECEIVER_MARK`. Once Prefect acknowledges its `remedy.incident.opened` event, `flow_run_id` becomes
`event:<event id>`; triage's claim later replaces that with its own run id. Incidents opened by flows themselves
(CLI, demo) carry no mark and are never announced. Because the mark is written in the same transaction as the
incident, a receiver that dies after answering 2xx still finds every unannounced incident on restart.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from remedy.ledger.records import IncidentRecord

if TYPE_CHECKING:
    from remedy.ledger.ledger import Ledger

RECEIVER_MARK = "alertmanager:"
EVENT_MARK = "event:"


def unannounced(ledger: Ledger, limit: int = 500) -> list[IncidentRecord]:
    """Receiver incidents whose event Prefect has not acknowledged yet, oldest first."""
    return ledger.unannounced_incidents(RECEIVER_MARK, limit=limit)


def mark_announced(ledger: Ledger, event_ids: dict[int, str]) -> int:
    """Record acknowledged events (incident id → event id); an incident triage already claimed is left alone."""
    return ledger.mark_incidents_announced({k: f"{EVENT_MARK}{v}" for k, v in event_ids.items()})


def touch_resolved(ledger: Ledger, fingerprint: str, at: datetime) -> int | None:
    """A resolved alert for an open incident: move last_seen forward, change nothing else. Returns its id or None."""
    return ledger.touch_incident(fingerprint, at, alert_cleared=True)
