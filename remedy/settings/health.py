"""Burn-in and spare health-check criteria (issue 5). Composed into remedy.config.RemedySettings."""

from __future__ import annotations

from pydantic import BaseModel


class HealthCheckSettings(BaseModel):
    """Burn-in and spare health-check criteria (issue 5)."""
