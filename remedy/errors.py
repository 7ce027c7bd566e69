"""Errors an operator sees. Each carries a one-line message that says what was wrong."""

from __future__ import annotations


class RemedyError(Exception):
    """Base for errors reported to the operator as one clear line (CLI exit code 2)."""


class ObjectNotFound(RemedyError):
    """HTTP 404: the object is not there (never created, or deleted meanwhile)."""


class NodeNotFound(ObjectNotFound):
    def __init__(self, node: str) -> None:
        super().__init__(f"node not found: {node}")
        self.node = node


class ClusterUnreachable(RemedyError):
    """The Kubernetes API server did not answer, or kept answering "busy" (429, 503), after the configured retries."""


class Conflict(RemedyError):
    """Someone else changed the object first (HTTP 409 / ledger race); re-read and decide again."""


class AlreadyExists(Conflict):
    """HTTP 409 AlreadyExists: an object of that name exists (often: a retry of the same step created it)."""


class Rejected(RemedyError):
    """HTTP 400 / 422: the API server refused what was sent (invalid field, immutable field, bad patch)."""


class Forbidden(RemedyError):
    """HTTP 401 / 403: gpu-remedy's credentials may not do this (RBAC, expired token, admission policy)."""


class ApiServerError(RemedyError):
    """HTTP 500 and other answers that retrying will not fix (e.g. a pod under two PodDisruptionBudgets)."""
