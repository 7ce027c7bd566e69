"""Circuit breaker, in-place fix ladder and spare selection settings (issue 4). Composed into RemedySettings.

Seeds cited in the defaults: 000 = Crusoe AutoClusters (correlated failures: "several nodes in the same rack fail
within a minute" means a switch, PDU or config push; 8-GPU MTBF ≈ 47 days; ~4-5 min replacement from a warm pool;
spares need topological diversity and regular cycling), 002 = Lablup report §4.3 (retry delay 10 min, proposed
exponential backoff 10 → 20 → 40 min; XID-based branching; XID 79 = stop retrying; 3 spares for 63 nodes;
checkpoint load median 31 min).

The capacity budget (max nodes / percent out of service) is NOT here: it lives in `remedy.config.CapacityBudget`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ScopeLimit(BaseModel):
    """One failure domain's breaker: trips when more distinct nodes fail in the window than it allows."""

    window_seconds: float = Field(60.0, gt=0, description="Sliding window over which failures in the scope are counted.")
    max_failures: int = Field(
        2, ge=1, description="Most distinct failed nodes in the window automation will act on; one more trips the breaker."
    )
    max_percent: float = Field(
        50.0,
        gt=0,
        le=100,
        description="Same limit as a percentage of the scope's GPU nodes (rounded down, never below 1 so a single "
        "failure always acts); the stricter of count and percent wins.",
    )
    cooldown_seconds: float | None = Field(
        3600.0,
        gt=0,
        description="After this long with no new failure in the scope an open breaker goes half-open and lets ONE "
        "remediation through as a probe; null = only a person may re-close it (NVSentinel behaviour).",
    )


class BreakerSettings(BaseModel):
    """Circuit breaker windows and caps, one per failure domain (seed 000: correlation detection)."""

    rack: ScopeLimit = Field(
        default_factory=ScopeLimit,
        description="Per rack. Seed 000: several nodes of one rack failing within a minute is a switch/PDU/config "
        "problem, so 2 nodes in 60 s are acted on and a third pauses the rack.",
    )
    switch: ScopeLimit = Field(
        default_factory=ScopeLimit,
        description="Per leaf switch (seed 000: 'a failing network switch can disconnect dozens of nodes').",
    )
    pdu: ScopeLimit = Field(
        default_factory=ScopeLimit,
        description="Per power distribution unit (seed 000: 'a PDU problem can drop an entire rack').",
    )
    cluster: ScopeLimit = Field(
        default_factory=lambda: ScopeLimit(
            window_seconds=600.0, max_failures=6, max_percent=5.0, cooldown_seconds=None
        ),
        description="Whole fleet (seed 000: 'a bad driver update pushed fleet-wide'). At seed 000's 16,384-GPU MTBF of "
        "1.8 h about 0.09 independent failures land in 10 min, so 6 is far beyond chance; a person must re-close it. "
        "Failures already held by a tripped rack/switch/PDU breaker do not count here.",
    )
    spare_reserve: int = Field(
        1,
        ge=0,
        description="Never let automation take the ready spare pool below this many; the last ones wait for a person "
        "(seed 002 ran 63 nodes on 3 spares: an emptied pool starved 60-node gang jobs).",
    )

    def limit(self, kind: str) -> ScopeLimit:
        """The limit for a scope kind: cluster, rack, switch or pdu."""
        if kind not in ("cluster", "rack", "switch", "pdu"):
            raise ValueError(f"unknown breaker scope kind {kind!r} (expected cluster, rack, switch or pdu)")
        limit: ScopeLimit = getattr(self, kind)
        return limit


class LadderSettings(BaseModel):
    """In-place fix ladder: backoff, attempt caps, recurrence window and per-step timeouts."""

    restart_backoff_minutes: float = Field(
        10.0, gt=0, description="Wait before the first job restart (seed 002 §4.3.2: FastTrack's 10-min retry delay)."
    )
    restart_backoff_factor: float = Field(
        2.0, ge=1.0, description="Each further restart waits this much longer (seed 002 §4.3.5: 10 → 20 → 40 min)."
    )
    restart_max_attempts: int = Field(
        3,
        ge=1,
        le=20,
        description="Restarts on the RESTART_APP rung before escalating (seed 002 §4.3.5: one chain failed 30 times in "
        "a row and only burned GPU-hours).",
    )
    recurrence_window_hours: float = Field(
        24.0,
        gt=0,
        description="The same XID on the same GPU again within this window means the last fix did not hold: go to the "
        "next rung instead of repeating it.",
    )
    stop_retrying_xids: list[int] = Field(
        default_factory=lambda: [79],
        description="XIDs whose recurrence on the same node (any GPU) goes straight to replace (seed 002 §4.3.5: "
        "XID 79, fallen off the bus: stop retrying).",
    )
    restart_app_timeout_minutes: float = Field(
        60.0, gt=0, description="Time for a restarted job to train again (seed 002 §4.2.3: checkpoint load median 31 min)."
    )
    replace_first: bool = Field(
        True,
        description="When a fault could be fixed in place (reset, reboot) and a spare is ready, compare the options by "
        "expected job downtime (remedy.remediate.choice) and, when replacing costs the job less, give it the spare "
        "at once and fix the failed node off the critical path (recover-node: fix, burn-in, back to the spares).",
    )
    reset_gpu_timeout_minutes: float = Field(10.0, gt=0, description="Drain, nvidia-smi -r and verify one GPU.")
    reboot_timeout_minutes: float = Field(30.0, gt=0, description="Drain, reboot, wait Ready and verify.")
    replace_timeout_minutes: float = Field(
        15.0, gt=0, description="Swap in a warm spare (seed 000: ~5 min end to end; 3x margin)."
    )
    open_loop_pools: list[str] = Field(
        default_factory=list,
        description="Node pools (node-group label, else instance type; '*' = all) where gpu-remedy only decides: it "
        "emits remedy.remediation.proposed and waits for POST /v1/remediations/{incident}/execute before acting "
        "(seed 000: teams with their own break-fix process keep control).",
    )


class SpareSettings(BaseModel):
    """Spare pool: freshness window, sizing risk, diversity, selection and preemption."""

    validation_freshness_hours: float = Field(
        72.0,
        gt=0,
        description="A spare validated longer ago than this needs validation before it may carry work (seed 000: "
        "spares degrade and need regular cycling; the period is our assumption).",
    )
    validate_on_promote: bool = Field(
        False,
        description="Allow promoting a stale spare if it is validated on the way in (slower; seed 000 counts on "
        "pre-validated spares for 5-min replacement).",
    )
    node_mtbf_hours: float = Field(
        47 * 24.0,
        gt=0,
        description="Mean time between failures of one 8-GPU node (seed 000, Meta's data: ≈ 47 days).",
    )
    replacement_lead_time_hours: float = Field(
        48.0,
        gt=0,
        description="Time until a consumed spare is replaced by a repaired or new node (repair/RMA turnaround; assumption).",
    )
    sizing_risk: float = Field(
        0.01,
        gt=0,
        lt=1,
        description="Accepted probability that failures during one lead time outnumber the pool (Poisson model).",
    )
    max_share_per_domain: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Warn when one rack, switch or PDU holds more than this share of the ready spares (seed 000: "
        "'if all your spares are in one rack and that rack loses power, your backup capacity is gone').",
    )
    recently_fixed_days: float = Field(
        14.0,
        ge=0,
        description="A spare whose fault was fixed in place (reset, reboot) within this many days is used after the "
        "spares with a clean record: a lemon passes the fix and the checks idle and fails again under load (seed 000; "
        "the same span as lemon.recurrence_gap_days). 0 = no preference.",
    )
    hot_spares: int = Field(
        0, ge=0,
        description="At most this many warm spares are kept hot: in the elastic training job's pool, labelled "
        "remedy.io/spare-role=hot, so a failure swaps in seconds (remedy.spares.hot sizes the pool by what a swap "
        "saves against the idle node; their GPUs count in the job's goodput denominator). 0 = none.",
    )
    preempt_when_no_spare: bool = Field(
        True,
        description="When no spare is ready for a failed node of the gang-scheduled job, plan to free a healthy node "
        "by preempting lower-priority work (below preempt_below_priority) rather than leave the job unable to start "
        "(seed 002 §4.3.5); false = shrink an elastic job or escalate, as before.",
    )
    preempt_below_priority: int = Field(
        100,
        description="Only workloads with a priority below this may be preempted to free nodes for a gang job "
        "(seed 002 §4.3.5: single-node sessions blocked 60-node training).",
    )
    preemption_requires_approval: bool = Field(
        True, description="A person must approve each preemption plan before it is carried out."
    )
