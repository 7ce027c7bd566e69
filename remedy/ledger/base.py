"""What every part of the Ledger shares: the engine, transactions and the clock."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, CursorResult, Engine, select, text

from remedy.domain import model
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


def database_now(conn: Connection) -> datetime:
    """The database server's own time, read in the caller's transaction: PostgreSQL's clock_timestamp() (the time
    of this statement, not of the transaction's start: a claim that waited on a row lock judges expiry as of when it
    got it); SQLite's 'now' (the library reads the OS clock of the process, the one host every writer of a SQLite
    file shares). Another dialect: this host's clock."""
    name = conn.dialect.name
    if name == "postgresql":
        value = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    elif name == "sqlite":
        value = datetime.fromisoformat(conn.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")).scalar_one())
    else:
        return model.utcnow()
    if not isinstance(value, datetime):
        raise TypeError(f"the database's clock read back as {type(value).__name__}, not a time: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class LedgerBase:
    engine: Engine
    # A test's (or the simulator's) clock, if one was given: then every time the ledger takes, lease expiry
    # included, is read from it (a crash test moves it past a dead run's lease instead of waiting the lease out).
    _test_clock: Callable[[], datetime] | None = None
    # Without one, records are stamped with this host's wall clock, but every lease time (a lease's start, renewal
    # and expiry; whether a holder is gone; the fence's "has my lease run out?") is the database server's: runs on
    # different hosts judge each other's leases on one clock, so a host whose clock runs ahead cannot take over a
    # live run early, nor one running behind keep writing on a lease that has run out. `lease_offset` shifts the
    # database's time for this Ledger object only: how a test moves past a lease without waiting it out while the
    # database's clock is still the one read.
    lease_offset: timedelta = timedelta(0)

    @property
    def clock(self) -> Callable[[], datetime]:
        """What "now" is for a write not given `at`: a test's clock, else this host's wall clock."""
        return self._test_clock or model.utcnow

    @clock.setter
    def clock(self, fn: Callable[[], datetime]) -> None:
        self._test_clock = fn

    def _write(self) -> AbstractContextManager[Connection]:
        return write_transaction(self.engine)

    def _read(self) -> AbstractContextManager[Connection]:
        return read_transaction(self.engine)

    def _now(self, at: datetime | None, what: str = "at") -> datetime:
        """`at` lets the policy simulator replay history on its own clock; live callers leave it None (the ledger's
        clock)."""
        return require_aware(at, what) or self.clock()

    def _lease_now(self, conn: Connection, at: datetime | None = None) -> datetime:
        """"Now" for lease times, inside the transaction that uses it: `at` if given (the simulator, a test), a
        test's clock if the ledger has one, else the database server's clock (+ `lease_offset`)."""
        if at is not None:
            return require_aware(at, "at")
        if self._test_clock is not None:
            return self._test_clock()
        return database_now(conn) + self.lease_offset

    @staticmethod
    def _node_row(conn: Connection, name: str):
        row = conn.execute(select(schema.nodes).where(schema.nodes.c.name == name)).first()
        if row is None:
            raise NodeNotFound(name)
        return row

    def _fenced(self, conn: Connection, incident_id: int | None, fence: Fence | None, at: datetime | None) -> None:
        """Inside the write's own transaction: may `fence.run` still act on the incident? Raises LeaseLost if the
        incident is held by a run outside the fence (taken over, re-announced for a new run) or the writer's lease
        has expired or ended (it stalled past it), judged on the lease clock (`_lease_now`: `at` if the caller gave one). The incident row is locked first (PostgreSQL: FOR UPDATE; SQLite:
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
        now = self._lease_now(conn, at)  # the database's clock, as the lease itself was written
        if lease is not None and (lease.ended_at is not None or lease.expires_at <= now):
            why = "ended" if lease.ended_at is not None else f"expired {lease.expires_at:%H:%M:%S} UTC"
            raise LeaseLost(f"run {fence.run}: its lease has {why}, so incident {incident_id} may be another run's: "
                            "it stops here")
