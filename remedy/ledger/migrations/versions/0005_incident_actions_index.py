"""An incident's actions of one kind, in order: index (incident_id, kind, started_at), replacing incident_id alone.

With 0004's (kind, started_at) present, SQLite answered "this incident's cordons, in order" (triage's resumption
check) by walking every cordon ever recorded — 1.7 s at a million actions — instead of the incident's few rows.
Found by bench/sim_scale.py.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_actions_incident_id", table_name="actions")
    op.create_index("ix_actions_incident_id_kind_started_at", "actions", ["incident_id", "kind", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_actions_incident_id_kind_started_at", table_name="actions")
    op.create_index("ix_actions_incident_id", "actions", ["incident_id"])
