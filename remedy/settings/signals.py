"""Signal thresholds: remaps, throttle, PCIe, NVLink, InfiniBand, NotReady (issue 3). Composed into remedy.config.RemedySettings."""

from __future__ import annotations

from pydantic import BaseModel


class SignalThresholds(BaseModel):
    """Signal thresholds: remaps, throttle, PCIe, NVLink, InfiniBand, NotReady (issue 3)."""
