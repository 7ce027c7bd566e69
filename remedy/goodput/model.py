"""The analytic goodput model: G = (1 − (c + f + q)) × e (seed 000, Crusoe AutoClusters).

c  checkpoint overhead  = checkpoint cost / checkpoint interval
f  failure loss         = failures per period × (interval / 2 + restart loading) / period
q  queue wait           = failures per period × remediation time / period
e  compute efficiency   (your kernels; 1.0 in the worked example)

How the seed-000 worked example computes it, and so how this module does:
- failures per day = 24 h / MTBF (8 h → 3 per day). The MTBF is per hour of *training*
  (Meta measured job interruptions per hour of job runtime), but the article divides the
  whole day by it; we do the same so the published figures come out.
- c counts checkpoints over the whole 24 h (1440 / 30 = 48 → 48 min) and f charges a rollback for
  every failure, also for the hours the job is down. That is a first-order shortcut: the
  simulator (`remedy.goodput.sim`) checkpoints and rolls back only while training and converges on
  `goodput_renewal` instead, higher by about (c + f)·q: 81.97 % vs 81.04 % manual, 92.70 % vs
  92.50 % automated.
- The article's whole percents are the goodput truncated to a whole percent: 81.04 % → "81 %",
  92.5 % → "92 %", 93.4 % → "93 %" (`published_percent`). Its intermediate "≈ 3 %", "12.5 %",
  "7 %" are rounded for prose and not used in the arithmetic.

Plain Python, no Prefect: the CLI, the policy simulator and the benchmark share it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from remedy.audit.cadence import young_daly

MINUTES_PER_DAY = 24 * 60

# Meta's published job MTBF by cluster size (seed 000 quoting Pinckney et al. 2024, arXiv:2410.21680):
# 8 GPUs ≈ 47 days, 1,024 GPUs ≈ 8 h, 16,384 GPUs ≈ 1.8 h. (GPUs, MTBF hours).
META_MTBF_POINTS: tuple[tuple[int, float], ...] = ((8, 47 * 24.0), (1024, 8.0), (16384, 1.8))


@dataclass(frozen=True)
class GoodputBreakdown:
    """Where the time went over `period_minutes`; fractions of the period."""

    goodput: float  # G = (1 − (c + f + q)) × e, in [0, 1]
    checkpoint: float  # c
    failure_loss: float  # f
    queue_wait: float  # q
    efficiency: float  # e
    failures_per_period: float
    checkpoint_minutes: float
    failure_loss_minutes: float
    queue_wait_minutes: float
    period_minutes: float
    mtbf_hours: float
    checkpoint_interval_minutes: float

    @property
    def lost_fraction(self) -> float:
        return self.checkpoint + self.failure_loss + self.queue_wait

    @property
    def lost_minutes(self) -> float:
        return self.checkpoint_minutes + self.failure_loss_minutes + self.queue_wait_minutes

    def as_dict(self) -> dict[str, float]:
        out = asdict(self)
        out["lost_fraction"] = self.lost_fraction
        out["lost_minutes"] = self.lost_minutes
        out["published_percent"] = published_percent(self.goodput)
        return out


def published_percent(goodput: float) -> int:
    """Goodput as the seed-000 article prints it: truncated to a whole percent (92.5 % → 92)."""
    return int(math.floor(goodput * 100 + 1e-9))


def goodput(
    *,
    mtbf_hours: float,
    checkpoint_interval_minutes: float,
    checkpoint_cost_minutes: float,
    remediation_minutes: float,
    restart_loading_minutes: float = 0.0,
    efficiency: float = 1.0,
    period_minutes: float = MINUTES_PER_DAY,
) -> GoodputBreakdown:
    """Goodput of a gang-scheduled job, computed the way seed 000's worked example does.

    `remediation_minutes` is the queue wait per failure (60 manual, 5 automated in seed 000);
    `restart_loading_minutes` is extra rollback cost per failure (seed 002: 31 min median; the
    seed-000 example folds the restart into its 60 minutes, so 0 there). Lost time is capped at
    the period, so goodput stays in [0, 1] even for absurd inputs.
    """
    _positive("mtbf_hours", mtbf_hours)
    _positive("checkpoint_interval_minutes", checkpoint_interval_minutes)
    _positive("period_minutes", period_minutes)
    _non_negative("checkpoint_cost_minutes", checkpoint_cost_minutes)
    _non_negative("remediation_minutes", remediation_minutes)
    _non_negative("restart_loading_minutes", restart_loading_minutes)
    if not 0.0 <= efficiency <= 1.0:
        raise ValueError(f"efficiency must be within [0, 1], got {efficiency}")
    if checkpoint_cost_minutes >= checkpoint_interval_minutes:
        raise ValueError(
            f"checkpoint cost ({checkpoint_cost_minutes:g} min) must be shorter than the interval "
            f"({checkpoint_interval_minutes:g} min)"
        )
    failures = period_minutes / (mtbf_hours * 60.0)
    ckpt_min = period_minutes / checkpoint_interval_minutes * checkpoint_cost_minutes
    loss_min = failures * (checkpoint_interval_minutes / 2.0 + restart_loading_minutes)
    queue_min = failures * remediation_minutes
    c, f, q = (m / period_minutes for m in (ckpt_min, loss_min, queue_min))
    g = max(0.0, 1.0 - (c + f + q)) * efficiency
    return GoodputBreakdown(
        goodput=g,
        checkpoint=c,
        failure_loss=f,
        queue_wait=q,
        efficiency=efficiency,
        failures_per_period=failures,
        checkpoint_minutes=ckpt_min,
        failure_loss_minutes=loss_min,
        queue_wait_minutes=queue_min,
        period_minutes=period_minutes,
        mtbf_hours=mtbf_hours,
        checkpoint_interval_minutes=checkpoint_interval_minutes,
    )


def goodput_renewal(
    *,
    mtbf_hours: float,
    checkpoint_interval_minutes: float,
    checkpoint_cost_minutes: float,
    remediation_minutes: float,
    efficiency: float = 1.0,
) -> float:
    """Long-run goodput without the worked example's first-order shortcuts: what the simulator converges to.

    Failures arrive on the wall clock at λ = 1/MTBF and are remediated one at a time (one on-call
    engineer / one automation queue), so the job is down a fraction ρ = λ·R of the time (M/G/1 busy
    fraction). While it runs, each failure throws away the partial interval since the last checkpoint,
    E[L mod T] = M − T/(e^{T/M} − 1) for exponential run lengths (a bit under T/2), and checkpoints
    cost δ/T of the completed intervals only:

        G = (1 − ρ) · (1 − λ·E[L mod T]) · (1 − δ/T) · e

    Seed 000's arithmetic charges checkpoints and rollbacks also for the hours the job is down, so it
    sits below this by about (c + f)·q: 81.0 % vs 82.0 % manual, 92.5 % vs 92.7 % automated.
    """
    _positive("mtbf_hours", mtbf_hours)
    _positive("checkpoint_interval_minutes", checkpoint_interval_minutes)
    _non_negative("checkpoint_cost_minutes", checkpoint_cost_minutes)
    _non_negative("remediation_minutes", remediation_minutes)
    m, t = mtbf_hours * 60.0, checkpoint_interval_minutes
    rho = remediation_minutes / m
    if rho >= 1:
        return 0.0
    rollback = m - t / math.expm1(t / m)
    return (1 - rho) * (1 - rollback / m) * (1 - checkpoint_cost_minutes / t) * efficiency


def mtbf_hours_for_gpus(gpus: int) -> float:
    """Job MTBF (hours) for a cluster of `gpus`, from Meta's figures interpolated log-log.

    log(MTBF) is linear in log(GPUs) between the published points (8 → 47 d, 1,024 → 8 h,
    16,384 → 1.8 h); outside them the nearest segment's slope is extended. 1,000 GPUs → 8.2 h.
    """
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValueError(f"gpus must be a positive whole number, got {gpus!r}")
    pts = META_MTBF_POINTS
    if gpus <= pts[1][0]:
        (x0, y0), (x1, y1) = pts[0], pts[1]
    else:
        (x0, y0), (x1, y1) = pts[1], pts[2]
    slope = (math.log(y1) - math.log(y0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + slope * (math.log(gpus) - math.log(x0)))


def optimal_checkpoint_interval_minutes(checkpoint_cost_minutes: float, mtbf_hours: float) -> float:
    """Young/Daly optimum T = sqrt(2 · δ · M) in minutes, from `remedy.audit.cadence` (one source of truth).

    Seed 000: 1-min checkpoints, MTBF 8 h → 31 min ("30"); MTBF 10 h → 34.6 min ("35").
    """
    _positive("checkpoint_cost_minutes", checkpoint_cost_minutes)
    _positive("mtbf_hours", mtbf_hours)
    plan = young_daly(checkpoint_cost_minutes * 60.0, mtbf_hours * 3600.0)
    return plan.t_opt_s / 60.0


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be zero or more, got {value!r}")
