"""The audit trail, the schema and its migrations, time zones, several processes sharing one database."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from remedy.config import load_settings
from remedy.domain.model import Action, ActionOutcome, Incident, Node, NodeState
from remedy.errors import NodeNotFound
from remedy.ledger import Ledger, LedgerNotMigrated, schema
from remedy.ledger.migrate import head_revision

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TABLES = {"nodes", "transitions", "incidents", "actions", "validations", "breaker_events", "approvals"}


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    return request.getfixturevalue("fresh_postgres_url")


def test_history_merges_three_kinds_in_time_order(ledger: Ledger) -> None:
    ledger.upsert_node(Node("gpu-001", gpu_count=8))
    # Written out of time order on purpose: history sorts by when things happened, not by insertion.
    ledger.record_validation("gpu-001", level="extended", passed=False, requested_by="burn-in/2",
                             summary={"dcgm_diag": {"passed": False}, "nccl": {"passed": True}},
                             at=T0 + timedelta(minutes=10))
    ledger.transition("gpu-001", NodeState.BURN_IN, reason="new node", requested_by="burn-in/1", at=T0)
    act, _ = ledger.start_action(Action(kind="cordon_node", node="gpu-001", requested_by="replace/7",
                                        started_at=T0 + timedelta(minutes=5)))
    ledger.finish_action(act.id, ActionOutcome.FAILED, error="API 503", at=T0 + timedelta(minutes=6))
    same = T0 + timedelta(minutes=20)  # an action and the transition it caused, stamped alike
    ledger.transition("gpu-001", NodeState.QUARANTINED, reason="validation failed", requested_by="burn-in/2",
                      at=same, idempotency_key="bi-2/q")
    ledger.start_action(Action(kind="taint_node", node="gpu-001", requested_by="burn-in/2", started_at=same,
                               dry_run=True, outcome=ActionOutcome.PLANNED))
    trail = ledger.history("gpu-001")
    assert [(e.at - T0, e.kind) for e in trail] == [
        (timedelta(0), "transition"), (timedelta(minutes=5), "action"), (timedelta(minutes=10), "validation"),
        (timedelta(minutes=20), "action"), (timedelta(minutes=20), "transition"),
    ]
    assert [e.summary for e in trail] == [
        "unmanaged → burn-in: new node",
        "cordon_node failed: API 503",
        "extended validation failed (dcgm_diag)",
        "taint_node planned (dry-run)",
        "burn-in → quarantined: validation failed [key bi-2/q]",
    ]
    assert [e.by for e in trail][:2] == ["burn-in/1", "replace/7"]
    assert trail[1].as_dict()["at"] == "2026-11-20T08:05:00+00:00"


def test_history_of_a_node_known_only_from_actions(ledger: Ledger) -> None:
    ledger.start_action(Action(kind="reboot_node", node="ghost-1", requested_by="op:kim", started_at=T0))
    assert [e.kind for e in ledger.history("ghost-1")] == ["action"]
    with pytest.raises(NodeNotFound, match="node not found: ghost-2"):
        ledger.history("ghost-2")


def test_migrate_twice_is_a_no_op_and_keeps_data(empty_url: str) -> None:
    with Ledger(empty_url) as led:
        with pytest.raises(LedgerNotMigrated, match=f"schema revision none, expected {head_revision()}: run `remedy ledger migrate`"):
            led.require_migrated()
        led.migrate()
        assert led.schema_revision() == head_revision()
        assert TABLES <= set(inspect(led.engine).get_table_names())
        led.upsert_node(Node("gpu-001"))
        led.transition("gpu-001", NodeState.ACTIVE, reason="x", requested_by="t")
        led.migrate()
        led.require_migrated()
        assert led.schema_revision() == head_revision()
        assert led.get_node("gpu-001").state is NodeState.ACTIVE
        assert len(led.transitions("gpu-001")) == 1


def test_migration_creates_exactly_the_schema_the_code_uses(empty_url: str) -> None:
    with Ledger(empty_url) as led:
        led.migrate()
        with led.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True, "version_table": schema.VERSION_TABLE}), schema.metadata)
    assert diff == []


def _migrate_at(url: str, start, errors: list | None = None) -> None:
    with Ledger(url) as led:
        start.wait(30)
        try:
            led.migrate()
        except Exception as exc:  # a thread's failure would otherwise only be printed
            if errors is None:
                raise
            errors.append(exc)


def test_concurrent_migrations_in_processes_and_threads(empty_url: str) -> None:
    """The receiver and a flow run starting together on a new database: both migrate, one creates the tables."""
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_migrate_at, args=(empty_url, start)) for _ in range(2)]
    errors: list[Exception] = []
    threads = [threading.Thread(target=_migrate_at, args=(empty_url, start, errors)) for _ in range(2)]
    for w in (*procs, *threads):
        w.start()
    start.set()
    for p in procs:
        p.join(60)
    for t in threads:
        t.join(60)
    assert [p.exitcode for p in procs] == [0, 0] and errors == [] and not any(t.is_alive() for t in threads)
    with Ledger(empty_url) as led:
        assert led.schema_revision() == head_revision()


def test_times_are_stored_utc_and_returned_aware(ledger: Ledger) -> None:
    tokyo = timezone(timedelta(hours=9))
    at = datetime(2026, 11, 20, 17, 0, 0, 123456, tzinfo=tokyo)
    ledger.upsert_node(Node("gpu-001"))
    rec = ledger.transition("gpu-001", NodeState.ACTIVE, reason="x", requested_by="t", at=at)
    assert rec.at == at and rec.at.tzinfo == UTC and rec.at.hour == 8 and rec.at.microsecond == 123456
    assert ledger.transitions("gpu-001")[0].at == at
    with ledger.engine.connect() as conn:  # what is on disk is UTC wall time
        raw = conn.execute(text("SELECT at FROM transitions")).scalar()
    assert (raw if isinstance(raw, datetime) else datetime.fromisoformat(raw)).hour == 8


def test_from_settings_and_bad_urls(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'from-env.db'}")
    with Ledger.from_settings(load_settings()) as led:
        led.migrate()
    assert (tmp_path / "from-env.db").exists()
    with pytest.raises(ValueError, match="not a database URL"):
        Ledger("not a url")
    with pytest.raises(ValueError, match="unsupported ledger database 'mysql'"):
        Ledger("mysql://u@h/db")


def test_in_memory_sqlite_for_the_policy_simulator() -> None:
    with Ledger("sqlite://") as led:  # one shared connection: the same database on every checkout
        led.migrate()
        led.upsert_node(Node("sim-1"))
        led.transition("sim-1", NodeState.SPARE, reason="sim", requested_by="sim", at=T0)
        assert led.get_node("sim-1").state is NodeState.SPARE
        assert [e.summary for e in led.history("sim-1")] == ["unmanaged → spare: sim"]


def test_sqlite_runs_in_wal_mode(tmp_path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'wal.db'}") as led:
        led.migrate()
        with led.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000


def _worker(url: str, worker: int, rounds: int) -> None:
    """A separate process (the alert receiver, a flow run) writing to the same ledger."""
    with Ledger(url) as led:
        for i in range(rounds):
            led.open_incident(Incident("gpu-001", "xid", gpu=0, xid=79, first_seen=T0, last_seen=T0),
                              window_seconds=600)
            rec, _ = led.start_action(Action(kind="probe_node", node="gpu-001", requested_by=f"p{worker}",
                                             idempotency_key=f"p{worker}/{i}"))
            led.finish_action(rec.id, ActionOutcome.SUCCEEDED)


def test_several_processes_share_one_ledger(db_url: str) -> None:
    procs, rounds = 3, 15
    ctx = multiprocessing.get_context("fork")  # no re-import in the children: ~10 ms to start each
    workers = [ctx.Process(target=_worker, args=(db_url, w, rounds)) for w in range(procs)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0] * procs
    with Ledger(db_url) as led:
        (incident,) = led.incidents()
        assert incident.count == procs * rounds
        done = led.actions(kind="probe_node")
        assert len(done) == procs * rounds and {a.outcome for a in done} == {ActionOutcome.SUCCEEDED}
