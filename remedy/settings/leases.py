"""Run leases (issue 17, part 1): how a run that holds an incident shows it is alive, and how soon a dead one is
taken over.

Every flow run that works on an incident holds a lease in the ledger and renews it from a background thread while
its process lives (paused for an approval included). A run whose lease expired is gone (SIGKILL, OOM, a stopped
`remedy up`): the next trigger or a person's run takes its incident over, and the receiver's watchdog re-announces
incidents left `acting` by a gone run so that a new run picks them up without anyone asking.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


class LeaseSettings(BaseModel):
    ttl_seconds: float = Field(
        30.0,
        gt=0,
        le=86400,  # a day: longer, a killed run's node stays cordoned without an owner that long (inf: never)
        allow_inf_nan=False,
        description=(
            "A run's lease lasts this long after its last renewal; a run not heard from for this long is taken to be "
            "gone. Longer than the longest ledger outage a live run should survive, short enough that a killed run's "
            "node is not left cordoned without an owner for long."
        ),
    )
    renew_seconds: float = Field(
        5.0,
        gt=0,
        description="How often a live process renews the leases of its runs (well under ttl_seconds).",
    )
    watchdog_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="How often the receiver looks for incidents left `acting` by a gone run and re-announces them.",
    )
    max_reannounces: int = Field(
        3,
        ge=0,
        description=(
            "Re-announce an incident at most this many times; after that its runs keep dying (a crash that repeats), "
            "so the watchdog escalates it to a person instead of starting another run."
        ),
    )

    @model_validator(mode="after")
    def _renew_well_within_ttl(self) -> LeaseSettings:
        if self.renew_seconds * 2 > self.ttl_seconds:
            raise ValueError(f"renew_seconds ({self.renew_seconds:g}) must be at most half of ttl_seconds "
                             f"({self.ttl_seconds:g}): one late renewal must not let a live run's lease expire")
        return self


def lease_settings(settings: Any) -> LeaseSettings:
    """The `leases` section of a RemedySettings, or the defaults when the model does not carry one."""
    section = getattr(settings, "leases", None)
    return section if isinstance(section, LeaseSettings) else LeaseSettings()
