"""The SQLite engine's write path: one process's writers queue on a lock of their own, not in SQLite's busy handler."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import text

from remedy.ledger.engine import make_engine, read_transaction, write_transaction


def _table(engine) -> None:
    with write_transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))


def test_a_second_writer_in_the_process_waits_its_turn_instead_of_failing_busy(tmp_path: Path) -> None:
    """The busy timeout is far shorter than the first writer's transaction: without the process's writer lock the
    second writer's BEGIN IMMEDIATE would give up with "database is locked" after 50 ms."""
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}", busy_timeout_seconds=0.05)
    _table(engine)
    held, done = threading.Event(), []

    def first() -> None:
        with write_transaction(engine) as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
            held.set()
            time.sleep(0.4)

    def second() -> None:
        try:
            with write_transaction(engine) as conn:
                conn.execute(text("INSERT INTO t VALUES (2)"))
            done.append("ok")
        except Exception as exc:  # asserted on below
            done.append(exc)

    a = threading.Thread(target=first)
    a.start()
    assert held.wait(5)
    started = time.monotonic()
    b = threading.Thread(target=second)
    b.start()
    a.join(5)
    b.join(5)
    assert done == ["ok"], done
    assert time.monotonic() - started >= 0.3  # it waited for the first writer's commit
    with read_transaction(engine) as conn:
        assert sorted(conn.execute(text("SELECT x FROM t")).scalars()) == [1, 2]
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
