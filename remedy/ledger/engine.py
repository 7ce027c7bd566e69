"""Engines and transactions for the ledger on SQLite and PostgreSQL.

SQLite is shared by several processes (the alert receiver and flow runs), so it runs in WAL mode (readers never
wait for the writer) with a busy timeout, and every write transaction starts with BEGIN IMMEDIATE: the write lock
is taken up front, so two writers queue instead of one failing half-way with "database is locked" when it tries
to upgrade a read snapshot. PostgreSQL runs at READ COMMITTED; races there are settled by compare-and-swap
updates, unique keys and advisory locks in the ledger methods.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import StaticPool

from remedy.domain.durations import human_duration

_WRITE = "ledger_write"  # execution option that marks a write transaction


# Per SQLite engine: the lock this process's writers queue on, and how long one waits for it (write_transaction).
_WRITERS: WeakKeyDictionary[Engine, tuple[threading.RLock, float]] = WeakKeyDictionary()


def make_engine(url: str, *, echo: bool = False, busy_timeout_seconds: float = 30.0) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(f"not a database URL: {url!r} (expected sqlite:///path or postgresql+psycopg://...)") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, parsed.database, echo=echo, busy_timeout_seconds=busy_timeout_seconds)
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            parsed = parsed.set(drivername="postgresql+psycopg")  # the one PostgreSQL driver we ship
        # A process frozen inside a transaction (a VM paused mid lease renewal) keeps its row locks, and the
        # takeover that claims the lease would wait on them for ever: the server ends such a session after the
        # busy timeout, and a writer waits for a lock at most twice that, then fails with "lock timeout".
        ms = int(busy_timeout_seconds * 1000)
        options = f"-c idle_in_transaction_session_timeout={ms} -c lock_timeout={2 * ms}"
        return create_engine(parsed, echo=echo, pool_pre_ping=True, future=True,
                             connect_args={"options": options})
    raise ValueError(f"unsupported ledger database {backend!r} in {url!r}: use sqlite:///path or postgresql+psycopg://")


def _sqlite_engine(url: str, database: str | None, *, echo: bool, busy_timeout_seconds: float) -> Engine:
    in_memory = not database or database == ":memory:"
    if database and not in_memory and not database.startswith("file:"):
        from remedy.domain.filemodes import private_sqlite_file

        private_sqlite_file(database)  # the ledger is created 0600, whoever embeds us (umask or not)
    kwargs: dict[str, Any] = {"connect_args": {"timeout": busy_timeout_seconds, "check_same_thread": False}}
    if in_memory:
        # One shared connection, or every checkout would see a different empty database. Single-threaded use only
        # (the policy simulator); anything concurrent should use a file.
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, echo=echo, future=True, **kwargs)
    _WRITERS[engine] = (threading.RLock(), busy_timeout_seconds)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        if not in_memory:
            _wal(cur, busy_timeout_seconds)
            cur.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints; WAL makes this crash-safe
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_seconds * 1000)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


def _wal(cur, timeout_seconds: float) -> None:
    """Switch the file to WAL, retrying while another process holds it: a switch that meets another connection's
    switch or migration can get "database is locked" at once instead of waiting in the busy handler (seen with
    two processes and two threads migrating one new ledger at once, tests/ledger/test_history_schema.py)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction: committed on success, rolled back on any exception (nothing partial).

    On a SQLite file, this process's writers also queue on one lock first. SQLite serialises writers anyway, but a
    writer that finds the file locked waits in SQLite's busy handler, which sleeps in steps of up to 100 ms and is
    not first come, first served: the alert storm's writers (the intake's threads and the announcer) starved each
    other there, up to a second (docs/scale.md)."""
    with _process_writer(engine):
        with engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn


@contextmanager
def _process_writer(engine: Engine) -> Iterator[None]:
    """This process's turn to write a SQLite file, waited for as long as SQLite's own busy timeout: a writer stuck
    behind a held lock fails as SQLite would ("database is locked"), it never hangs."""
    held = _WRITERS.get(engine)
    if held is None:  # PostgreSQL: its own row locks and advisory locks order the writers
        yield
        return
    lock, timeout = held
    if not lock.acquire(timeout=timeout):
        raise OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError(
            f"database is locked: another writer in this process held the ledger for over {human_duration(timeout)}"))
    try:
        yield
    finally:
        lock.release()


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        with conn.begin():
            yield conn
