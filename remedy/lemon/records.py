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
    """A fault seen on the node (an XID, a remap failure, NotReady, a job crash). Whether it counts against the
    node is decided by `remedy.lemon.attribution`; the fields below are what that decision reads."""

    time: datetime
    signal: str = "xid"
    xid: int | None = None
    gpu: int | None = None  # index on the node at the time (nvidia-smi / exporter `gpu` label)
    ref: str = ""  # ledger incident id or fingerprint, for the evidence trail
    status: str = ""  # the ledger's status when scored (IncidentStatus value): "ignored" = closed without blame
    cause: str = ""  # "job" where the ledger records the job (user code or data) as the cause
    gpu_serial: str = ""  # board serial (NVML nvmlDeviceGetSerial / exporter label): follows the GPU across nodes
    gpu_uuid: str = ""  # GPU-… UUID (NVML / dcgm-exporter `UUID` label): same, where no serial is known
    occurrence: str = ""  # alert identity (Alertmanager fingerprint + startsAt): a re-send repeats it
    raw: str = ""  # the driver's text (XID 154's recovery action, an NVLink5 line's Fatal/Nonfatal)
    seen_on: str = ""  # set by scoring when the incident followed its GPU here from another node

    def __post_init__(self) -> None:
        _aware("incident", self.time)

    @property
    def gpu_id(self) -> str:
        """The GPU's own identity (serial, else UUID), or "" where the record has neither."""
        return self.gpu_serial or self.gpu_uuid


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
    """Everything scoring knows about one node. exposure_days = node-days under load inside the lookback window.

    in_fleet=False: the node name is gone (deleted, or re-created under another name). It is not scored itself, but
    its incidents still follow their GPUs to wherever those GPUs are now."""

    node: str
    exposure_days: float
    incidents: tuple[IncidentRecord, ...] = field(default=())
    validations: tuple[ValidationRecord, ...] = field(default=())
    exclusions: tuple[ExclusionRecord, ...] = field(default=())
    in_fleet: bool = True

    def __post_init__(self) -> None:
        if not self.node or not isinstance(self.node, str):
            raise ValueError(f"node history: node name must be a non-empty string, got {self.node!r}")
        if not (self.exposure_days >= 0) or self.exposure_days == float("inf"):
            raise ValueError(f"{self.node}: exposure_days must be a finite number ≥ 0, got {self.exposure_days!r}")
        # Accept lists from callers but store tuples so the record stays hashable and immutable.
        for name in ("incidents", "validations", "exclusions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
