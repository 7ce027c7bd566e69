"""Lemon scoring, fault isolation and early-warning thresholds (issue 6). Composed into remedy.config.RemedySettings.

Seeds cited in the defaults: 000 = Crusoe AutoClusters (lemon nodes; Meta's large-job failure rate 14% → 4% once
lemons were removed), 001 = Databricks health checks (InfiniBand cumulative downtime vs NCCL_IB_TIMEOUT ≈ 7 s),
002 = Lablup report (63 nodes, 73 days; precursor signals vs the 59 peers, 30 s samples; gpu124's correctable remaps
> 200 in one week; top 3 nodes held > 50% of exclusions), 004 = bisection fault isolation (minimum node count).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class IsolationSettings(BaseModel):
    """Bisection fault isolation (seed 004): how batches are formed and how timeouts are treated."""

    min_nodes: int = Field(
        1,
        ge=1,
        description="Smallest batch a smoke test may run on when the job does not say; below it a job can OOM and "
        "look like a hardware fault (seed 004 'Minimum Required Nodes').",
    )
    first_round_batches: int = Field(
        4,
        ge=2,
        description="Disjoint batches the pool is split into in round 1. 'Every batch diverges' means user code only "
        "if there are several batches: with 4, two bad nodes can never fake a code verdict (seed 004).",
    )
    max_bad_nodes: int = Field(
        8,
        ge=1,
        description="Most bad nodes one isolation pursues. 'Every batch diverges' is the code verdict only once more "
        "than this many disjoint batches diverge and none trained normally: fewer could each hold a bad node "
        "(with 4 scattered bad nodes, round 1's 4 batches all diverge in ~8% of placements). More diverging batches "
        "than this, with some healthy ones, end inconclusive with those batches held, never released.",
    )
    max_retests: int = Field(
        1,
        ge=0,
        description="How many times a timed-out (inconclusive) batch is retested before it is reported as inconclusive.",
    )


class WarningScanSettings(BaseModel):
    """The scheduled early-warning scan (flows/warning_scan.py): detector inputs from Prometheus, findings to
    Alertmanager as GpuEarlyWarning alerts. Remap acceleration is a Prometheus rule and is not scanned here."""

    prometheus_url: str | None = Field(
        None, description="Prometheus the scan reads (HTTP API). None: the cluster's one Prometheus, nfs.prometheus_url.")
    alertmanager_url: str = Field(
        "http://127.0.0.1:9093",
        description="Alertmanager the scan posts its findings to (POST /api/v2/alerts): the intake every other alert "
        "takes, so grouping, silences and the receiver's de-duplication apply.")
    receiver_url: str | None = Field(
        None,
        description="Post findings straight to gpu-remedy's receiver (its alerts webhook URL, with receiver.token) "
        "instead of Alertmanager: for a stack that runs none (`remedy up` sets it). Alertmanager's grouping and "
        "silences then do not apply.")
    window_minutes: float = Field(
        60.0, gt=0, le=24 * 60,
        description="How far back each scan reads; at least signals.ib_window_seconds so a port's down time in the "
        "window is whole.")
    step_seconds: float = Field(
        30.0, gt=0, description="Sample spacing for the peer and straggler detectors (seed 002 sampled every 30 s).")
    ib_step_seconds: float = Field(
        5.0, gt=0, description="Sample spacing for port states: the resolution of the summed down time (the "
        "InfinibandCumulativeDowntime rule uses 5 s too).")
    peer_queries: dict[str, str] = Field(
        default_factory=lambda: {
            # thermal: a GPU running hotter than the same job's other nodes (cooling, thermal interface) throttles
            # and then faults; max over the node's GPUs, compared across the job's nodes at the same time
            "gpu_temperature_max_c": "max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)",
            # seed 002's precursors (remedy.warn.PEER_SIGNALS), node_exporter
            "node_intr_total": "rate(node_intr_total[1m]) * 30",
            "node_procs_running": "node_procs_running",
            "node_vmstat_pgpgout": "rate(node_vmstat_pgpgout[1m]) * 30",
            "node_mountstats_nfs_operations_response_time_seconds_total:GETATTR":
                'sum by (instance) (rate(node_mountstats_nfs_operations_response_time_seconds_total'
                '{operation="GETATTR"}[1m])) * 30',
        },
        description="Metric name → PromQL giving one series per node (label Hostname, node or instance), compared "
        "by the peer-outlier detector across the nodes that run the job (never with idle or spare nodes).")
    step_time_query: str | None = Field(
        None,
        description="PromQL for each node's own step time in seconds (one series per node), if the job exports one; "
        "None: the straggler detector is not scanned (there is no standard metric for it).")
    alert_minutes: float = Field(
        30.0, gt=0,
        description="endsAt of a posted warning: this long after the scan, unless a later scan posts it again; a "
        "warning no scan repeats resolves by itself (at least twice the scan interval).")


class EarlyWarningSettings(BaseModel):
    """Warning-level detectors: peer outliers, remap acceleration, stragglers, InfiniBand downtime."""

    peer_z_threshold: float = Field(
        3.5,
        gt=0,
        description="Robust z-score (0.6745·|x − median| / MAD across the job's nodes) above which a sample is an "
        "outlier; 3.5 is Iglewicz & Hoaglin's cut-off. Seed 002 compares each node with its 59 peers.",
    )
    peer_mad_floor_fraction: float = Field(
        0.05,
        ge=0,
        description="MAD is floored at this fraction of |median| so a near-identical fleet does not turn noise into "
        "huge z-scores.",
    )
    peer_min_nodes: int = Field(
        8, ge=3, description="Fewest nodes in a job at one timestamp for a peer comparison to mean anything."
    )
    persist_k: int = Field(
        3, ge=1, description="A node must be an outlier in at least k of the last n samples (one spike is not an alarm)."
    )
    persist_n: int = Field(5, ge=1, description="Length of the persistence window in samples (seed 002 samples every 30 s).")
    remap_recent_days: float = Field(
        7.0, gt=0, description="Recent window for the correctable-remap rate (seed 002: gpu124 went > 200 in one week)."
    )
    remap_baseline_days: float = Field(
        28.0, gt=0, description="Window before the recent one that sets the GPU's own baseline remap rate."
    )
    remap_min_increase: int = Field(
        40,
        ge=1,
        description="Fewest new correctable remaps in the recent window to warn; well under seed 002's 200/week so the "
        "warning comes days before the GPU vanished (254 total).",
    )
    remap_acceleration_ratio: float = Field(
        4.0, gt=1, description="Recent weekly rate must be at least this multiple of the baseline weekly rate."
    )
    remap_baseline_floor_per_week: float = Field(
        2.0,
        gt=0,
        description="Baseline weekly rate is at least this, so a GPU with no history does not have an infinite ratio.",
    )
    straggler_slowdown: float = Field(
        0.15,
        gt=0,
        description="A node's step time this fraction above the job median marks it slow (fail-slow: one slow node "
        "stalls every synchronous step; seed 002 §fail-slow).",
    )
    straggler_min_nodes: int = Field(4, ge=2, description="Fewest nodes reporting a step for a median to be used.")
    ib_warn_fraction: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Warn when a port's summed down time within signals.ib_window_seconds reaches this fraction of "
        "signals.ib_transport_timeout_seconds (~7 s, seed 001). The timeout and window are one fact each and live in "
        "SignalThresholds; at 1.0 the signals rule replaces the node, this warns before that.",
    )
    # Acting on a warning (triage → swap at a checkpoint boundary; remedy.remediate.choice.choose_on_warning)
    act_precision: float = Field(
        2 / 3,
        gt=0,
        le=1,
        description="Share of warnings a failure follows, assumed until the ledger has a detector's own record "
        "(remedy.warn.record: warnings left to run and whether a failure followed within precision_window_hours; "
        "this counts as 10 of them). 2/3 is the shipped scenarios' assumption: half as many false alarms as true ones.",
    )
    precision_window_hours: float = Field(
        24.0,
        gt=0,
        description="A warning left to run counts as right when the node failed within this long after it, as a false "
        "alarm once this long passed without a failure (an assumption: a later failure is its own warning's).",
    )
    act_lead_minutes: float = Field(
        60.0, gt=0, description="How long before the failure a warning comes (the shipped scenarios assume 1 h)."
    )
    job_mtbf_hours: float | None = Field(
        None,
        gt=0,
        description="How often the job stops for any reason. A warned node whose job stops first is swapped while the "
        "job is down anyway, so a short MTBF makes waiting cheaper (meta-16k: 1.8 h). None: the warned failure is "
        "counted in full.",
    )
    scan: WarningScanSettings = Field(
        default_factory=WarningScanSettings,
        description="The scheduled warning-scan flow: where it reads the detectors' inputs and posts its findings.")
    checkpoint_wait_margin_minutes: float = Field(
        5.0,
        gt=0,
        description="How much longer than the job's own cadence (or one checkpoint's cost, after a request) a swap "
        "waits for the checkpoint boundary; past it, nothing is swapped and the warning says why.",
    )

    @model_validator(mode="after")
    def _k_le_n(self) -> EarlyWarningSettings:
        if self.persist_k > self.persist_n:
            raise ValueError(f"persist_k ({self.persist_k}) must not exceed persist_n ({self.persist_n})")
        return self


class LemonSettings(BaseModel):
    """Lemon scoring, fault isolation and early-warning thresholds (issue 6)."""

    lookback_days: float = Field(
        73.0, gt=0, description="History window scored for lemons (seed 002 analysed 73 days of 60-node sessions)."
    )
    recurrence_gap_days: float = Field(
        14.0,
        gt=0,
        description="A fail → passing validation → fail cycle counts only if the second failure comes within this many "
        "days of the pass (the lemon signature: passes checks idle, fails again under load; seed 000).",
    )
    recurrence_min_cycles: int = Field(
        2,
        ge=1,
        description="Cycles needed for the recurrence signal to fire. Two: three failures, each within the gap of the "
        "check that let the node back. The signal never decides alone (min_signals), and every further cycle is one "
        "more failure of the whole job (three cycles left 4 of 106 lemons flagged in 110 days of meta-16k).",
    )
    rate_alpha: float = Field(
        0.001,
        gt=0,
        lt=1,
        description="One-sided Poisson p-value below which a node's incident count is in excess of the fleet rate × its "
        "exposure. ≈ 0.05 / 63 nodes (seed 002's fleet), a Bonferroni correction for testing every node.",
    )
    check_confirms_hours: float = Field(
        48.0,
        ge=0,
        description="A failed health check within this many hours after a counted incident on the node confirms that "
        "incident (a post-fix verify) rather than counting as a failure of its own: one fault, one failure.",
    )
    rate_min_incidents: int = Field(
        3, ge=1, description="Fewest incidents for the excess-rate signal (one or two are never a pattern)."
    )
    repeat_xid_min: int = Field(
        3, ge=2, description="Same XID on the same GPU this many times fires the repeat signal."
    )
    exclusion_share_min: float = Field(
        0.10,
        gt=0,
        le=1,
        description="A node holding this share of all exclusions fires the exclusion signal (seed 002: top 3 of 63 "
        "held > 50%; a fair share is 1/63 ≈ 1.6%).",
    )
    exclusion_count_deliberate: bool = Field(
        False,
        description="Count deliberate operator isolation in exclusion shares. Off: seed 002 §4.3.1 found most top "
        "exclusions were operators isolating nodes on purpose, a decision already taken rather than new evidence.",
    )
    exclusion_min_total: int = Field(
        10, ge=1, description="Fewest exclusions fleet-wide before shares are meaningful."
    )
    correlated_min_nodes: int = Field(
        4,
        ge=2,
        description="Incidents on this many distinct nodes within correlated_window_minutes are one shared event "
        "(rack power, switch, config push; seed 000) and count against no single node.",
    )
    correlated_window_minutes: float = Field(
        15.0, gt=0, description="Time window that groups incidents into one correlated event."
    )
    min_signals: int = Field(
        2,
        ge=1,
        le=4,
        description="Independent signals (recurrence, excess rate, repeat XID, exclusion share) needed for a lemon "
        "candidate. Any one alone also fits a busy or deliberately isolated healthy node (seed 002 §4.3.1).",
    )
    retirement_budget: int = Field(
        2,
        ge=0,
        description="Most nodes retired per retirement window: retiring too fast drains the spare pool (seed 000; seed 002 "
        "had only 3 spares).",
    )
    retirement_window_days: float = Field(7.0, gt=0, description="Sliding window of the retirement budget.")
    isolation: IsolationSettings = Field(
        default_factory=IsolationSettings, description="Bisection fault isolation (seed 004)."
    )
    early_warning: EarlyWarningSettings = Field(
        default_factory=EarlyWarningSettings, description="Warning-level detectors (seeds 001, 002)."
    )
