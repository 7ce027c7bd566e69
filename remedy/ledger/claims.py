"""Capped claims: a global limit counted and claimed in one ledger transaction, so it holds across processes.

The intake quarantine cap (`receiver.quarantine.max_nodes`) was counted per receiver process: two receivers on one
ledger cordoned 7 nodes against a cap of 4 (issue 32). Here the count and the claim are one write transaction
that every writer serialises on: SQLite's `BEGIN IMMEDIATE` (every ledger write takes the database's write lock
first), PostgreSQL's transaction-scoped advisory lock on the cap's name (`pg_advisory_xact_lock`), taken before
the count. A second receiver's claim waits for the first's commit and then counts its row.

What counts as held is the caller's query (`held`), run inside the same transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, exists, func, select, text

from remedy.domain.model import Action, ActionOutcome, IncidentStatus
from remedy.ledger import schema
from remedy.ledger.convert import action_record
from remedy.ledger.records import ActionRecord


def _lock_key(name: str) -> int:
    digest = hashlib.sha256(f"remedy-cap|{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(frozen=True)
class CapClaim:
    action: ActionRecord | None  # the claim's row (new, or this key's earlier one); None: refused at the cap
    held: int  # claims held when this one was judged (this one not included)
    new: bool  # this call wrote the row


def claim_within_cap(ledger, action: Action, *, cap_name: str, limit: int,
                     held: Callable[[Connection], int]) -> CapClaim:
    """Write `action` (it must carry an idempotency key) only if fewer than `limit` claims are held, counted by
    `held(conn)` in the same transaction. A key already written returns its row (never a second claim)."""
    if not action.idempotency_key:
        raise ValueError("a capped claim needs an idempotency key (one claim per thing claimed)")
    a = schema.actions.c
    with ledger._write() as conn:  # noqa: SLF001 - the ledger's own write transaction (BEGIN IMMEDIATE on SQLite)
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(cap_name)})
        row = conn.execute(select(schema.actions).where(a.idempotency_key == action.idempotency_key)).first()
        if row is not None:
            return CapClaim(action_record(row), -1, False)
        count = held(conn)
        if count >= limit:
            return CapClaim(None, count, False)
        new_id = conn.execute(schema.actions.insert().values(
            kind=action.kind, node=action.node, incident_id=action.incident_id,
            requested_by=action.requested_by or "", dry_run=bool(action.dry_run), started_at=action.started_at,
            finished_at=None, outcome=ActionOutcome(action.outcome).value, error=action.error or "",
            detail=action.detail, idempotency_key=action.idempotency_key)).inserted_primary_key[0]
        row = conn.execute(select(schema.actions).where(a.id == new_id)).first()
        return CapClaim(action_record(row), count, True)


def held_intake_quarantines(kind: str, released_kind: str, since: datetime) -> Callable[[Connection], int]:
    """Intake quarantines no remediation has taken over: `kind` claims (running or succeeded) since `since` whose
    incident is still open or acting, with no flow cordon of the same incident, no uncordon of it (triage's
    release) and no `released_kind` mark (a receiver saw the node uncordoned by hand or taken over)."""
    a = schema.actions.alias("claim")
    b = schema.actions.alias("later")
    i = schema.incidents.c
    open_statuses = (IncidentStatus.OPEN.value, IncidentStatus.ACTING.value)
    taken_over = exists().where(and_(
        b.c.incident_id == a.c.incident_id,
        b.c.kind.in_(("cordon_node", "uncordon_node", released_kind)),
        b.c.outcome.in_((ActionOutcome.SUCCEEDED.value, ActionOutcome.RUNNING.value))))
    q = (select(func.count()).select_from(a.join(schema.incidents, i.id == a.c.incident_id))
         .where(a.c.kind == kind,
                a.c.outcome.in_((ActionOutcome.RUNNING.value, ActionOutcome.SUCCEEDED.value)),
                a.c.started_at >= since, i.status.in_(open_statuses), ~taken_over))

    def count(conn: Connection) -> int:
        return int(conn.execute(q).scalar_one())

    return count


__all__ = ["CapClaim", "claim_within_cap", "held_intake_quarantines"]
