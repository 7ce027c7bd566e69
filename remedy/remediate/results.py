"""Typed results of triage's and the in-place runbook's tasks (issue 29, item 2): what a task read or decided, as a
small frozen dataclass instead of a dict. Plain Python, no Prefect."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from remedy.domain.model import IncidentStatus
from remedy.remediate.choice import WarningAction


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


@dataclass(frozen=True)
class WarningWeighed:
    """An early warning weighed (remedy.remediate.choice.choose_on_warning): swap at a checkpoint boundary, or wait
    for the failure. The cost and record fields are None when the warning was not weighed at all (the node runs no
    part of the job, or the job publishes no checkpoint cadence); `checking`: acting would pay on the prior, but the
    detector's own record must show it first."""

    node: str
    action: WarningAction
    acts: bool
    why: str
    act_cost_minutes: float | None = None
    wait_cost_minutes: float | None = None
    spares_ready: int | None = None
    spare_reserve: int | None = None
    minutes_to_next_checkpoint: float | None = None
    detector: str | None = None
    precision: float | None = None
    precision_judged: int | None = None
    precision_followed: int | None = None
    wait_for_checkpoint_seconds: float | None = None
    checking: bool = False
    markdown: str = ""

    def held_for_record(self, checking: str) -> WarningWeighed:
        """Not swapped: the detector's record must show first what the prior promises (`checking` says why)."""
        return replace(self, action=WarningAction.WAIT, acts=False, checking=True,
                       why=f"not swapped: {checking[0].lower()}{checking[1:]}",
                       markdown=f"{self.markdown}\n\n**{checking}**")

    def summary(self) -> dict[str, object]:
        """What the triage run's result shows of it (the artifact has the markdown; unweighed fields left out)."""
        shown = {k: v for k, v in asdict(self).items() if k != "markdown" and v is not None}
        return shown | {"action": self.action.value}


@dataclass(frozen=True)
class RemediationClaim:
    """May this run act on the incident (tasks.ledger.claim_remediation)? `holder` is who holds it now; when not
    claimed, `settled` (resolved, ignored, escalated: nobody acts again), a live lease or a running holder says why;
    when taken over from a gone run, `took_over_from` and the actions it left unfinished (`abandoned`)."""

    claimed: bool
    holder: str = ""
    settled: IncidentStatus | None = None
    holder_state: str | None = None  # the holder's Prefect state, when that decided
    holder_lease_expires_at: datetime | None = None  # the holder's live lease
    took_over_from: str | None = None
    abandoned: tuple[int, ...] = ()
