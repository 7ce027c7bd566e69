"""Plain records lemon scoring reads. The lead adapts ledger rows into these; the policy simulator builds them directly.

All times must be timezone-aware (UTC): mixing naive and aware datetimes is refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


def _aware(what: str, t: datetime) -> None:
    if not isinstance(t, datetime) or t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{what}: time must be a timezone-aware datetime, got {t!r}")


@dataclass(frozen=True)
class IncidentRecord:
    """A fault seen on the node while it carried work (an XID, a remap failure, NotReady, a job crash blamed on it)."""

    time: datetime
    signal: str = "xid"
    xid: int | None = None
    gpu: int | None = None
    ref: str = ""  # ledger incident id or fingerprint, for the evidence trail

    def __post_init__(self) -> None:
        _aware("incident", self.time)


@dataclass(frozen=True)
class ValidationRecord:
    """A health check run on the node (burn-in suite, spare cycling, post-fix verify)."""

    time: datetime
    passed: bool
    check: str = ""
    ref: str = ""

    def __post_init__(self) -> None:
        _aware("validation", self.time)


@dataclass(frozen=True)
class ExclusionRecord:
    """The node was left out of a multi-node session; deliberate = an operator isolated it (seed 002 §4.3.1)."""

    time: datetime
    session: str = ""
    deliberate: bool = False

    def __post_init__(self) -> None:
        _aware("exclusion", self.time)


@dataclass(frozen=True)
class NodeHistory:
    """Everything scoring knows about one node. exposure_days = node-days under load inside the lookback window."""

    node: str
    exposure_days: float
    incidents: tuple[IncidentRecord, ...] = field(default=())
    validations: tuple[ValidationRecord, ...] = field(default=())
    exclusions: tuple[ExclusionRecord, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.node or not isinstance(self.node, str):
            raise ValueError(f"node history: node name must be a non-empty string, got {self.node!r}")
        if not (self.exposure_days >= 0) or self.exposure_days == float("inf"):
            raise ValueError(f"{self.node}: exposure_days must be a finite number ≥ 0, got {self.exposure_days!r}")
        # Accept lists from callers but store tuples so the record stays hashable and immutable.
        for name in ("incidents", "validations", "exclusions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
