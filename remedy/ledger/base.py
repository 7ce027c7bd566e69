"""What every part of the Ledger shares: the engine, transactions and the clock."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime

from sqlalchemy import Connection, Engine, select

from remedy.domain.model import utcnow
from remedy.errors import NodeNotFound
from remedy.ledger import schema
from remedy.ledger.convert import require_aware
from remedy.ledger.engine import read_transaction, write_transaction


class LedgerBase:
    engine: Engine

    def _write(self) -> AbstractContextManager[Connection]:
        return write_transaction(self.engine)

    def _read(self) -> AbstractContextManager[Connection]:
        return read_transaction(self.engine)

    @staticmethod
    def _now(at: datetime | None, what: str = "at") -> datetime:
        """`at` lets the policy simulator replay history on its own clock; live callers leave it None."""
        return require_aware(at, what) or utcnow()

    @staticmethod
    def _node_row(conn: Connection, name: str):
        row = conn.execute(select(schema.nodes).where(schema.nodes.c.name == name)).first()
        if row is None:
            raise NodeNotFound(name)
        return row
