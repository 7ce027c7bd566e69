"""Initial fleet ledger: nodes, transitions, incidents, actions, validations, breaker events, approvals.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from remedy.ledger.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("gpu_model", sa.String(), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("zone", sa.String(), nullable=False),
        sa.Column("rack", sa.String(), nullable=False),
        sa.Column("switch", sa.String(), nullable=False),
        sa.Column("pdu", sa.String(), nullable=False),
        sa.Column("instance_type", sa.String(), nullable=False),
        sa.Column("provider_id", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=True),
        sa.Column("state_version", sa.Integer(), nullable=False),
        sa.Column("validated_at", UTCDateTime(), nullable=True),
        sa.Column("validation_level", sa.String(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_nodes"),
    )
    op.create_index("ix_nodes_state", "nodes", ["state"])

    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=True),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["node"], ["nodes.name"], name="fk_transitions_node_nodes"),
        sa.PrimaryKeyConstraint("id", name="pk_transitions"),
        sa.UniqueConstraint("idempotency_key", name="uq_transitions_idempotency_key"),
    )
    op.create_index("ix_transitions_node_at", "transitions", ["node", "at"])

    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=True),
        sa.Column("signal", sa.String(), nullable=False),
        sa.Column("xid", sa.Integer(), nullable=True),
        sa.Column("first_seen", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("severity", sa.String(), nullable=False),
        sa.Column("flow_run_id", sa.String(), nullable=True),
        sa.Column("resolved_at", UTCDateTime(), nullable=True),
        sa.Column("rack", sa.String(), nullable=False),
        sa.Column("switch", sa.String(), nullable=False),
        sa.Column("pdu", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_incidents"),
    )
    op.create_index("ix_incidents_fingerprint_last_seen", "incidents", ["fingerprint", "last_seen"])
    op.create_index("ix_incidents_node", "incidents", ["node"])
    op.create_index("ix_incidents_status", "incidents", ["status"])

    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], name="fk_actions_incident_id_incidents"),
        sa.PrimaryKeyConstraint("id", name="pk_actions"),
        sa.UniqueConstraint("idempotency_key", name="uq_actions_idempotency_key"),
    )
    op.create_index("ix_actions_node", "actions", ["node"])
    op.create_index("ix_actions_incident_id", "actions", ["incident_id"])

    op.create_table(
        "validations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["node"], ["nodes.name"], name="fk_validations_node_nodes"),
        sa.PrimaryKeyConstraint("id", name="pk_validations"),
    )
    op.create_index("ix_validations_node_at", "validations", ["node", "at"])

    op.create_table(
        "breaker_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope_kind", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=False),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_breaker_events"),
    )
    op.create_index("ix_breaker_events_scope_kind_scope", "breaker_events", ["scope_kind", "scope"])
    op.create_index("ix_breaker_events_at", "breaker_events", ["at"])

    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("flow_run_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("requested_at", UTCDateTime(), nullable=False),
        sa.Column("decided_at", UTCDateTime(), nullable=True),
        sa.Column("decision", sa.String(), nullable=True),
        sa.Column("decided_by", sa.String(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("slack_ts", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], name="fk_approvals_incident_id_incidents"),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
    )
    op.create_index("ix_approvals_incident_id", "approvals", ["incident_id"])


def downgrade() -> None:
    for table in ("approvals", "breaker_events", "validations", "actions", "incidents", "transitions", "nodes"):
        op.drop_table(table)
