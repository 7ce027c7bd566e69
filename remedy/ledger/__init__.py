"""The fleet ledger (SQLAlchemy 2 + alembic, SQLite or PostgreSQL): nodes, transitions, incidents, actions,
validations, breaker events and approvals. `Ledger(url)`; `Ledger.migrate()` creates or upgrades the schema.

Names are loaded on first use, so `remedy --help` (which imports `remedy.ledger.cli`) does not pay for SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Ledger": "remedy.ledger.ledger",
    "IdempotentReplay": "remedy.ledger.errors",
    "LedgerConflict": "remedy.ledger.errors",
    "LeaseKeeper": "remedy.ledger.leases",
    "LeaseLost": "remedy.ledger.errors",
    "LedgerNotMigrated": "remedy.ledger.errors",
    "RecordNotFound": "remedy.ledger.errors",
    "UnmanagedNode": "remedy.ledger.errors",
    "ActionRecord": "remedy.ledger.records",
    "ApprovalRecord": "remedy.ledger.records",
    "BreakerEventRecord": "remedy.ledger.records",
    "Claim": "remedy.ledger.records",
    "Fence": "remedy.ledger.records",
    "HistoryEntry": "remedy.ledger.records",
    "IncidentRecord": "remedy.ledger.records",
    "LeaseRecord": "remedy.ledger.records",
    "NodeRecord": "remedy.ledger.records",
    "TransitionRecord": "remedy.ledger.records",
    "ValidationRecord": "remedy.ledger.records",
}
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from remedy.ledger.errors import (
        IdempotentReplay,
        LeaseLost,
        LedgerConflict,
        LedgerNotMigrated,
        RecordNotFound,
        UnmanagedNode,
    )
    from remedy.ledger.leases import LeaseKeeper
    from remedy.ledger.ledger import Ledger
    from remedy.ledger.records import (
        ActionRecord,
        ApprovalRecord,
        BreakerEventRecord,
        Claim,
        Fence,
        HistoryEntry,
        IncidentRecord,
        LeaseRecord,
        NodeRecord,
        TransitionRecord,
        ValidationRecord,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'remedy.ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
