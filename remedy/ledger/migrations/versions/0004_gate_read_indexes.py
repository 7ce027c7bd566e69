"""Indexes for the gate's bounded reads: actions by (kind, time) and by (kind, node, outcome, time).

The breaker gate reads the ledger on every decision; without these its reads scanned every action ever recorded,
so its latency grew with history (remedy.ledger.recent, remedy.safety.history).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_actions_kind_started_at", "actions", ["kind", "started_at"])
    op.create_index("ix_actions_kind_node_outcome_started_at", "actions", ["kind", "node", "outcome", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_actions_kind_node_outcome_started_at", table_name="actions")
    op.drop_index("ix_actions_kind_started_at", table_name="actions")
