"""Signal thresholds: remaps, throttle, PCIe, NVLink, InfiniBand, NotReady (issue 3). Composed into remedy.config.RemedySettings.

Every number `remedy.detect.signals.classify` compares against lives here, and the shipped
Prometheus rules (deployments/prometheus/rules.yml) use the same values in their `for:` clauses;
tests/detect/test_deployments.py checks that the two agree.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class SignalThresholds(BaseModel):
    """Signal thresholds: remaps, throttle, PCIe, NVLink, InfiniBand, NotReady (issue 3)."""

    # --- GPU memory: row remapping ---------------------------------------------------------
    remap_rows_per_bank_limit: int = Field(
        8,
        ge=1,
        description=(
            "Uncorrectable remaps one memory bank can absorb; at this count the driver raises ROW_REMAP_FAILURE "
            "and the GPU must be replaced (NVIDIA GPU memory error management doc; seed 002 §4.1: 8 per bank)."
        ),
    )

    # --- Fail-slow: clock-event (throttle) reasons -----------------------------------------
    throttle_warn_seconds: float = Field(
        120.0,
        ge=0,
        description=(
            "HW slowdown / thermal / power-brake throttle active this long is a warning (watch). Seed 001 lists "
            "HW_SLOWDOWN, HW_THERMAL_SLOWDOWN, HW_POWER_BRAKE among continuous checks; the duration is gpu-remedy's choice."
        ),
    )
    throttle_replace_seconds: float = Field(
        900.0,
        gt=0,
        description=(
            "Throttle persisting this long is fail-slow (seed 002 §2.2: a slow node drags every synchronous step; "
            "seed 001: such nodes are cordoned and drained): replace the node. Duration is gpu-remedy's choice."
        ),
    )

    # --- PCIe ------------------------------------------------------------------------------
    pcie_degraded_seconds: float = Field(
        300.0,
        ge=0,
        description=(
            "PCIe link width or generation below its maximum for this long raises the pcie-degraded alert "
            "(seed 002 Table 1: PCIe downgrading, 6.6% of failures, shows no XID; needs bandwidth monitoring)."
        ),
    )

    # --- NVLink ----------------------------------------------------------------------------
    nvlink_crc_errors_per_second: float = Field(
        100.0,
        gt=0,
        description=(
            "NVLink CRC flit/data error rate at which the GPU is reset (DCGM health watch "
            "DCGM_LIMIT_MAX_NVLINK_CRC_ERROR = 100/s; below it DCGM only warns)."
        ),
    )
    nvlink_replay_recovery_errors: int = Field(
        1,
        ge=1,
        description=(
            "New NVLink replay or recovery errors (per observation interval) that fail the link "
            "(DCGM health watch DCGM_LIMIT_MAX_NVLINK_ERROR = 1)."
        ),
    )

    # --- InfiniBand: cumulative downtime, not flaps ----------------------------------------
    ib_transport_timeout_seconds: float = Field(
        7.0,
        gt=0,
        description=(
            "How long an NCCL IB connection survives a downed port before tearing down: NCCL_IB_TIMEOUT's "
            "effective default with retries, ~7 s (seed 001). Raise it if you tuned NCCL_IB_TIMEOUT up."
        ),
    )
    ib_single_outage_fraction: float = Field(
        1.0,
        gt=0,
        description=(
            "One port-down window longer than this fraction of the transport timeout has killed the run's "
            "connections (seed 001: one long flap crashed a 7-hour run): restart the job from checkpoint now."
        ),
    )
    ib_cumulative_fraction: float = Field(
        1.0,
        gt=0,
        description=(
            "Summed port-down time within the window above this fraction of the transport timeout marks the port "
            "unhealthy (seed 001: count cumulative downtime, not flap count): replace the node."
        ),
    )
    ib_window_seconds: float = Field(
        3600.0,
        gt=0,
        description="Window over which port-down time is summed (seed 001: 'repeated flaps over hours'; 1 h is gpu-remedy's choice).",
    )

    # --- Node liveness ---------------------------------------------------------------------
    node_not_ready_seconds: float = Field(
        300.0,
        gt=0,
        description=(
            "Node NotReady / unreachable this long is replaced; matches Kubernetes' default 300 s "
            "tolerationSeconds for node.kubernetes.io/not-ready and unreachable, after which pods are evicted anyway."
        ),
    )

    # --- XID recurrence --------------------------------------------------------------------
    xid_recurrence_limit: int = Field(
        2,
        ge=2,
        description=(
            "Occurrences of the same XID on the same GPU (within the receiver's dedup history) at which the catalog's "
            "recurrence path applies instead of retrying (seed 002 §4.3.5: stop retrying XID 79 and escalate; one chain "
            "failed 30 times in a row)."
        ),
    )

    @model_validator(mode="after")
    def _throttle_order(self) -> SignalThresholds:
        if self.throttle_replace_seconds < self.throttle_warn_seconds:
            raise ValueError(
                "signals.throttle_replace_seconds must be >= signals.throttle_warn_seconds "
                f"(got {self.throttle_replace_seconds} < {self.throttle_warn_seconds})"
            )
        return self

    @property
    def ib_single_outage_seconds(self) -> float:
        """One outage at least this long trips the IB rule."""
        return self.ib_transport_timeout_seconds * self.ib_single_outage_fraction

    @property
    def ib_cumulative_seconds(self) -> float:
        """Port-down time summed over the window at least this long trips the IB rule."""
        return self.ib_transport_timeout_seconds * self.ib_cumulative_fraction
