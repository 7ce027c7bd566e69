"""What every part of the Ledger shares: the engine, transactions and the clock."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, CursorResult, Engine, select

from remedy.domain.model import utcnow
from remedy.errors import NodeNotFound
from remedy.ledger import schema
from remedy.ledger.convert import require_aware
from remedy.ledger.engine import read_transaction, write_transaction
from remedy.ledger.errors import LeaseLost, RecordNotFound
from remedy.ledger.records import Fence


def inserted_id(result: CursorResult[Any]) -> int:
    """The id of the row an INSERT just wrote (every ledger table has an integer key)."""
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("the INSERT returned no primary key")
    return int(key[0])


class LedgerBase:
    engine: Engine
    # what "now" is for every write and lease check that is not given `at`: the wall clock, or a test's clock (a
    # crash test moves it past a dead run's lease instead of waiting the lease out)
    clock: Callable[[], datetime] = staticmethod(utcnow)

    def _write(self) -> AbstractContextManager[Connection]:
        return write_transaction(self.engine)

    def _read(self) -> AbstractContextManager[Connection]:
        return read_transaction(self.engine)

    def _now(self, at: datetime | None, what: str = "at") -> datetime:
        """`at` lets the policy simulator replay history on its own clock; live callers leave it None (the ledger's
        clock)."""
        return require_aware(at, what) or self.clock()

    @staticmethod
    def _node_row(conn: Connection, name: str):
        row = conn.execute(select(schema.nodes).where(schema.nodes.c.name == name)).first()
        if row is None:
            raise NodeNotFound(name)
        return row

    @staticmethod
    def _fenced(conn: Connection, incident_id: int | None, fence: Fence | None, now: datetime) -> None:
        """Inside the write's own transaction: may `fence.run` still act on the incident? Raises LeaseLost if the
        incident is held by a run outside the fence (taken over, re-announced for a new run) or the writer's lease
        has expired or ended (it stalled past it). The incident row is locked first (PostgreSQL: FOR UPDATE; SQLite:
        BEGIN IMMEDIATE holds the write lock already), so a concurrent takeover either commits before this check
        (the write is refused) or waits until the write has committed (and then settles what it left running)."""
        if fence is None or incident_id is None:
            return
        i, r = schema.incidents.c, schema.run_leases.c
        row = conn.execute(select(i.flow_run_id, i.status).where(i.id == incident_id).with_for_update()).first()
        if row is None:
            raise RecordNotFound("incident", incident_id)
        holder = row.flow_run_id
        if holder is not None and holder not in fence.holders:
            raise LeaseLost(f"run {fence.run} no longer holds incident {incident_id} ({row.status}, held by {holder} "
                            "now): it stops here")
        lease = conn.execute(select(r.expires_at, r.ended_at).where(r.run_id == fence.run)).first()
        if lease is not None and (lease.ended_at is not None or lease.expires_at <= now):
            why = "ended" if lease.ended_at is not None else f"expired {lease.expires_at:%H:%M:%S} UTC"
            raise LeaseLost(f"run {fence.run}: its lease has {why}, so incident {incident_id} may be another run's: "
                            "it stops here")
