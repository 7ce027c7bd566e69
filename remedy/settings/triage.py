"""Alert intake and triage timing (issue 3, parts 4–7): outbox re-emission, dispatcher polling, staleness.

The receiver's bind address, token and dedup window are in `remedy.config.ReceiverSettings`; these are the knobs
of what happens after an alert is acknowledged. Until `RemedySettings` composes this section (`triage:`),
`triage_settings(settings)` falls back to the defaults below.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class TriageSettings(BaseModel):
    """Alert intake and triage timing (issue 3)."""

    max_incident_age_seconds: float = Field(
        300.0,
        gt=0,
        description=(
            "A triage run that starts this long after the fault was detected (stack down, backlog) re-reads the live "
            "node before acting: triggered runs created while `serve` is down start when it comes back, maybe much "
            "later (shared/notes/environment.md)."
        ),
    )
    recurrence_lookback_hours: float = Field(
        168.0,
        gt=0,
        description=(
            "Earlier incidents of the same fault (node, GPU, signal, XID) within this many hours count as recurrences "
            "(seed 002 §4.3.5: stop retrying a recurring XID 79). One week is gpu-remedy's choice."
        ),
    )
    odds_from_latest: int = Field(
        500,
        ge=0,
        description=(
            "The odds of each in-place fix (restart, reset, reboot) are learnt from this many of its latest finished "
            "attempts in the ledger, not the whole history: recent outcomes reflect today's drivers and firmware, and "
            "triage costs the same at any ledger size."
        ),
    )
    dispatcher_poll_seconds: float = Field(
        1.0,
        gt=0,
        le=10,
        description=(
            "How often the warm dispatcher asks Prefect for scheduled runs of our deployments between alerts (runs "
            "started from the UI or a schedule). After an incident event it polls every 0.2 s for 10 s, so a triage "
            "run Prefect's trigger creates starts at once; `serve` polls every 10 s (9.4 s event→run measured here). "
            "Each poll is a query on the Prefect server's database: polling 5×/s all the time slowed the runs."
        ),
    )
    emit_retry_seconds: float = Field(
        2.0,
        gt=0,
        description="How often the receiver retries incident events Prefect has not acknowledged (API down).",
    )
    emit_timeout_seconds: float = Field(
        5.0, gt=0, description="Timeout of one POST of incident events to the Prefect API."
    )
    known_nodes_refresh_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "An alert for a node the receiver does not know re-reads the node list at most this often; a node still "
            "unknown is rejected (counted, never acted on)."
        ),
    )


def triage_settings(settings: Any) -> TriageSettings:
    """The `triage` section of a RemedySettings, or the defaults when the model does not carry one yet."""
    section = getattr(settings, "triage", None)
    return section if isinstance(section, TriageSettings) else TriageSettings()
