"""Circuit breaker, in-place fix ladder and spare selection settings (issue 4). Composed into RemedySettings."""

from __future__ import annotations

from pydantic import BaseModel


class BreakerSettings(BaseModel):
    """Circuit breaker windows and caps."""


class LadderSettings(BaseModel):
    """In-place fix ladder: backoff and attempt caps."""


class SpareSettings(BaseModel):
    """Spare pool: freshness window, sizing risk, selection."""
