"""The fleet ledger: the durable record of every GPU node's life, on SQLite or PostgreSQL.

Flows, the alert receiver and the policy simulator write here as they act, so the ledger doubles as the audit
trail (`history`). Every write is one transaction; records come back as frozen dataclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from remedy.errors import NodeNotFound
from remedy.ledger import schema
from remedy.ledger.actions import ActionsMixin
from remedy.ledger.convert import action_record, transition_record, validation_record
from remedy.ledger.engine import make_engine
from remedy.ledger.errors import LedgerNotMigrated
from remedy.ledger.incidents import IncidentsMixin
from remedy.ledger.leases import LeasesMixin
from remedy.ledger.nodes import NodesMixin
from remedy.ledger.records import ActionRecord, HistoryEntry, TransitionRecord, ValidationRecord

# Same timestamp: show the action, then the state change it caused, then any validation.
_KIND_ORDER = {"action": 0, "transition": 1, "validation": 2}


class Ledger(NodesMixin, IncidentsMixin, LeasesMixin, ActionsMixin):
    def __init__(self, url: str, *, echo: bool = False, busy_timeout_seconds: float = 30.0,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.url = url
        self.engine = make_engine(url, echo=echo, busy_timeout_seconds=busy_timeout_seconds)
        if clock is not None:  # a test's clock (LedgerBase.clock)
            self.clock = clock

    @classmethod
    def from_settings(cls, settings: Any, **kwargs: Any) -> Ledger:
        return cls(settings.db_url, **kwargs)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self.engine.url.render_as_string(hide_password=True)!r})"

    # --- schema --------------------------------------------------------------------------------------------
    # alembic is imported only here: it costs ~0.5 s, and most processes open an already-migrated ledger.
    def migrate(self) -> None:
        """Bring the schema to the latest revision (alembic upgrade head); a no-op when it is there already."""
        from remedy.ledger.migrate import upgrade

        upgrade(self.engine)

    def schema_revision(self) -> str | None:
        from remedy.ledger.migrate import current_revision

        return current_revision(self.engine)

    def require_migrated(self) -> None:
        """Raise LedgerNotMigrated (one line, says what to run) unless the schema is at the latest revision."""
        from remedy.ledger.migrate import head_revision

        current, head = self.schema_revision(), head_revision()
        if current != head:
            where = self.engine.url.render_as_string(hide_password=True)
            raise LedgerNotMigrated(
                f"ledger {where} is at schema revision {current or 'none'}, expected {head}: "
                "run `remedy ledger migrate`"
            )

    # --- audit trail ---------------------------------------------------------------------------------------
    def history(self, node: str) -> list[HistoryEntry]:
        """Transitions, actions and validations of one node, oldest first. NodeNotFound if nothing is known."""
        t, a, v = schema.transitions.c, schema.actions.c, schema.validations.c
        with self._read() as conn:
            known = conn.execute(select(schema.nodes.c.name).where(schema.nodes.c.name == node)).first()
            entries = [_transition_entry(transition_record(r))
                       for r in conn.execute(select(schema.transitions).where(t.node == node))]
            entries += [_action_entry(action_record(r)) for r in conn.execute(select(schema.actions).where(a.node == node))]
            entries += [_validation_entry(validation_record(r))
                        for r in conn.execute(select(schema.validations).where(v.node == node))]
        if known is None and not entries:
            raise NodeNotFound(node)
        entries.sort(key=lambda e: (e.at, _KIND_ORDER[e.kind], e.record.id))
        return entries


def _transition_entry(r: TransitionRecord) -> HistoryEntry:
    src = r.from_state.value if r.from_state else "unmanaged"
    key = f" [key {r.idempotency_key}]" if r.idempotency_key else ""
    return HistoryEntry(r.at, "transition", f"{src} → {r.to_state.value}: {r.reason}{key}", r.requested_by, r)


def _action_entry(r: ActionRecord) -> HistoryEntry:
    parts = [r.kind, r.outcome.value]
    if r.dry_run:
        parts.append("(dry-run)")
    if r.incident_id is not None:
        parts.append(f"incident {r.incident_id}")
    text = " ".join(parts) + (f": {r.error}" if r.error else "")
    return HistoryEntry(r.started_at, "action", text, r.requested_by, r)


def _validation_entry(r: ValidationRecord) -> HistoryEntry:
    verdict = "passed" if r.passed else "failed"
    failed = [k for k, val in r.summary.items() if isinstance(val, dict) and val.get("passed") is False]
    extra = f" ({', '.join(sorted(failed))})" if failed else ""
    return HistoryEntry(r.at, "validation", f"{r.level} validation {verdict}{extra}", r.requested_by, r)
