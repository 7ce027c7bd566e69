"""The checkpoint handshake between gpu-remedy and the training job, through the workload's annotations.

A swap on an early warning must land on a checkpoint boundary, or it rolls back the work since the last checkpoint —
the very loss it is meant to avoid. The job (its launcher or a sidecar) publishes on its workload object (Job,
JobSet or PyTorchJob):

    remedy.io/checkpoint-interval-seconds   its checkpoint cadence
    remedy.io/last-checkpoint               when its last checkpoint completed (RFC 3339)

and gpu-remedy asks for one now by writing

    remedy.io/checkpoint-requested          when it asked (RFC 3339)

which the job answers by advancing last-checkpoint past the request. A job that publishes nothing has no boundary
gpu-remedy can see: it is never swapped on a warning (the warning is watched, and says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from remedy.domain.times import parse_iso_or_none

INTERVAL = "remedy.io/checkpoint-interval-seconds"
LAST = "remedy.io/last-checkpoint"
REQUESTED = "remedy.io/checkpoint-requested"


def _seconds(value: object) -> float | None:
    try:
        s = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return s if s > 0 else None


@dataclass(frozen=True)
class Checkpoints:
    """What the job says about its checkpoints; None where it says nothing usable."""

    last: datetime | None
    interval_seconds: float | None
    requested: datetime | None = None

    @classmethod
    def from_annotations(cls, annotations: dict[str, str] | None) -> Checkpoints:
        a = annotations or {}
        return cls(parse_iso_or_none(a.get(LAST)), _seconds(a.get(INTERVAL)), parse_iso_or_none(a.get(REQUESTED)))

    @property
    def published(self) -> bool:
        return self.last is not None and self.interval_seconds is not None

    def minutes_to_next(self, now: datetime) -> float | None:
        """Minutes until the next scheduled checkpoint completes; None if the job publishes no cadence."""
        if not self.published:
            return None
        since = max(0.0, (now - self.last).total_seconds())  # type: ignore[operator]
        return (self.interval_seconds - since % self.interval_seconds) / 60.0  # type: ignore[operator]

    def since(self, t: datetime) -> bool:
        """Has a checkpoint completed at or after `t`?"""
        return self.last is not None and self.last >= t

    def why_unpublished(self) -> str:
        missing = [k for k, v in ((LAST, self.last), (INTERVAL, self.interval_seconds)) if v is None]
        return f"the job publishes no {' or '.join(missing)} annotation, so no checkpoint boundary can be seen"
