"""Nodes and the lifecycle: legality, compare-and-swap, idempotent replay, validations."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import event, text

from remedy.domain.model import IllegalTransition, Node, NodeState, Topology
from remedy.errors import NodeNotFound, RemedyError
from remedy.ledger import IdempotentReplay, Ledger, LedgerConflict, UnmanagedNode
from remedy.ledger.engine import write_transaction

from .conftest import race


def test_upsert_records_facts_and_leaves_state_alone(ledger: Ledger, add_node) -> None:
    add_node("gpu-001", NodeState.SPARE)
    ledger.upsert_node(Node("gpu-001", gpu_model="H200", gpu_count=8, topology=Topology(rack="r9", pdu="p2"),
                            state=NodeState.RETIRED, instance_type="p5.48xlarge", provider_id="i-123"))
    rec = ledger.get_node("gpu-001")
    assert (rec.gpu_model, rec.rack, rec.pdu, rec.switch) == ("H200", "r9", "p2", "")
    assert (rec.instance_type, rec.provider_id) == ("p5.48xlarge", "i-123")
    assert rec.state is NodeState.SPARE  # upsert never moves the lifecycle
    assert rec.topology == Topology(zone="", rack="r9", switch="", pdu="p2")
    assert rec.updated_at.tzinfo is not None and rec.updated_at.utcoffset() == timedelta(0)


def test_new_node_starts_unmanaged_and_filters_by_state(ledger: Ledger, add_node) -> None:
    add_node("a", None)
    add_node("b", NodeState.ACTIVE)
    add_node("c", NodeState.SPARE)
    assert ledger.get_node("a").state is None and ledger.get_node("a").state_version == 0
    assert [n.name for n in ledger.nodes()] == ["a", "b", "c"]
    assert [n.name for n in ledger.nodes(NodeState.SPARE)] == ["c"]
    with pytest.raises(ValueError, match="unknown value 'bogus'"):
        ledger.nodes("bogus")


def test_bulk_upsert_is_all_or_nothing(ledger: Ledger, add_node) -> None:
    add_node("gpu-000", NodeState.SPARE)
    fleet = [Node(f"gpu-{i:03d}", gpu_count=8, topology=Topology(rack=f"r{i // 4}")) for i in range(12)]
    assert ledger.upsert_nodes(fleet) == 12
    assert len(ledger.nodes()) == 12 and ledger.get_node("gpu-011").rack == "r2"
    assert ledger.get_node("gpu-000").state is NodeState.SPARE  # state untouched by the sync
    with pytest.raises(ValueError, match="gpu-099: gpu_count must be a non-negative integer"):
        ledger.upsert_nodes([Node("gpu-098"), Node("gpu-099", gpu_count=-8)])
    with pytest.raises(ValueError, match="node gpu-001 appears twice"):
        ledger.upsert_nodes([Node("gpu-001"), Node("gpu-001")])
    assert len(ledger.nodes()) == 12


def test_unknown_node_names_the_node(ledger: Ledger) -> None:
    with pytest.raises(NodeNotFound, match="node not found: gpu-404"):
        ledger.get_node("gpu-404")
    with pytest.raises(NodeNotFound, match="gpu-404"):
        ledger.transition("gpu-404", NodeState.ACTIVE, reason="x", requested_by="t")
    with pytest.raises(NodeNotFound, match="gpu-404"):
        ledger.history("gpu-404")
    with pytest.raises(NodeNotFound, match="gpu-404"):
        ledger.record_validation("gpu-404", level="quick", passed=True, summary={}, requested_by="t")


def test_legal_path_through_the_lifecycle(ledger: Ledger, add_node) -> None:
    add_node("n", None)
    path = [NodeState.BURN_IN, NodeState.SPARE, NodeState.ACTIVE, NodeState.QUARANTINED, NodeState.REPAIR,
            NodeState.BURN_IN, NodeState.ACTIVE]
    for to in path:
        ledger.transition("n", to, reason=f"to {to}", requested_by="flow/abc")
    rec = ledger.get_node("n")
    assert rec.state is NodeState.ACTIVE and rec.state_version == len(path)
    trail = ledger.transitions("n")
    assert [t.to_state for t in trail] == path
    assert [t.from_state for t in trail] == [None, *path[:-1]]


@pytest.mark.parametrize(
    "start,target",
    [(NodeState.ACTIVE, NodeState.BURN_IN), (NodeState.ACTIVE, NodeState.REPAIR),
     (NodeState.REPAIR, NodeState.ACTIVE), (NodeState.RETIRED, NodeState.ACTIVE)],
)
def test_illegal_transition_raises_and_writes_nothing(ledger: Ledger, add_node, start, target) -> None:
    add_node("n", None)
    ledger.transition("n", start, reason="setup", requested_by="t")
    before = ledger.get_node("n")
    with pytest.raises(IllegalTransition, match=f"n: cannot go from {start.value} to {target.value}"):
        ledger.transition("n", target, reason="nope", requested_by="t", idempotency_key="k-illegal")
    after = ledger.get_node("n")
    assert (after.state, after.state_version) == (before.state, before.state_version)
    assert len(ledger.transitions("n")) == 1
    # The key was not consumed by the failed attempt.
    ledger.transition("n", NodeState.QUARANTINED if start is NodeState.ACTIVE else NodeState.BURN_IN,
                      reason="legal", requested_by="t", idempotency_key="k-illegal", by_operator=True)


def test_retired_comes_back_only_by_an_operator(ledger: Ledger, add_node) -> None:
    add_node("lemon", NodeState.RETIRED)
    with pytest.raises(IllegalTransition, match="only an operator"):
        ledger.transition("lemon", NodeState.BURN_IN, reason="auto", requested_by="flow")
    rec = ledger.transition("lemon", NodeState.BURN_IN, reason="RMA returned", requested_by="operator:kim",
                            by_operator=True)
    assert rec.from_state is NodeState.RETIRED and rec.to_state is NodeState.BURN_IN


def test_unmanaged_node_adoption_can_be_refused(ledger: Ledger, add_node) -> None:
    add_node("n", None)
    with pytest.raises(UnmanagedNode, match="n: is unmanaged"):
        ledger.transition("n", NodeState.ACTIVE, reason="x", requested_by="t", allow_unmanaged=False)
    assert isinstance(UnmanagedNode("n", NodeState.ACTIVE), IllegalTransition)
    assert ledger.transitions("n") == []
    rec = ledger.transition("n", NodeState.ACTIVE, reason="adopt", requested_by="t")
    assert rec.from_state is None


def test_bad_input_is_a_one_line_error_and_nothing_written(ledger: Ledger, add_node) -> None:
    add_node("n", NodeState.ACTIVE)
    with pytest.raises(ValueError, match="transition target: unknown value 'broken'"):
        ledger.transition("n", "broken", reason="x", requested_by="t")
    with pytest.raises(ValueError, match="reason must be a non-empty string"):
        ledger.transition("n", NodeState.SPARE, reason="  ", requested_by="t")
    with pytest.raises(ValueError, match="naive datetime|timezone-aware"):
        ledger.transition("n", NodeState.SPARE, reason="x", requested_by="t", at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="gpu_count must be a non-negative integer"):
        ledger.upsert_node(Node("m", gpu_count=-1))
    with pytest.raises(ValueError, match="node name must be a non-empty string"):
        ledger.upsert_node(Node(""))
    assert ledger.get_node("n").state is NodeState.ACTIVE and len(ledger.transitions("n")) == 1
    assert [n.name for n in ledger.nodes()] == ["n"]


def test_same_state_is_recorded_without_bumping_the_version(ledger: Ledger, add_node) -> None:
    add_node("n", NodeState.ACTIVE)
    v = ledger.get_node("n").state_version
    rec = ledger.transition("n", NodeState.ACTIVE, reason="re-asserted", requested_by="t")
    assert rec.from_state is rec.to_state is NodeState.ACTIVE
    assert ledger.get_node("n").state_version == v


def test_idempotent_replay_returns_the_original(ledger: Ledger, add_node) -> None:
    add_node("n", NodeState.ACTIVE)
    first = ledger.transition("n", NodeState.QUARANTINED, reason="xid 79", requested_by="run-1",
                              idempotency_key="run-1/quarantine")
    again = ledger.transition("n", NodeState.QUARANTINED, reason="retry", requested_by="run-1",
                              idempotency_key="run-1/quarantine")
    assert again == first and again.reason == "xid 79"
    assert len(ledger.transitions("n")) == 2  # setup + one quarantine
    # A replay is answered even after the node moved on (the original request did happen).
    ledger.transition("n", NodeState.REPAIR, reason="rma", requested_by="run-1")
    assert ledger.transition("n", NodeState.QUARANTINED, reason="late retry", requested_by="run-1",
                             idempotency_key="run-1/quarantine") == first
    with pytest.raises(IdempotentReplay, match="already used for n → quarantined"):
        ledger.transition("n", NodeState.BURN_IN, reason="other", requested_by="x", idempotency_key="run-1/quarantine")
    assert isinstance(IdempotentReplay("k", "a", "b"), RemedyError)


def test_expected_from_mismatch_names_node_expected_and_actual(ledger: Ledger, add_node) -> None:
    add_node("n", NodeState.SPARE)
    with pytest.raises(LedgerConflict, match="n: expected state active but it is spare"):
        ledger.transition("n", NodeState.QUARANTINED, reason="x", requested_by="t", expected_from=NodeState.ACTIVE)
    assert ledger.get_node("n").state is NodeState.SPARE


def test_two_writers_racing_exactly_one_wins(ledger: Ledger, add_node) -> None:
    for round_ in range(3):
        node = add_node(f"race-{round_}", NodeState.ACTIVE)
        targets = [NodeState.QUARANTINED, NodeState.SPARE]
        results = race(2, lambda i, node=node, targets=targets: ledger.transition(node, targets[i], reason=f"writer {i}",
                                                      requested_by=f"w{i}", expected_from=NodeState.ACTIVE))
        wins = [r for r in results if not isinstance(r, Exception)]
        losses = [r for r in results if isinstance(r, LedgerConflict)]
        assert len(wins) == 1 and len(losses) == 1, results
        assert "expected state active" in str(losses[0]) and node in str(losses[0])
        assert ledger.get_node(node).state is wins[0].to_state
        assert len(ledger.transitions(node)) == 2


def test_same_key_racing_writers_get_the_same_record(ledger: Ledger, add_node) -> None:
    node = add_node("n", NodeState.ACTIVE)
    results = race(4, lambda i: ledger.transition(node, NodeState.QUARANTINED, reason=f"writer {i}",
                                                  requested_by=f"w{i}", idempotency_key="incident-7/quarantine"))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert len({r.id for r in results}) == 1
    assert len(ledger.transitions(node)) == 2


def _hold_write_lock(ledger: Ledger, node: str, to: NodeState, release: threading.Event, held: threading.Event):
    """Another writer: changes the node in an open transaction and commits only when told to."""
    with write_transaction(ledger.engine) as conn:
        conn.execute(text("UPDATE nodes SET state = :s, state_version = state_version + 1 WHERE name = :n"),
                     {"s": to.value, "n": node})
        held.set()
        release.wait(10)


def _wait_blocked(ledger: Ledger) -> None:
    """Until some session waits on a lock (PostgreSQL); SQLite has no view of waiters, so give it a moment."""
    if ledger.engine.dialect.name != "postgresql":
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 10
    with ledger.engine.connect() as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"))
            if waiting.scalar():
                return
            conn.rollback()
            time.sleep(0.01)
    raise AssertionError("the second writer never blocked on the first")


@pytest.mark.parametrize("expected", [NodeState.ACTIVE, None])
def test_writer_blocked_behind_a_commit_sees_the_new_state(ledger: Ledger, add_node, expected) -> None:
    """The compare-and-swap path: we read active, someone commits quarantined while we wait to write."""
    node = add_node("n", NodeState.ACTIVE)
    swaps: list[int] = []  # rowcounts of our compare-and-swap UPDATEs, seen through SQLAlchemy's event hook

    def seen(conn, cursor, statement, params, context, executemany) -> None:
        if statement.lstrip().upper().startswith("UPDATE NODES") and "state_version =" in statement:
            swaps.append(cursor.rowcount)

    release, held = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_write_lock, args=(ledger, node, NodeState.QUARANTINED, release, held))
    other.start()
    assert held.wait(10)
    event.listen(ledger.engine, "after_cursor_execute", seen)  # after the other writer's own UPDATE
    out: list[object] = []

    def ours() -> None:
        try:
            out.append(ledger.transition(node, NodeState.RETIRED, reason="lemon", requested_by="t",
                                         expected_from=expected))
        except Exception as exc:
            out.append(exc)

    mine = threading.Thread(target=ours)
    mine.start()
    _wait_blocked(ledger)
    release.set()
    other.join(10)
    mine.join(10)
    event.remove(ledger.engine, "after_cursor_execute", seen)
    if ledger.engine.dialect.name == "postgresql":
        # Both read "active"; our UPDATE waited on the other's row lock, then matched nothing and was retried.
        assert swaps[0] == 0, swaps
    else:
        # SQLite: BEGIN IMMEDIATE queued us behind the other writer, so we read its committed state first.
        assert 0 not in swaps, swaps
    if expected is not None:
        assert isinstance(out[0], LedgerConflict) and "but it is quarantined" in str(out[0])
        assert ledger.get_node(node).state is NodeState.QUARANTINED
    else:  # no expectation: re-read and apply to the new state, recording where it really came from
        assert out[0].from_state is NodeState.QUARANTINED, out
        assert ledger.get_node(node).state is NodeState.RETIRED


def test_validation_pass_stamps_the_node_and_failure_does_not(ledger: Ledger, add_node) -> None:
    node = add_node("n", NodeState.BURN_IN)
    at = datetime(2026, 11, 1, 12, 0, tzinfo=timezone(timedelta(hours=9)))  # any zone in, UTC out
    ok = ledger.record_validation(node, level="standard", passed=True, requested_by="burn-in/1", at=at,
                                  summary={"dcgm": {"passed": True}, "nccl_busbw_gbps": 182.4})
    assert ok.at == at and ok.at.tzinfo == UTC and ok.summary["nccl_busbw_gbps"] == 182.4
    rec = ledger.get_node(node)
    assert (rec.validated_at, rec.validation_level) == (at, "standard")
    ledger.record_validation(node, level="extended", passed=False, summary={"dcgm": {"passed": False}},
                             requested_by="burn-in/2")
    rec = ledger.get_node(node)
    assert (rec.validated_at, rec.validation_level) == (at, "standard")
    assert [v.passed for v in ledger.validations(node)] == [True, False]
    with pytest.raises(ValueError, match="validation level: unknown value 'deep'"):
        ledger.record_validation(node, level="deep", passed=True, summary={}, requested_by="t")
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        ledger.record_validation(node, level="quick", passed=True, summary={"x": object()}, requested_by="t")
    assert len(ledger.validations(node)) == 2
