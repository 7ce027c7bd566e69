"""Errors an operator sees. Each carries a one-line message that says what was wrong."""

from __future__ import annotations


class RemedyError(Exception):
    """Base for errors reported to the operator as one clear line (CLI exit code 2)."""


class NodeNotFound(RemedyError):
    def __init__(self, node: str) -> None:
        super().__init__(f"node not found: {node}")
        self.node = node


class ClusterUnreachable(RemedyError):
    """The Kubernetes API server did not answer after the configured retries."""


class Conflict(RemedyError):
    """Someone else changed the object first (HTTP 409 / ledger race); re-read and decide again."""
