"""Hidden hardware health of a simulated node.

Nothing in gpu-remedy reads this directly: health-check Jobs, the fake NVML library and the
simulated exporters derive what a real tool would print from it, and the fault injector sets it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class GpuHealth:
    index: int
    uuid: str = ""
    fallen_off_bus: bool = False  # XID 79: invisible to NVML until reboot
    pending_xids: list[int] = field(default_factory=list)  # XIDs raised and not yet cleared
    correctable_remaps: int = 0
    uncorrectable_remaps: int = 0
    remap_pending: bool = False
    remap_failure: bool = False  # ROW_REMAP_FAILURE: 8 uncorrectable remaps in one bank
    retired_pages_sbe: int = 0
    retired_pages_dbe: int = 0
    ecc_volatile_sbe: int = 0
    ecc_volatile_dbe: int = 0
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_max_gen: int = 5
    pcie_max_width: int = 16
    nvlink_down: list[int] = field(default_factory=list)  # link ids that are down
    nvlink_errors: int = 0  # replay + recovery + CRC counters, summed
    thermal_throttle: bool = False  # HW thermal slowdown under load
    power_brake: bool = False
    hw_slowdown: bool = False
    temperature_c: int = 45
    power_w: int = 350
    reset_clears: bool = True  # a GPU reset (nvidia-smi -r) clears its pending faults
    reboot_clears: bool = True  # a node reboot clears its pending faults
    last_xid: int = 0  # most recent XID on this GPU (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS value)

    def clear_after_reset(self) -> None:
        """What a successful GPU reset clears: pending XIDs, a pending row remap, volatile ECC, NVLink state."""
        self.pending_xids = []
        self.last_xid = 0
        if self.remap_pending:  # the pending remap is applied at reset
            self.remap_pending = False
        self.ecc_volatile_sbe = self.ecc_volatile_dbe = 0
        self.nvlink_down = []


@dataclass
class IbPortHealth:
    port: int
    state: str = "Active"  # Active | Down | Init
    rate_gbps: int = 400
    symbol_errors: int = 0
    link_downed: int = 0
    downtime_seconds: float = 0.0  # cumulative, the number that kills runs (seed 001)


@dataclass
class NodeHealth:
    gpus: list[GpuHealth] = field(default_factory=list)
    ib_ports: list[IbPortHealth] = field(default_factory=list)
    nccl_busbw_factor: float = 1.0  # < 1 scales the NCCL sweep's bus bandwidth down
    nccl_slow_sizes: list[int] = field(default_factory=list)  # sizes (bytes) where busbw collapses
    lemon: bool = False  # passes idle checks, fails under real load
    divergent: bool = False  # a training step here produces `loss: nan`
    not_ready: bool = False  # kubelet stopped reporting
    nfs_slot_starved: bool = False  # checkpoint writes wait for RPC slots (remedy.sim.nfs)
    driver_version: str = "570.124.06"
    vbios_version: str = "97.00.9A.00.0B"
    fio_write_gbps: float = 4.0
    fio_read_gbps: float = 8.0

    @classmethod
    def healthy(cls, gpus: int = 8, ib_ports: int = 8, node_index: int = 0) -> NodeHealth:
        return cls(
            gpus=[GpuHealth(index=i, uuid=f"GPU-{node_index:04x}{i:04x}-0000-0000-0000-000000000000") for i in range(gpus)],
            ib_ports=[IbPortHealth(port=p + 1) for p in range(ib_ports)],
        )

    def faulty(self) -> bool:
        """True when anything on the node would fail a check."""
        return bool(
            self.not_ready
            or self.lemon
            or self.divergent
            or self.nccl_busbw_factor < 1.0
            or self.nccl_slow_sizes
            or any(
                g.fallen_off_bus or g.pending_xids or g.remap_pending or g.remap_failure
                or g.pcie_width < g.pcie_max_width or g.pcie_gen < g.pcie_max_gen
                or g.nvlink_down or g.thermal_throttle or g.power_brake or g.hw_slowdown
                for g in self.gpus
            )
            or any(p.state != "Active" for p in self.ib_ports)
        )

    def clear_after_reboot(self) -> None:
        """What a node reboot clears when `reboot_clears`: everything a GPU reset clears, a GPU that fell
        off the bus, and a hung kubelet. Hardware faults (remap failure, thermal, PCIe width, lemon) stay."""
        for gpu in self.gpus:
            if gpu.reboot_clears:
                gpu.clear_after_reset()
                gpu.fallen_off_bus = False
        self.not_ready = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NodeHealth:
        data = dict(data)
        data["gpus"] = [GpuHealth(**g) for g in data.get("gpus", [])]
        data["ib_ports"] = [IbPortHealth(**p) for p in data.get("ib_ports", [])]
        return cls(**data)
