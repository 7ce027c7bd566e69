"""InfiniBand port outages and the cumulative-downtime trip per port, kept in the ledger (issue 30).

The receiver folded InfiniBand port up/down alerts into a tracker in its own memory: two receivers on one ledger,
or a restart, each saw part of a flapping port and none reached the cumulative budget deployments/prometheus/
rules.yml promises. Now the outages and the "already reported" mark live here (remedy.ledger.ib_ports).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from remedy.ledger.schema import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ib_port_outages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("port", sa.String(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ib_port_outages")),
        sa.UniqueConstraint("node", "port", "started_at", name=op.f("uq_ib_port_outages_node_port_started_at")),
    )
    op.create_table(
        "ib_ports",
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("port", sa.String(), nullable=False),
        sa.Column("cumulative_tripped", sa.Boolean(), nullable=False),
        sa.Column("tripped_by", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("node", "port", name=op.f("pk_ib_ports")),
    )


def downgrade() -> None:
    op.drop_table("ib_ports")
    op.drop_table("ib_port_outages")
