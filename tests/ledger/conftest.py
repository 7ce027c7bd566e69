"""Every ledger test runs twice: on a fresh SQLite file and on a real PostgreSQL 15.

PostgreSQL: one migrated database for the whole session, emptied (TRUNCATE ... RESTART IDENTITY) before each test;
CREATE DATABASE costs ~0.2 s here under load, TRUNCATE a few ms. Tests of the schema itself use
`fresh_postgres_url` (an empty database of their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import text

from remedy.domain.model import Node, NodeState, Topology
from remedy.ledger import Ledger, schema


@pytest.fixture(scope="session")
def _pg_ledger_url(postgres_server) -> Iterator[str]:
    # a name of its own: modules that import this fixture get their own session-scoped copy of it
    url = postgres_server.create_database()
    led = Ledger(url)
    led.migrate()
    led.close()
    yield url
    postgres_server.drop_database(url.rsplit("/", 1)[1])


def _empty(led: Ledger) -> None:
    # the ledger's identity is written once, by its migration: emptying the ledger's records keeps it
    names = ", ".join(t.name for t in schema.metadata.sorted_tables if t is not schema.ledger_identity)
    with led.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A migrated, empty ledger database on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        with Ledger(url) as led:
            led.migrate()
        return url
    url = request.getfixturevalue("_pg_ledger_url")
    with Ledger(url) as led:
        _empty(led)
    return url


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    with Ledger(db_url) as led:
        yield led


@pytest.fixture
def add_node(ledger: Ledger) -> Callable[..., str]:
    """Upsert a node and (optionally) put it in a state through the ledger itself."""

    def add(name: str = "gpu-001", state: NodeState | None = NodeState.ACTIVE, *, rack: str = "r1") -> str:
        ledger.upsert_node(Node(name, gpu_model="H100", gpu_count=8,
                                topology=Topology(zone="z1", rack=rack, switch="sw1", pdu="pdu1")))
        if state is not None:
            ledger.transition(name, state, reason="test setup", requested_by="test")
        return name

    return add


def race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run fn(0..n-1) in n threads released together by a barrier; return results or raised exceptions."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:  # collected and asserted on by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a racing writer hung"
    return results
