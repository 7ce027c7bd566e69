"""Alert identity and evidence: one row per alert occurrence, the evidence an incident was opened on.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from remedy.ledger.schema import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("evidence", sa.JSON(), nullable=True))
    op.create_table(
        "alert_occurrences",
        sa.Column("occurrence", sa.String(), nullable=False),
        sa.Column("alert_fingerprint", sa.String(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("starts_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"],
                                name="fk_alert_occurrences_incident_id_incidents"),
        sa.PrimaryKeyConstraint("occurrence", name="pk_alert_occurrences"),
    )
    op.create_index("ix_alert_occurrences_alert_fingerprint_starts_at", "alert_occurrences",
                    ["alert_fingerprint", "starts_at"])
    op.create_index("ix_alert_occurrences_incident_id", "alert_occurrences", ["incident_id"])


def downgrade() -> None:
    op.drop_index("ix_alert_occurrences_incident_id", table_name="alert_occurrences")
    op.drop_index("ix_alert_occurrences_alert_fingerprint_starts_at", table_name="alert_occurrences")
    op.drop_table("alert_occurrences")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("evidence")
