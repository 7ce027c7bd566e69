"""The fleet's GPUs in dcgm-exporter's Prometheus text format, so a real Prometheus can scrape the simulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remedy.sim.hardware import pci_bus_id

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster
    from remedy.sim.health import GpuHealth, NodeHealth

# DCGM clock-event (throttle) reason bits, as in dcgm_fields.h / NVML
CLOCKS_EVENT_SW_POWER_CAP = 0x4
CLOCKS_EVENT_HW_SLOWDOWN = 0x8
CLOCKS_EVENT_HW_THERMAL = 0x40
CLOCKS_EVENT_HW_POWER_BRAKE = 0x80

METRICS = (
    # name, type, help, value(gpu, node health)
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda g, h: g.last_xid),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g, h: g.temperature_c),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g, h: g.power_w),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     lambda g, h: g.uncorrectable_remaps),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
     lambda g, h: g.correctable_remaps),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending",
     lambda g, h: int(g.remap_pending)),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
     lambda g, h: int(g.remap_failure)),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors.",
     lambda g, h: g.nvlink_errors),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
     lambda g, h: g.ecc_volatile_dbe),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
     lambda g, h: g.ecc_volatile_sbe),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe current link generation.", lambda g, h: g.pcie_gen),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width.", lambda g, h: g.pcie_width),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "PCIe maximum link generation.", lambda g, h: g.pcie_max_gen),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "PCIe maximum link width.", lambda g, h: g.pcie_max_width),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)",
     lambda g, h: clock_event_reasons(g)),
)


UTIL = ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")
BUSY_UTIL = 97  # a GPU under the training job; idle GPUs read 0


def clock_event_reasons(g: GpuHealth) -> int:
    bits = 0
    if g.thermal_throttle:
        bits |= CLOCKS_EVENT_HW_THERMAL | CLOCKS_EVENT_HW_SLOWDOWN
    if g.hw_slowdown:
        bits |= CLOCKS_EVENT_HW_SLOWDOWN
    if g.power_brake:
        bits |= CLOCKS_EVENT_HW_POWER_BRAKE | CLOCKS_EVENT_HW_SLOWDOWN
    return bits


def _labels(node: str, g: GpuHealth, h: NodeHealth) -> str:
    return (f'gpu="{g.index}",UUID="{g.uuid}",pci_bus_id="{pci_bus_id(g.index)}",device="nvidia{g.index}",'
            f'modelName="NVIDIA B200",Hostname="{node}",DCGM_FI_DRIVER_VERSION="{h.driver_version}"')


def render(cluster: Cluster, nodes: list[str] | None = None) -> str:
    """All GPUs of `nodes` (default every node). A GPU that fell off the bus is still listed, with XID 79,
    so the alert path can be exercised end to end (a real exporter may lose the device)."""
    with cluster.lock:
        names = sorted(cluster.health) if not nodes else [n for n in nodes if n in cluster.health]
        snapshot = [(n, cluster.health[n], [(g, _labels(n, g, cluster.health[n])) for g in cluster.health[n].gpus])
                    for n in names]
        busy = {n for n in names if any(p["metadata"].get("namespace") == "training"
                                        and p.get("status", {}).get("phase") == "Running"
                                        for p in cluster.index.on_node(n))}
        out = []
        for name, type_, help_, value in METRICS:
            out.append(f"# HELP {name} {help_}\n# TYPE {name} {type_}\n")
            for _node, h, gpus in snapshot:
                out.extend(f"{name}{{{labels}}} {value(g, h)}\n" for g, labels in gpus)
        name, type_, help_ = UTIL
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {type_}\n")
        for node, _health, gpus in snapshot:
            util = BUSY_UTIL if node in busy else 0
            out.extend(f"{name}{{{labels}}} {0 if g.fallen_off_bus else util}\n" for g, labels in gpus)
    return "".join(out)
