"""Errors the ledger raises, each one line that names the record and what disagreed."""

from __future__ import annotations

from remedy.domain.model import IllegalTransition, NodeState
from remedy.errors import Conflict, RemedyError


class LedgerConflict(Conflict):
    """Another writer got there first (state changed, approval already decided, action already finished)."""


class IdempotentReplay(LedgerConflict):
    """An idempotency key was reused for a *different* request.

    A repeat of the same request with the same key is not an error (the original record is returned); reusing
    the key for another node, state or action kind is, because the caller would silently get someone else's record.
    """

    def __init__(self, key: str, original: str, requested: str) -> None:
        super().__init__(f"idempotency key {key!r} already used for {original}; refusing to reuse it for {requested}")
        self.key = key


class RecordNotFound(RemedyError):
    """No incident / action / approval with that id."""

    def __init__(self, kind: str, record_id: int) -> None:
        super().__init__(f"{kind} not found: {record_id}")
        self.kind, self.record_id = kind, record_id


class UnmanagedNode(IllegalTransition):
    """The node has no lifecycle state yet and the caller did not allow adopting it."""

    def __init__(self, node: str, target: NodeState) -> None:
        ValueError.__init__(
            self, f"{node}: is unmanaged (no lifecycle state); pass allow_unmanaged=True to adopt it as {target.value}"
        )
        self.node, self.current, self.target = node, None, target


class LedgerNotMigrated(RemedyError):
    """The database has no ledger schema (or an old one): run `remedy ledger migrate`."""


class LeaseLost(RemedyError):
    """This run's lease expired or was ended (its process stalled longer than the lease, or the run was found gone
    and its incident handed to another run): it must not act any more."""
