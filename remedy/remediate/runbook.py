"""The in-place runbook's decisions (fix-in-place, recover-node, escalate), Prefect-free: the flows call these and
carry out what they say. Each takes what the flow saw and returns a small typed answer."""

from __future__ import annotations

from dataclasses import dataclass

from remedy.domain.model import IncidentStatus
from remedy.domain.outcome import Outcome


@dataclass(frozen=True)
class Closing:
    """How to close an incident: its final status and the one line the ledger keeps."""

    status: IncidentStatus
    detail: str


def own_incident_closing(status: str | None, dry_run: bool, why: str = "") -> Closing | None:
    """A fix-in-place started by a person opened its own incident and nobody above it will close it: close it as
    the run ended. None when there is nothing to close (a dry run, a duplicate that never held it, an unknown
    status)."""
    try:
        outcome = Outcome(status)
    except ValueError:
        return None
    if dry_run or outcome is Outcome.DUPLICATE:
        return None
    detail = f"fix-in-place {outcome.label.lower()}" + (f": {why}" if why else "")
    return Closing(outcome.incident_status, detail[:2000])
