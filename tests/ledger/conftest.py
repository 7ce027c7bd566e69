"""Every ledger test runs twice: on a SQLite file and on a real PostgreSQL 15 (fresh database per test)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from remedy.domain.model import Node, NodeState, Topology
from remedy.ledger import Ledger


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("fresh_postgres_url")


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    led = Ledger(db_url)
    led.migrate()
    try:
        yield led
    finally:
        led.close()


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
