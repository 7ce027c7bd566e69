"""The one lock every gate decision (and every spend of shared capacity: spares, preemption) is taken under.

Serialises decisions across threads and processes sharing the ledger: a file lock beside an SQLite ledger, a
PostgreSQL session advisory lock held on one connection otherwise. Plain Python, no Prefect.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_thread_lock = threading.Lock()
ADVISORY_KEY = 727372  # the PostgreSQL advisory lock id of the breaker gate (kept: a running stack shares it)


@contextlib.contextmanager
def ledger_lock(db_url: str, engine: Any) -> Iterator[None]:
    """Hold the gate's lock for the block. `engine`: the ledger's SQLAlchemy engine (used on PostgreSQL only)."""
    with _thread_lock:
        if db_url.startswith("sqlite"):
            path = Path(db_url.split("///", 1)[-1] + ".breaker.lock")
            with open(path, "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
        else:
            from sqlalchemy import text

            # a session lock needs no transaction; outside one, the session is not "idle in transaction" while
            # the gate works, so the ledger engine's idle_in_transaction_session_timeout never ends it (and the
            # lock with it) under a slow gate
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(f"SELECT pg_advisory_lock({ADVISORY_KEY})"))
                try:
                    yield
                finally:
                    conn.execute(text(f"SELECT pg_advisory_unlock({ADVISORY_KEY})"))
