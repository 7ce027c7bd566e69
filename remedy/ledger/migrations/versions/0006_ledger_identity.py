"""The ledger's identity (one uuid4 row), created here, at migration: run keys carry it (issue 32, item 4).

Triage runs were keyed `triage:incident:<id>` alone, so after a ledger reset, or with two stacks on one Prefect
server, a new incident 1 got the old incident 1's run back and was never triaged (its node left cordoned).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from remedy.ledger.schema import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "ledger_identity",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_identity")),
    )
    op.bulk_insert(table, [{"id": uuid.uuid4().hex, "created_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("ledger_identity")
