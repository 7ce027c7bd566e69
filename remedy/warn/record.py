"""A detector's record: how often its warnings were followed by a failure — the precision `choose_on_warning` weighs
(remedy.remediate.choice), learned per detector from the ledger, with `lemon.early_warning.act_precision` as the
prior until there is history (Beta smoothing, as `estimate_odds` does for the ladder's odds).

Only warnings left to run are judged. A node swapped on its warning cannot show whether it would have failed (its
off-path fix and burn-in clear what they find either way). Whether a warned node was swapped depends on the job's
checkpoint clock and on the spares, not on the node, so the warnings left to run are a fair sample of the detector.
A warning is judged once its window has passed, or as soon as a failure came within it. A detector that flags busy
but healthy nodes thus loses weight with every false alarm, and stops taking nodes out of the job.
Plain Python: no Prefect import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from remedy.domain.durations import human_duration

PRIOR_WEIGHT = 10.0  # the assumed precision counts as this many judged warnings (as the ladder's priors do)


@dataclass(frozen=True)
class PastWarning:
    node: str
    at: datetime
    detector: str
    swapped: bool  # the node was taken out on it: its outcome cannot be judged


@dataclass(frozen=True)
class DetectorRecord:
    """The precision to weigh for one detector, with the counts it came from."""

    detector: str
    prior: float
    followed: int  # judged warnings a failure followed within the window
    judged: int
    window: timedelta
    prior_weight: float = PRIOR_WEIGHT

    @property
    def precision(self) -> float:
        return (self.followed + self.prior_weight * self.prior) / (self.judged + self.prior_weight)

    def sentence(self) -> str:
        """Where the precision comes from, for the options artifact."""
        if not self.judged:
            return (f"Share of warnings a failure follows: {self.precision:.0%}, the assumed share "
                    f"(lemon.early_warning.act_precision): no {self.detector} warning left to run is on record yet.")
        return (f"Share of warnings a failure follows: {self.precision:.0%} — {self.followed} of the {self.judged} "
                f"{self.detector} warnings left to run were followed by a failure within "
                f"{human_duration(self.window.total_seconds())}, weighed with the assumed {self.prior:.0%} as "
                f"{self.prior_weight:g} more.")


def detector_of(signal: str, xid: int | None, evidence: Mapping[str, Any] | None) -> str:
    """The detector that raised a warning incident: the GpuEarlyWarning alert's `detector` label, or the XID for the
    driver's own early warnings (XID 92, the ECC storm)."""
    if signal == "xid" and xid is not None:
        return f"xid-{xid}"
    labels = (evidence or {}).get("labels") or {}
    return str(labels.get("detector") or "unnamed")


def detector_record(detector: str, warnings: Iterable[PastWarning], failures: Mapping[str, Sequence[datetime]],
                    now: datetime, window: timedelta, prior: float,
                    prior_weight: float = PRIOR_WEIGHT) -> DetectorRecord:
    """`warnings`: past warning incidents; `failures`: node → when its failures (not warnings) were first seen.

    A condition that keeps firing (the scan re-posts a hot node every 10 minutes) is one warning, not one per post:
    per node, a warning within `window` of the last one judged is part of it."""
    followed = judged = 0
    last: dict[str, datetime] = {}
    for w in sorted(warnings, key=lambda w: w.at):
        if w.detector != detector or w.swapped:
            continue
        if w.node in last and w.at < last[w.node] + window:
            continue
        last[w.node] = w.at
        if any(w.at < f <= w.at + window for f in failures.get(w.node, ())):
            followed += 1
            judged += 1
        elif w.at + window <= now:
            judged += 1
    return DetectorRecord(detector, prior, followed, judged, window, prior_weight)
