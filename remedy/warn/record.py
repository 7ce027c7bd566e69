"""A detector's record: how often its warnings were followed by a failure — the precision `choose_on_warning` weighs
(remedy.remediate.choice), learned per detector from the ledger, with `lemon.early_warning.act_precision` as the
prior until there is history (Beta smoothing, as `estimate_odds` does for the ladder's odds).

Only warnings left to run are judged. A node swapped on its warning cannot show whether it would have failed (its
off-path fix and burn-in clear what they find either way). Whether a warned node was swapped depends on the job's
checkpoint clock and on the spares, not on the node, so the warnings left to run are a fair sample of the detector.
A warning is judged once its window has passed, or as soon as a failure came within it. A detector that flags busy
but healthy nodes thus loses weight with every false alarm, and stops taking nodes out of the job.

That sample only grows when warnings are left to run, and a detector whose warnings are all acted on would never be
judged: a noisy one would keep taking healthy nodes out on the prior alone (the simulator showed a detector right 1
time in 5 costing more goodput than acting on no warning at all). So `keep_checking` leaves one warning in
`CHECK_EVERY` to run while the detector's own record cannot yet show, with `CHECK_CONFIDENCE`, that acting pays; a
detector whose record shows it stops being checked, one that does not soon stops being acted on.
Plain Python: no Prefect import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from remedy.domain.durations import human_duration

PRIOR_WEIGHT = 10.0  # the assumed precision counts as this many judged warnings (as the ladder's priors do)
CHECK_CONFIDENCE = 0.9  # acting must pay at this confidence, on the detector's own record alone, to stop checking it
CHECK_EVERY = 3  # while a detector is checked, one of this many warnings it raises is left to run


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
    acted_since_left: int = 0  # its warnings acted on since the last one left to run

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


def lower_bound(followed: int, judged: int, confidence: float = CHECK_CONFIDENCE) -> float:
    """The share of warnings a failure follows that the record alone shows at `confidence`: the 1 − confidence
    quantile of Beta(followed + 1, judged − followed + 1), the record over a flat prior. For whole numbers
    I_x(a, b) = P(Binomial(a + b − 1, x) ≥ a), solved for x by bisection."""
    a, n = followed + 1, judged + 1
    target = 1.0 - confidence

    def cdf(x: float) -> float:  # in logs: a chatty detector's record can be thousands of warnings long
        lx, l1x, ln = math.log(x), math.log1p(-x), math.lgamma(n + 1)
        return sum(math.exp(ln - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lx + (n - k) * l1x)
                   for k in range(a, n + 1))

    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < target else (lo, mid)
    return (lo + hi) / 2


def keep_checking(record: DetectorRecord, *, act_minutes: float, wait_minutes: float, every: int = CHECK_EVERY,
                  confidence: float = CHECK_CONFIDENCE) -> str | None:
    """Why this warning, which acting would swap, is left to run instead — or None to act on it.

    `act_minutes` and `wait_minutes` are choose_on_warning's expected job minutes lost at the record's precision;
    acting pays above the break-even share act / (wait / precision). While the record's lower bound is below that,
    every `every`-th warning is left to run so the record can show which side the detector is on."""
    if record.precision <= 0 or wait_minutes <= 0 or math.isinf(act_minutes) or record.acted_since_left < every - 1:
        return None
    break_even = act_minutes / (wait_minutes / record.precision)
    shown = lower_bound(record.followed, record.judged, confidence)
    if shown >= break_even:
        return None
    return (f"Left to run to check the {record.detector} detector: acting pays above {break_even:.0%} of its warnings "
            f"being right, and its own record ({record.followed} of {record.judged} judged) shows only "
            f"{shown:.0%} with {confidence:.0%} confidence; one warning in {every} is left to run until it shows "
            f"more ({record.acted_since_left} acted on since the last one left to run).")


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
    followed = judged = acted = 0
    last: dict[str, datetime] = {}
    for w in sorted(warnings, key=lambda w: w.at):
        if w.detector != detector:
            continue
        acted = acted + 1 if w.swapped else 0
        if w.swapped:
            continue
        if w.node in last and w.at < last[w.node] + window:
            continue
        last[w.node] = w.at
        if any(w.at < f <= w.at + window for f in failures.get(w.node, ())):
            followed += 1
            judged += 1
        elif w.at + window <= now:
            judged += 1
    return DetectorRecord(detector, prior, followed, judged, window, prior_weight, acted)
