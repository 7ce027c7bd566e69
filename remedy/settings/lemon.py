"""Lemon scoring, fault isolation and early-warning thresholds (issue 6). Composed into remedy.config.RemedySettings."""

from __future__ import annotations

from pydantic import BaseModel


class LemonSettings(BaseModel):
    """Lemon scoring, fault isolation and early-warning thresholds (issue 6)."""
