"""Ledger tables (SQLAlchemy Core). The alembic migrations create exactly this; a test compares the two.

Node names are plain strings in the event tables (no foreign key) where the event may arrive before the node is
known (an alert for a node not yet upserted); transitions and validations need the node row, so they reference it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeDecorator

# Stable constraint names so migrations can refer to them on every backend.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# Kept out of `alembic_version` so the ledger can share a database with other tools.
VERSION_TABLE = "ledger_alembic_version"


class UTCDateTime(TypeDecorator):
    """Aware UTC in, aware UTC out. SQLite keeps no zone, so naive values read back are UTC by construction."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise ValueError(f"expected a datetime, got {type(value).__name__}: {value!r}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: pass a timezone-aware (UTC) datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


nodes = Table(
    "nodes",
    metadata,
    Column("name", String, primary_key=True),
    Column("gpu_model", String, nullable=False, default=""),
    Column("gpu_count", Integer, nullable=False, default=0),
    Column("zone", String, nullable=False, default=""),
    Column("rack", String, nullable=False, default=""),
    Column("switch", String, nullable=False, default=""),
    Column("pdu", String, nullable=False, default=""),
    Column("instance_type", String, nullable=False, default=""),
    Column("provider_id", String, nullable=False, default=""),
    Column("state", String, nullable=True),  # NodeState value; NULL = unmanaged
    Column("state_version", Integer, nullable=False, default=0),
    Column("validated_at", UTCDateTime, nullable=True),
    Column("validation_level", String, nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
    Index(None, "state"),
)

transitions = Table(
    "transitions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node", String, ForeignKey("nodes.name"), nullable=False),
    Column("from_state", String, nullable=True),
    Column("to_state", String, nullable=False),
    Column("reason", Text, nullable=False),
    Column("requested_by", String, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("idempotency_key", String, nullable=True, unique=True),
    Index(None, "node", "at"),
)

incidents = Table(
    "incidents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fingerprint", String, nullable=False),
    Column("node", String, nullable=False),
    Column("gpu", Integer, nullable=True),
    Column("signal", String, nullable=False),
    Column("xid", Integer, nullable=True),
    Column("first_seen", UTCDateTime, nullable=False),
    Column("last_seen", UTCDateTime, nullable=False),
    Column("count", Integer, nullable=False, default=1),
    Column("status", String, nullable=False),
    Column("detail", Text, nullable=False, default=""),
    Column("severity", String, nullable=False),
    Column("flow_run_id", String, nullable=True),
    Column("resolved_at", UTCDateTime, nullable=True),
    Column("rack", String, nullable=False, default=""),
    Column("switch", String, nullable=False, default=""),
    Column("pdu", String, nullable=False, default=""),
    # what was seen: value, unit, duration, raw text, labels (remedy.domain.model.Evidence)
    Column("evidence", JSON, nullable=True),
    Index(None, "fingerprint", "last_seen"),
    Index(None, "node"),
    Index(None, "status"),
)

# One row per occurrence of an alert (Alertmanager fingerprint + startsAt; for log lines node + GPU + fault + kernel
# time): a re-send or re-delivery of the same occurrence finds its incident here however late it comes.
alert_occurrences = Table(
    "alert_occurrences",
    metadata,
    Column("occurrence", String, primary_key=True),
    Column("alert_fingerprint", String, nullable=False),
    Column("incident_id", Integer, ForeignKey("incidents.id"), nullable=False),
    Column("starts_at", UTCDateTime, nullable=False),
    Index(None, "alert_fingerprint", "starts_at"),
    Index(None, "incident_id"),
)

actions = Table(
    "actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String, nullable=False),
    Column("node", String, nullable=False),
    Column("incident_id", Integer, ForeignKey("incidents.id"), nullable=True),
    Column("requested_by", String, nullable=False, default=""),
    Column("dry_run", Boolean, nullable=False, default=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("outcome", String, nullable=False),
    Column("error", Text, nullable=False, default=""),
    Column("detail", JSON, nullable=False),
    Column("idempotency_key", String, nullable=True, unique=True),
    Index(None, "node"),
    # an incident's actions of one kind, in order (without it a planner may walk every action of the kind instead)
    Index(None, "incident_id", "kind", "started_at"),
    # the gate's bounded reads (remedy.ledger.recent): one kind over a time range; one kind and outcome per node
    Index(None, "kind", "started_at"),
    Index(None, "kind", "node", "outcome", "started_at"),
)

validations = Table(
    "validations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node", String, ForeignKey("nodes.name"), nullable=False),
    Column("level", String, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("summary", JSON, nullable=False),
    Column("requested_by", String, nullable=False),
    Index(None, "node", "at"),
)

breaker_events = Table(
    "breaker_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope_kind", String, nullable=False),
    Column("scope", String, nullable=False),
    Column("from_state", String, nullable=False),
    Column("to_state", String, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("by", String, nullable=False),
    Index(None, "scope_kind", "scope"),
    Index(None, "at"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", Integer, ForeignKey("incidents.id"), nullable=True),
    Column("flow_run_id", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("requested_at", UTCDateTime, nullable=False),
    Column("decided_at", UTCDateTime, nullable=True),
    Column("decision", String, nullable=True),  # approve | deny | timeout; NULL = pending
    Column("decided_by", String, nullable=True),
    Column("reason", Text, nullable=False, default=""),
    Column("slack_ts", String, nullable=True),
    Index(None, "incident_id"),
)

# One row per flow run that works on an incident (or waits for an answer): its lease. The run's process renews it
# while it lives; a run whose lease expired is gone, and its incident may be taken over (remedy.ledger.leases).
# `ended_at` is set when the run finished (a clean end) or was found gone (reaped): either way it holds nothing.
run_leases = Table(
    "run_leases",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("process", String, nullable=False, default=""),  # host:pid, for the operator
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("renewed_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("end_reason", Text, nullable=False, default=""),
    Index(None, "expires_at"),
)

# The ledger's own identity: one row, written by the migration that created the table (0006). Every Prefect run key
# carries it, so a stack pointed at a reset or foreign ledger (or two stacks on one Prefect server) never gets
# another ledger's run back for an incident that merely has the same number.
ledger_identity = Table(
    "ledger_identity",
    metadata,
    Column("id", String, primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
)

# InfiniBand port outages, folded from port up/down alerts (remedy.ledger.ib_ports): kept here, not in a receiver's
# memory, so a port flapping across two receivers or a receiver restart still adds up to its cumulative downtime.
# One row per outage (node, port, when it went down); `ended_at` NULL = still down.
ib_port_outages = Table(
    "ib_port_outages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node", String, nullable=False),
    Column("port", String, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("node", "port", "started_at"),
)

# Per port: whether the cumulative-downtime budget already tripped for the current crossing (it re-arms when the
# window's total falls back below budget), so two receivers never report one crossing twice.
ib_ports = Table(
    "ib_ports",
    metadata,
    Column("node", String, nullable=False),
    Column("port", String, nullable=False),
    Column("cumulative_tripped", Boolean, nullable=False, default=False),
    Column("tripped_by", UTCDateTime, nullable=True),  # start of the outage whose alert crossed the budget
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("node", "port"),
)
