"""Run leases: a flow run working on an incident renews its lease; an expired one marks the run gone.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from remedy.ledger.schema import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_leases",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("process", sa.String(), nullable=False),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("renewed_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_leases"),
    )
    op.create_index("ix_run_leases_expires_at", "run_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_run_leases_expires_at", table_name="run_leases")
    op.drop_table("run_leases")
