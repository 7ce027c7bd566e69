"""The fleet ledger (SQLAlchemy 2 + alembic, SQLite or PostgreSQL): nodes, transitions, incidents, actions,
validations, breaker events and approvals. `Ledger(url)`; `Ledger.migrate()` creates or upgrades the schema.
"""

from remedy.ledger.errors import (
    IdempotentReplay,
    LedgerConflict,
    LedgerNotMigrated,
    RecordNotFound,
    UnmanagedNode,
)
from remedy.ledger.ledger import Ledger
from remedy.ledger.records import (
    ActionRecord,
    ApprovalRecord,
    BreakerEventRecord,
    HistoryEntry,
    IncidentRecord,
    NodeRecord,
    TransitionRecord,
    ValidationRecord,
)

__all__ = [
    "ActionRecord", "ApprovalRecord", "BreakerEventRecord", "HistoryEntry", "IdempotentReplay", "IncidentRecord",
    "Ledger", "LedgerConflict", "LedgerNotMigrated", "NodeRecord", "RecordNotFound", "TransitionRecord",
    "UnmanagedNode", "ValidationRecord",
]
