"""The gate's lock on PostgreSQL (remedy/safety/lock.py) is a session advisory lock. The ledger engine ends a
session left idle inside a transaction after the busy timeout (remedy/ledger/engine.py, for frozen processes), so
the lock's own session must not sit in a transaction while the gate works, or a slow gate would lose its lock."""

from __future__ import annotations

import time

from sqlalchemy import text

from remedy.ledger.engine import make_engine
from remedy.safety.lock import ADVISORY_KEY, ledger_lock


def _free_for_another_session(engine) -> bool:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        got = bool(conn.execute(text(f"SELECT pg_try_advisory_lock({ADVISORY_KEY})")).scalar_one())
        if got:
            conn.execute(text(f"SELECT pg_advisory_unlock({ADVISORY_KEY})"))
        return got


def test_a_gate_slower_than_the_busy_timeout_keeps_its_lock(fresh_postgres_url: str) -> None:
    engine = make_engine(fresh_postgres_url, busy_timeout_seconds=0.5)
    with ledger_lock(fresh_postgres_url, engine):
        time.sleep(1.5)  # three busy timeouts: an idle-in-transaction session would have been ended by now
        assert not _free_for_another_session(engine)
    assert _free_for_another_session(engine)
    engine.dispose()
