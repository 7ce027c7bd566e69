"""Checkpoint cadence: save duration δ, job MTBF M, and the Young/Daly optimum T_opt = √(2·δ·M).

Cost of an interval T as a share of wall time (seed 002 §4.2.2): save overhead δ/T plus expected lost work
T/(2M) (a failure lands on average half-way between checkpoints). The sum is smallest at T_opt, where it
equals √(2δ/M).

δ estimator (seed 002 Table 10). A save of length δ, seen through samples of period Δ taken at a random
phase, touches on average N̄ = 1 + δ/Δ samples (the sample windows it starts in, plus one more each time a
window boundary falls inside it, which happens δ/Δ times on average). Hence δ = (N̄ − 1)·Δ:
1.60 → 18.0 s, 2.00 → 30.0 s, 2.06 → 31.8 s at Δ = 30 s. The seed prints 31.7 s and, in Table 11,
T_opt = 44.9 min for the 4K stage: both follow from its unrounded N̄ (≈ 2.056 and ≈ 1.599, i.e.
δ ≈ 31.7 s and ≈ 17.96 s). With the rounded δ = 18 s, T_opt is 44.98 min.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial

from remedy.domain.durations import human_duration
from remedy.domain.durations import parse_duration as _parse_duration
from remedy.errors import RemedyError


class CadenceError(RemedyError):
    """Inputs the cadence model cannot use (non-positive durations, no failures…)."""


# Checkpoint saves and PromQL windows: a unit is required and zero is refused (remedy.domain.durations, the one
# duration reader; flows/nfs_audit.py reads its window through this name).
parse_duration = partial(_parse_duration, what="duration", positive=True)


def save_duration_from_samples(mean_samples: float, sample_seconds: float = 30.0) -> float:
    """δ = (N̄ − 1)·Δ from the mean number of consecutive samples a write spike spans (see module doc)."""
    if sample_seconds <= 0:
        raise CadenceError(f"sample period must be positive, got {sample_seconds}")
    if mean_samples < 1:
        raise CadenceError(f"a save spans at least one sample; mean samples per spike was {mean_samples}")
    return (mean_samples - 1.0) * sample_seconds


def spike_lengths(in_spike: Sequence[bool]) -> list[int]:
    """Lengths of runs of consecutive True samples (each run = one save)."""
    out, run = [], 0
    for flag in in_spike:
        if flag:
            run += 1
        elif run:
            out.append(run)
            run = 0
    if run:
        out.append(run)
    return out


def save_duration_from_series(in_spike: Sequence[bool], sample_seconds: float = 30.0) -> tuple[float, int, float]:
    """(δ seconds, number of saves, N̄) from a boolean 'write spike' series sampled every `sample_seconds`."""
    runs = spike_lengths(in_spike)
    if not runs:
        raise CadenceError("no checkpoint write spikes in the series; cannot estimate the save duration")
    mean = sum(runs) / len(runs)
    return save_duration_from_samples(mean, sample_seconds), len(runs), mean


def mtbf_hours(failures: int | Iterable[datetime], observed_hours: float) -> float:
    """Job MTBF = observed training hours / failures (seed 002: 1,294 h / 23 = 56.26 h, printed 56.2).

    `failures` is a count or the failure times from the ledger's incidents.
    """
    n = failures if isinstance(failures, int) else len(list(failures))
    if observed_hours <= 0:
        raise CadenceError(f"observed hours must be positive, got {observed_hours}")
    if n <= 0:
        raise CadenceError(
            f"no failures in {observed_hours:g} observed hours: MTBF is unknown (give --mtbf or a longer history)"
        )
    return observed_hours / n


def mtbf_from_failures(failure_times: Iterable[datetime], start: datetime, end: datetime) -> float:
    """MTBF in hours from failure times (e.g. the ledger's incidents' first_seen) seen between start and end.

    Failures outside the window are not counted (they belong to another observation period).
    """
    if end <= start:
        raise CadenceError(f"observation window is empty or reversed: {start.isoformat()} → {end.isoformat()}")
    inside = [t for t in failure_times if start <= t <= end]
    return mtbf_hours(len(inside), (end - start).total_seconds() / 3600.0)


@dataclass(frozen=True, slots=True)
class IntervalCost:
    interval_s: float
    save_overhead: float  # δ/T
    expected_loss: float  # T/(2M)

    @property
    def total(self) -> float:
        return self.save_overhead + self.expected_loss


@dataclass(frozen=True, slots=True)
class CadencePlan:
    delta_s: float
    mtbf_s: float
    optimum: IntervalCost
    current: IntervalCost | None

    @property
    def t_opt_s(self) -> float:
        return self.optimum.interval_s

    @property
    def ratio(self) -> float | None:
        """Current interval / optimum (seed 002: 4K 133.5/44.9 ≈ 3×)."""
        return self.current.interval_s / self.t_opt_s if self.current else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["optimum"]["total"] = self.optimum.total
        if self.current:
            d["current"]["total"] = self.current.total
        d["t_opt_s"], d["ratio"] = self.t_opt_s, self.ratio
        return d

    def summary(self) -> str:
        opt = self.optimum
        text = (
            f"optimum every {human_duration(opt.interval_s)} (δ {human_duration(self.delta_s)}, MTBF {human_duration(self.mtbf_s)}): "
            f"save overhead {opt.save_overhead:.2%} + expected loss {opt.expected_loss:.2%} = {opt.total:.2%}"
        )
        if self.current:
            c = self.current
            text += (
                f"\ncurrent every {human_duration(c.interval_s)} ({self.ratio:.1f}× the optimum): save overhead "
                f"{c.save_overhead:.2%} + expected loss {c.expected_loss:.2%} = {c.total:.2%}"
            )
        return text


def interval_cost(interval_s: float, delta_s: float, mtbf_s: float) -> IntervalCost:
    if interval_s <= 0:
        raise CadenceError(f"checkpoint interval must be positive, got {interval_s}")
    return IntervalCost(interval_s, delta_s / interval_s, interval_s / (2.0 * mtbf_s))


def young_daly(delta_s: float, mtbf_s: float, interval_s: float | None = None) -> CadencePlan:
    """T_opt = √(2δM) and the cost of the current interval beside it (all in seconds)."""
    if delta_s <= 0:
        raise CadenceError(f"save duration δ must be positive, got {delta_s}")
    if mtbf_s <= 0:
        raise CadenceError(f"MTBF must be positive, got {mtbf_s}")
    if delta_s >= mtbf_s:
        raise CadenceError(f"save duration δ ({human_duration(delta_s)}) is not shorter than the MTBF ({human_duration(mtbf_s)})")
    t_opt = math.sqrt(2.0 * delta_s * mtbf_s)
    current = interval_cost(interval_s, delta_s, mtbf_s) if interval_s is not None else None
    return CadencePlan(delta_s, mtbf_s, interval_cost(t_opt, delta_s, mtbf_s), current)
