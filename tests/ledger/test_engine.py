"""The SQLite engine's write path: one process's writers queue on a lock of their own, not in SQLite's busy handler."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from remedy.ledger.engine import make_engine, read_transaction, write_transaction


def _table(engine) -> None:
    with write_transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))


def _hold_then_write(engine, hold_seconds: float) -> tuple[list, list[float]]:
    """A first writer holds its transaction `hold_seconds`; a second one writes meanwhile. Returns the second's
    outcome and how long its BEGIN IMMEDIATE statement took (time spent in SQLite's busy handler)."""
    held, done, begins = threading.Event(), [], []

    def timed(conn, cursor, statement, params, context, executemany) -> None:
        if statement == "BEGIN IMMEDIATE" and threading.current_thread().name == "second":
            conn.info["begin_at"] = time.perf_counter()

    def timed_after(conn, cursor, statement, params, context, executemany) -> None:
        if statement == "BEGIN IMMEDIATE" and threading.current_thread().name == "second":
            begins.append(time.perf_counter() - conn.info.pop("begin_at"))

    event.listen(engine, "before_cursor_execute", timed)
    event.listen(engine, "after_cursor_execute", timed_after)

    def first() -> None:
        with write_transaction(engine) as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
            held.set()
            time.sleep(hold_seconds)

    def second() -> None:
        try:
            with write_transaction(engine) as conn:
                conn.execute(text("INSERT INTO t VALUES (2)"))
            done.append("ok")
        except Exception as exc:  # asserted on by the callers
            done.append(exc)

    a = threading.Thread(target=first)
    a.start()
    assert held.wait(5)
    b = threading.Thread(target=second, name="second")
    b.start()
    a.join(10)
    b.join(10)
    event.remove(engine, "before_cursor_execute", timed)
    event.remove(engine, "after_cursor_execute", timed_after)
    return done, begins


def test_a_second_writer_in_the_process_queues_on_the_lock_not_in_sqlites_busy_handler(tmp_path: Path) -> None:
    """Without the process's writer lock the second writer's BEGIN IMMEDIATE would sit in SQLite's busy handler for
    the whole 0.5 s the first holds the file; with it, BEGIN runs once the first has committed."""
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}", busy_timeout_seconds=5)
    _table(engine)
    done, begins = _hold_then_write(engine, 0.5)
    assert done == ["ok"], done
    assert len(begins) == 1 and begins[0] < 0.25, begins
    with read_transaction(engine) as conn:
        assert sorted(conn.execute(text("SELECT x FROM t")).scalars()) == [1, 2]
    engine.dispose()


def test_a_writer_that_waits_longer_than_the_busy_timeout_fails_as_sqlite_would(tmp_path: Path) -> None:
    """The wait for the lock is bounded like SQLite's own: one "database is locked" error, nothing written."""
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}", busy_timeout_seconds=0.1)
    _table(engine)
    done, begins = _hold_then_write(engine, 0.5)
    assert len(done) == 1 and isinstance(done[0], OperationalError), done
    assert "database is locked" in str(done[0]) and begins == []
    with read_transaction(engine) as conn:
        assert list(conn.execute(text("SELECT x FROM t")).scalars()) == [1]
    engine.dispose()


def test_reads_do_not_wait_for_the_writer_lock(tmp_path: Path) -> None:
    """WAL: a reader sees the last commit while a writer holds its transaction open."""
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}")
    _table(engine)
    with write_transaction(engine) as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    held, release, seen = threading.Event(), threading.Event(), []

    def writer() -> None:
        with write_transaction(engine) as conn:
            conn.execute(text("INSERT INTO t VALUES (2)"))
            held.set()
            release.wait(5)

    w = threading.Thread(target=writer)
    w.start()
    assert held.wait(5)
    def read() -> None:
        with read_transaction(engine) as conn:
            seen.extend(conn.execute(text("SELECT x FROM t")).scalars())

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(2)
    finished = not reader.is_alive()
    release.set()
    w.join(5)
    assert finished and seen == [1]
    engine.dispose()


def test_a_writer_may_nest_a_write_in_its_own_thread(tmp_path: Path) -> None:
    """The lock is re-entrant: a write path that calls another write path in the same thread does not hang."""
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}", busy_timeout_seconds=0.05)
    _table(engine)
    out = []

    def nested() -> None:
        try:
            with write_transaction(engine) as conn:
                conn.execute(text("INSERT INTO t VALUES (1)"))
            with write_transaction(engine):
                with write_transaction(engine) as inner:  # SQLite refuses the inner BEGIN: it fails, it does not hang
                    inner.execute(text("INSERT INTO t VALUES (2)"))
        except Exception as exc:
            out.append(type(exc).__name__)
        else:
            out.append("ok")

    t = threading.Thread(target=nested)
    t.start()
    t.join(5)
    assert not t.is_alive(), "a nested write in the same thread deadlocked on the writer lock"
    assert out == ["OperationalError"], out  # SQLite's "database is locked", after its busy timeout
    engine.dispose()


def test_a_session_frozen_inside_a_transaction_does_not_hold_its_row_lock_for_ever(fresh_postgres_url: str) -> None:
    """A process stopped mid-transaction on PostgreSQL (seen in the SIGSTOP takeover tests: frozen while renewing
    its lease) kept the row locked, and the takeover's claim waited on it for ever. The server now ends an idle
    transaction after the busy timeout, so the second writer gets the row."""
    engine = make_engine(fresh_postgres_url, busy_timeout_seconds=1.0)
    with write_transaction(engine) as conn:
        conn.execute(text("CREATE TABLE lease (id int PRIMARY KEY, holder text)"))
        conn.execute(text("INSERT INTO lease VALUES (1, 'a')"))
    frozen = engine.connect()
    frozen.begin()
    frozen.execute(text("UPDATE lease SET holder = 'frozen' WHERE id = 1"))  # holds the row, then does nothing
    start = time.monotonic()
    with write_transaction(engine) as conn:
        conn.execute(text("SET LOCAL lock_timeout = '15s'"))  # without the fix: fails here, not hangs
        conn.execute(text("UPDATE lease SET holder = 'takeover' WHERE id = 1"))
    assert time.monotonic() - start < 10
    with read_transaction(engine) as conn:
        assert conn.execute(text("SELECT holder FROM lease")).scalar_one() == "takeover"
    frozen.invalidate()
    engine.dispose()
