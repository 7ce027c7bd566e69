"""What a simulated run reports: goodput with its c/f/q split and the operator-facing incident stats."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from remedy.goodput.sim import FleetSim


@dataclass
class Accounts:
    """Minutes of wall-clock time by where they went, plus counters."""

    useful: float = 0.0
    checkpoint: float = 0.0  # c
    rollback: float = 0.0  # f: work since the last checkpoint, thrown away
    loading: float = 0.0  # f: checkpoint reload before training resumes
    down: float = 0.0  # q: job waiting for nodes / remediation
    failed_retry: float = 0.0  # q: restart attempts that died on a still-faulty node
    short: float = 0.0  # q: an elastic job training short, the missing nodes' share
    job_failures: int = 0
    failed_attempts: int = 0
    rack_events: int = 0
    spares_consumed: int = 0
    spare_shortfalls: int = 0
    min_spares: int = 10**9
    in_place_fixes: int = 0
    retired: int = 0
    breaker_holds: int = 0
    sent_to_repair: int = 0
    repair_reasons: dict = field(default_factory=dict)  # why a node went to repair → count
    approvals: int = 0  # holds a person answered with a yes (spare reserve, capacity budget)
    warnings: int = 0  # early warnings raised (true and false)
    warning_swaps: int = 0  # nodes swapped at a checkpoint on a warning
    failures_avoided: int = 0  # warned failures that never hit the job (the node was already swapped out)
    fix_attempts: dict = field(default_factory=dict)  # in-place fix → attempts

    @property
    def total(self) -> float:
        return self.useful + self.checkpoint + self.rollback + self.loading + self.down + self.failed_retry + self.short


@dataclass
class SimResult:
    scenario: str
    policy: str
    seed: int
    days: float
    goodput: float  # (1 − (c + f + q)) × e
    checkpoint: float  # c
    failure_loss: float  # f (rollback + reload)
    queue_wait: float  # q (waiting for nodes + failed retries)
    efficiency: float
    incidents: int
    job_failures: int
    rack_events: int
    downtime_p50_minutes: float | None
    downtime_p90_minutes: float | None
    downtime_mean_minutes: float | None
    failed_retry_attempts: int
    failed_retry_job_hours: float  # wall-clock hours the job spent in restarts that died
    failed_retry_gpu_hours: float  # the same × GPUs in the job
    retry_chains: int
    retry_chain_success: float | None
    spares_consumed: int
    spare_shortfalls: int
    min_spares_in_pool: int
    in_place_fixes: int
    nodes_retired: int
    breaker_holds: int
    nodes_to_repair: int
    repair_reasons: dict[str, int]
    approvals: int
    warnings: int
    warning_swaps: int
    failures_avoided: int
    lemons_in_fleet: int  # ground truth the policy never sees
    lemons_flagged: int  # nodes the policy's lemon scoring picked for retirement
    lemons_flagged_correctly: int
    missing_domain: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    minutes: dict[str, float] = field(default_factory=dict)
    downtimes_minutes: list[float] = field(default_factory=list, repr=False)

    def as_dict(self, *, with_samples: bool = False) -> dict:
        out = asdict(self)
        if not with_samples:
            out.pop("downtimes_minutes")
        return out


def summarise(sim: FleetSim, wall_seconds: float) -> SimResult:
    acc, sc = sim.acc, sim.sc
    total = acc.total or 1.0
    horizon = sim.clock.now
    downtimes = [
        (inc.resumed_at if inc.resumed_at is not None else horizon) - inc.start
        for inc in sim.incidents
        if inc.slot is not None
    ]
    arr = np.asarray(downtimes, dtype=float)
    chains = [inc for inc in sim.incidents if inc.chain_success is not None]
    flagged: set[int] = getattr(sim.policy, "lemons", set())
    # hot spares' GPUs are in the denominator (issue 34): every account is the job's nodes' share of the fleet's time,
    # and the hot spares' share is capacity kept waiting (q)
    size = sc.training_nodes / (sc.training_nodes + sc.hot_spares)
    hot = acc.total * (1.0 - size)
    c = acc.checkpoint * size / total
    f = (acc.rollback + acc.loading) * size / total
    q = ((acc.down + acc.failed_retry + acc.short) * size + hot) / total
    return SimResult(
        scenario=sc.name,
        policy=getattr(sim.policy, "name", type(sim.policy).__name__),
        seed=sim.seed,
        days=sc.days,
        goodput=max(0.0, min(1.0, acc.useful * size / total)) * sc.efficiency,
        checkpoint=c,
        failure_loss=f,
        queue_wait=q,
        efficiency=sc.efficiency,
        incidents=len(sim.incidents),
        job_failures=acc.job_failures,
        rack_events=acc.rack_events,
        downtime_p50_minutes=float(np.percentile(arr, 50)) if arr.size else None,
        downtime_p90_minutes=float(np.percentile(arr, 90)) if arr.size else None,
        downtime_mean_minutes=float(arr.mean()) if arr.size else None,
        failed_retry_attempts=acc.failed_attempts,
        failed_retry_job_hours=acc.failed_retry / 60.0,
        failed_retry_gpu_hours=acc.failed_retry / 60.0 * sc.job_gpus,
        retry_chains=len(chains),
        retry_chain_success=(sum(1 for i in chains if i.chain_success) / len(chains)) if chains else None,
        spares_consumed=acc.spares_consumed,
        spare_shortfalls=acc.spare_shortfalls,
        min_spares_in_pool=min(acc.min_spares, sc.spares),
        in_place_fixes=acc.in_place_fixes,
        nodes_retired=acc.retired,
        breaker_holds=acc.breaker_holds,
        nodes_to_repair=acc.sent_to_repair,
        repair_reasons=dict(acc.repair_reasons),
        approvals=acc.approvals,
        warnings=acc.warnings,
        warning_swaps=acc.warning_swaps,
        failures_avoided=acc.failures_avoided,
        lemons_in_fleet=int(sim.lemon.sum()),
        lemons_flagged=len(flagged),
        lemons_flagged_correctly=sum(1 for n in flagged if sim.lemon[n]),
        missing_domain=list(getattr(sim.policy, "missing_domain", [])),
        wall_seconds=wall_seconds,
        minutes={
            "useful": acc.useful * size,
            "checkpoint": acc.checkpoint * size,
            "rollback": acc.rollback * size,
            "loading": acc.loading * size,
            "down": acc.down * size,
            "failed_retry": acc.failed_retry * size,
            "short": acc.short * size,
            "hot_spare": hot,
            "total": acc.total,
        },
        downtimes_minutes=downtimes,
    )
