"""Burn-in and spare health-check criteria (issue 5). Composed into remedy.config.RemedySettings.

Every pass/fail threshold of the node probe and of the health-check parsers lives here, so a
burn-in decision can always be traced to one number in one place.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

KIB, MIB, GIB = 1024, 1024**2, 1024**3


class NcclSizeCriterion(BaseModel):
    """Pass criterion for one all-reduce payload size (seed 001's table, one row)."""

    size_bytes: int = Field(gt=0, description="Payload size in bytes as all_reduce_perf prints it (1 KB = 1024).")
    max_p95_latency_us: float | None = Field(
        None, gt=0, description="Fail if the p95 time for this size is above this many microseconds (None: not judged)."
    )
    min_busbw_gbps: float | None = Field(
        None, gt=0, description="Fail if the bus bandwidth for this size is below this many GB/s (None: not judged)."
    )


# Seed 001 (Databricks gpu-monitor), all-reduce health-check table: KB sizes are judged on p95
# latency (LL/LL128 protocols), MB sizes on both, large sizes on BusBW.
SEED_001_NCCL_TABLE = [
    NcclSizeCriterion(size_bytes=1 * KIB, max_p95_latency_us=250),
    NcclSizeCriterion(size_bytes=1 * MIB, max_p95_latency_us=500),
    NcclSizeCriterion(size_bytes=16 * MIB, max_p95_latency_us=750, min_busbw_gbps=50),
    NcclSizeCriterion(size_bytes=128 * MIB, min_busbw_gbps=150),
    NcclSizeCriterion(size_bytes=256 * MIB, min_busbw_gbps=225),
    NcclSizeCriterion(size_bytes=1 * GIB, min_busbw_gbps=250),
    NcclSizeCriterion(size_bytes=2 * GIB, min_busbw_gbps=350),
]


class NcclCriteriaProfile(BaseModel):
    """The criteria table for one (GPU model, fabric) pair; "*" matches any."""

    gpu_model: str = Field("*", description="GPU product name as NVML reports it (e.g. 'NVIDIA H100 80GB HBM3'), or '*'.")
    fabric: str = Field("*", description="Fabric name as configured for the pool (e.g. 'infiniband-ndr'), or '*'.")
    sizes: list[NcclSizeCriterion] = Field(description="Per-size pass criteria; sizes not listed are reported, not judged.")


class ProbeThresholds(BaseModel):
    """What the NVML node probe judges, and the fleet baseline it compares versions against."""

    driver_version: str | None = Field(None, description="Fleet baseline driver version; None: reported, not judged.")
    vbios_version: str | None = Field(None, description="Fleet baseline VBIOS version; None: reported, not judged.")
    inforom_version: str | None = Field(None, description="Fleet baseline InfoROM image version; None: not judged.")
    gsp_firmware_version: str | None = Field(None, description="Fleet baseline GSP firmware version; None: not judged.")
    xid_wait_seconds: float = Field(
        2.0, ge=0, le=600, description="How long the probe listens for critical XID events (nvmlEventSetWait)."
    )
    temperature_warn_c: int = Field(80, description="Warn at or above this idle GPU temperature (°C).")
    temperature_fail_c: int = Field(
        87, description="Fail at or above this temperature (°C); H100 SXM starts HW slowdown near 87-90 °C."
    )
    power_warn_watts: float | None = Field(
        700.0, gt=0, description="Warn when idle power draw exceeds this (H100 SXM board limit 700 W); None: off."
    )
    correctable_remaps_warn: int = Field(
        100,
        ge=1,
        description="Warn at this many correctable row remaps (seed 002: gpu124 climbed past 200 in a week, then vanished).",
    )
    uncorrectable_remaps_warn: int = Field(1, ge=1, description="Warn at this many uncorrectable row remaps.")
    uncorrectable_remaps_fail: int = Field(
        8, ge=1, description="Fail at this many uncorrectable remaps (seed 002: 8 in one bank raises ROW_REMAP_FAILURE)."
    )
    retired_pages_fail: int = Field(
        60, ge=1, description="Fail at this many retired pages (SBE+DBE; pre-Ampere GPUs retire at most 64)."
    )
    ecc_volatile_uncorrected_fail: int = Field(1, ge=1, description="Fail at this many volatile uncorrected ECC errors.")
    ecc_volatile_corrected_warn: int = Field(1000, ge=1, description="Warn at this many volatile corrected ECC errors.")
    fail_clock_events: list[str] = Field(
        default_factory=lambda: ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"],
        description="Clock-event (throttle) reasons that fail a node (seed 001: HW_SLOWDOWN, HW_THERMAL_SLOWDOWN, HW_POWER_BRAKE).",
    )
    warn_clock_events: list[str] = Field(
        default_factory=lambda: ["sw_thermal_slowdown"], description="Clock-event reasons that only warn."
    )
    pcie_gen_below_max: Literal["fail", "warn"] = Field(
        "fail",
        description="Verdict when the PCIe link runs below its max generation (seed 002: PCIe downgrades are 6.6% "
        "of faults and raise no XID). Use 'warn' if nodes are probed idle with ASPM downshifting the link.",
    )
    nvlink_errors_warn: int = Field(100, ge=1, description="Warn at this many NVLink replay+recovery+CRC errors per GPU.")

    @model_validator(mode="after")
    def _warn_below_fail(self) -> ProbeThresholds:
        _ordered(self, ("temperature_warn_c", "temperature_fail_c"), ("uncorrectable_remaps_warn", "uncorrectable_remaps_fail"))
        return self


def _ordered(model: BaseModel, *pairs: tuple[str, str]) -> None:
    """A warn level above its fail level would hide the warning; refuse such a config."""
    for warn, fail in pairs:
        if getattr(model, warn) > getattr(model, fail):
            raise ValueError(f"{warn} ({getattr(model, warn)}) must not exceed {fail} ({getattr(model, fail)})")


class IbThresholds(BaseModel):
    """InfiniBand port state and sysfs error counters (seed 001: cumulative port downtime kills runs)."""

    expected_rate_gbps: int = Field(400, gt=0, description="Fail a port whose ibstat Rate is below this (NDR = 400).")
    link_layer: str | None = Field("InfiniBand", description="Expected link layer; None accepts Ethernet (RoCE) too.")
    symbol_error_warn: int = Field(1, ge=1, description="Warn at this many symbol errors on a port.")
    symbol_error_fail: int = Field(100, ge=1, description="Fail at this many symbol errors on a port.")
    link_downed_fail: int = Field(
        1, ge=1, description="Fail at this many link_downed events: on a node under validation any flap is one too many (seed 001)."
    )
    link_error_recovery_fail: int = Field(10, ge=1, description="Fail at this many link error recoveries on a port.")
    port_rcv_errors_warn: int = Field(1, ge=1, description="Warn at this many port receive errors.")
    port_rcv_errors_fail: int = Field(100, ge=1, description="Fail at this many port receive errors.")

    @model_validator(mode="after")
    def _warn_below_fail(self) -> IbThresholds:
        _ordered(self, ("symbol_error_warn", "symbol_error_fail"), ("port_rcv_errors_warn", "port_rcv_errors_fail"))
        return self


class StressThresholds(BaseModel):
    """GPU stress Job summary criteria."""

    min_duration_seconds: float = Field(60.0, gt=0, description="A stress run shorter than this proves nothing: fail.")
    max_temperature_c: int = Field(87, description="Fail when a GPU's max temperature under load reaches this (°C).")


class FioThresholds(BaseModel):
    """Checkpoint-storage throughput per node, from `fio --output-format=json`."""

    min_write_gbps: float = Field(
        0.67, gt=0, description="Per-node write GB/s floor: seed 002 writes ~20 GB per node per checkpoint in <= 30 s."
    )
    min_read_gbps: float = Field(
        1.0, gt=0, description="Per-node read GB/s floor so a restart reloads its ~20 GB checkpoint shard (seed 002) in 20 s."
    )


GPU_REMEDY_IMAGE = "ghcr.io/gpu-remedy/gpu-remedy:0.1.0"  # Containerfile: remedy probe, ibstat
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"  # dcgmi, nv-hostengine
NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"  # all_reduce_perf, mpirun
FIO_IMAGE = "ljishen/fio:3.36"  # fio
CUDA_BASE_IMAGE = "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu22.04"  # nvidia-smi (injected by the NVIDIA runtime)


class CheckRuntime(BaseModel):
    """How one health check runs as a Job on a real node: its image, its command, the GPUs it is given."""

    image: str = Field(min_length=1, description="Container image that holds the check's tool.")
    command: list[str] | None = Field(
        None, description="Command to run instead of the suite's (remedy.health.suite_for); None: the suite's.")
    gpus: int | None = Field(
        None, ge=0,
        description="nvidia.com/gpu requested (and limited) per pod; None: every GPU of the node (gpus_per_node). "
        "A check that exercises GPUs (dcgmi diag, NCCL, stress) needs them allocated: without a request the "
        "device plugin gives the container none and the tool finds no GPU.")
    see_all_gpus: bool = Field(
        False,
        description="Request no GPU but set NVIDIA_VISIBLE_DEVICES=all, so the NVIDIA runtime shows every GPU read-only "
        "(as dcgm-exporter does): for observers such as the NVML probe, which must also run beside a training job "
        "that holds the GPUs.")


def default_check_runtimes() -> dict[str, CheckRuntime]:
    """The documented default image set (docs/operations.md, "Health-check images")."""
    return {
        "nvml-probe": CheckRuntime(image=GPU_REMEDY_IMAGE, gpus=0, see_all_gpus=True),
        "dcgm-diag": CheckRuntime(image=DCGM_IMAGE),
        "nccl": CheckRuntime(image=NCCL_TESTS_IMAGE),
        "stress": CheckRuntime(image=GPU_REMEDY_IMAGE),
        "ib": CheckRuntime(image=GPU_REMEDY_IMAGE, gpus=0),
        "fio": CheckRuntime(image=FIO_IMAGE, gpus=0),
        "nvidia-smi": CheckRuntime(image=CUDA_BASE_IMAGE, gpus=0, see_all_gpus=True),
    }


GPU_CHECKS = frozenset({"dcgm-diag", "nccl", "stress"})  # checks that need GPUs allocated to run at all


class HealthCheckSettings(BaseModel):
    """Burn-in and spare health-check criteria (issue 5)."""

    gpu_model: str | None = Field(
        None,
        description="GPU product name every managed node must have (NVML spelling or the GFD label's dashes); "
        "None: the flows pass each node's nvidia.com/gpu.product label, else the model is not judged.",
    )
    gpus_per_node: int = Field(8, ge=1, description="Default GPUs expected per node.")
    fabric: str = Field("infiniband-ndr", description="Default fabric name used to pick the NCCL criteria profile.")
    ib_ports_per_node: int = Field(8, ge=0, description="InfiniBand ports expected per node (0: not judged).")
    probe: ProbeThresholds = Field(default_factory=ProbeThresholds)
    nccl_profiles: list[NcclCriteriaProfile] = Field(
        default_factory=lambda: [NcclCriteriaProfile(sizes=SEED_001_NCCL_TABLE)],
        description="All-reduce criteria per (gpu_model, fabric); the most specific match wins; default: seed 001's table.",
    )
    nccl_require_all_sizes: bool = Field(
        True, description="Fail a sweep that has no row for a size the criteria table judges (run cut short)."
    )
    dcgm_warn_fails: bool = Field(False, description="Treat a DCGM test 'Warn' as a failure (default: warning only).")
    ib: IbThresholds = Field(default_factory=IbThresholds)
    stress: StressThresholds = Field(default_factory=StressThresholds)
    fio: FioThresholds = Field(default_factory=FioThresholds)
    extended_dcgm_level: int = Field(
        4, ge=3, le=4, description="dcgmi diag level run by the extended suite (-r 4 includes -r 3's tests, ~1.5 h+)."
    )
    stress_seconds: int = Field(1800, ge=60, description="Duration of the extended suite's GPU stress run.")
    runtimes: dict[str, CheckRuntime] = Field(
        default_factory=default_check_runtimes,
        description="Per check (its remedy.io/check name: nvml-probe, dcgm-diag, nccl, stress, ib, fio, nvidia-smi): "
        "image, command override and GPUs. Keys given replace the default's entry; the others keep theirs.")
    max_failed_burn_ins: int = Field(
        3, ge=1,
        description="After this many failed burn-ins a node is recorded as a retirement candidate for the lemon "
        "review (seed 000: hardware that fails repeatedly is removed from rotation for good; the count is our assumption).",
    )

    @field_validator("runtimes")
    @classmethod
    def _runtimes(cls, v: dict[str, CheckRuntime]) -> dict[str, CheckRuntime]:
        """Merge over the defaults (a config naming one check keeps the others' images); a GPU check may not go
        without GPUs — the device plugin would give its container none and the tool would find nothing to test."""
        merged = default_check_runtimes() | dict(v)
        for check in GPU_CHECKS:
            if merged[check].gpus == 0:
                raise ValueError(f"runtimes.{check}.gpus is 0: {check} needs GPUs allocated (None: all of the node's)")
        return merged

    def runtime_for(self, check: str) -> CheckRuntime:
        """How `check` runs; an unknown check (a fix Job such as gpu-reset) runs in the DCGM image without GPUs."""
        return self.runtimes.get(check) or CheckRuntime(image=DCGM_IMAGE, gpus=0)

    def gpus_for(self, check: str) -> int:
        """nvidia.com/gpu per pod of `check`."""
        gpus = self.runtime_for(check).gpus
        return self.gpus_per_node if gpus is None else gpus

    @field_validator("nccl_profiles")
    @classmethod
    def _has_profiles(cls, v: list[NcclCriteriaProfile]) -> list[NcclCriteriaProfile]:
        if not v:
            raise ValueError("at least one NCCL criteria profile is needed (use gpu_model '*' and fabric '*')")
        return v

    def nccl_criteria_for(self, gpu_model: str | None = None, fabric: str | None = None) -> NcclCriteriaProfile:
        """The profile for this GPU model and fabric: exact match, then model, then fabric, then a '*' default.

        Models compare like GPU feature discovery labels and NVML names ('NVIDIA-B200' == 'NVIDIA B200')."""
        from remedy.health.result import same_gpu_model

        model, fab = gpu_model or self.gpu_model or "", fabric or self.fabric

        def score(p: NcclCriteriaProfile) -> int | None:
            if not (p.gpu_model == "*" or same_gpu_model(model, p.gpu_model)) or p.fabric not in ("*", fab):
                return None
            return (2 if p.gpu_model != "*" else 0) + (1 if p.fabric != "*" else 0)

        ranked = [(s, i, p) for i, p in enumerate(self.nccl_profiles) if (s := score(p)) is not None]
        if not ranked:
            raise ValueError(f"no NCCL criteria profile matches gpu_model={model!r} fabric={fab!r}; add a '*' default")
        return max(ranked, key=lambda t: (t[0], -t[1]))[2]
