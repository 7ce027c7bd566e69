"""Typed results of triage's and the in-place runbook's tasks (issue 29, item 2): what a task read or decided, as a
small frozen dataclass instead of a dict. Plain Python, no Prefect."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from remedy.domain.model import IncidentStatus


@dataclass(frozen=True)
class IncidentFacts:
    """The incident as the ledger has it (a dict shaped like IncidentRecord: the policy's input), how often this
    fault was seen in the lookback, the node's lifecycle state, and whether a gone run's work is to be continued."""

    incident: dict[str, Any]
    recurrences: int
    node_state: str | None
    orphaned: bool = False  # acting under a run whose lease expired
    resumes: bool = False  # a gone run of this incident cordoned the node itself
    recovering: bool = False  # a gone run had replaced the node and was repairing it off the critical path


@dataclass(frozen=True)
class RemediationChoice:
    """The expected-cost comparison (remedy.remediate.choice.choose) with the facts it was made on."""

    option: str
    reason: str
    options: list[dict[str, Any]] = field(default_factory=list)
    spares_ready: int = 0
    tried_depth: int = -1
    unreachable: bool = False
    markdown: str = ""

    def summary(self, *extra: str) -> dict[str, Any]:
        """What a run's result shows of it (the artifact has the markdown)."""
        keys = ("option", "reason", "options", "spares_ready", *extra)
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class ClosedIncident:
    """The incident's status after a close (the remediation's own word stands when it closed it already)."""

    id: int
    status: IncidentStatus
