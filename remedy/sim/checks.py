"""Simulated health-check Jobs: what each tool would print on a node with this hidden health.

Registered runners (pod-template label `remedy.io/check`): nvml-probe, dcgm-diag, nccl, stress, ib,
fio, nvidia-smi. Each output is in the real tool's format and is read back by the same parsers
(remedy.health) a real Job's log goes through, so a planted fault fails for the right reason:

    pending row remap  -> dcgm-diag (software at -r 1, memory at -r 2+), nvml-probe, nvidia-smi
    PCIe x8            -> nvml-probe, nvidia-smi, dcgm-diag pcie (-r 2+)
    slow NCCL          -> nccl (nccl_busbw_factor, or nccl_slow_sizes collapsing single sizes)
    thermal throttle   -> stress (it only shows under load), dcgm-diag -r 3+
    IB port down       -> ib
    lemon              -> nothing: it passes every check here, which is why lemons need other detection
"""

from __future__ import annotations

import json
import random
from typing import Any

from remedy.probe import ExpectedNode, probe_node
from remedy.probe.fakenvml import FakeNvml, FakeNvmlState
from remedy.settings.health import GIB
from remedy.sim.health import GpuHealth, NodeHealth
from remedy.sim.runners import RunResult, arg_value, job_args, pci_bus_id, register_runner

DEFAULT_MODEL = FakeNvmlState().gpu_model  # when the node has no nvidia.com/gpu.product label
DCGM_FAIL_EXIT = 226  # dcgmi's exit code when a diagnostic fails


# -- nvml-probe: the real probe against the fake NVML ---------------------------------------------
def nvml_probe_output(health: NodeHealth, *, expect_gpus: int | None = None, expect_model: str | None = None,
                      gpu_model: str | None = None) -> tuple[int, str]:
    """`gpu_model`: what the node really has (its GFD label); `expect_model`: what the Job was told to expect."""
    fake = FakeNvml(FakeNvmlState(health=health, gpu_model=(gpu_model or DEFAULT_MODEL).replace("-", " ")))
    expected = ExpectedNode(gpu_count=expect_gpus if expect_gpus is not None else len(health.gpus), gpu_model=expect_model)
    report = probe_node(expected, fake, xid_wait_seconds=0)
    return (1 if report.verdict.value == "fail" else 0), json.dumps(report.to_dict(), indent=2, default=str)


# -- dcgmi diag -j (DCGM 4.x layout) ----------------------------------------------------------------
DCGM_TESTS = (  # (test, category, first level that runs it)
    ("software", "Deployment", 1), ("pcie", "Integration", 2), ("memory", "Hardware", 2),
    ("diagnostic", "Hardware", 3), ("targeted_stress", "Stress", 3), ("targeted_power", "Stress", 3),
    ("memory_bandwidth", "Stress", 3), ("memtest", "Hardware", 4), ("pulse_test", "Stress", 4),
)


def _dcgm_problems(test: str, g: GpuHealth) -> list[dict[str, Any]]:
    def w(text: str, error_id: int) -> dict[str, Any]:
        return {"warning": text, "error_id": error_id, "error_category": 1, "error_severity": 2}

    i = g.index
    if g.fallen_off_bus:
        return [w(f"GPU {i} is lost: it fell off the bus. Reboot the system.", 98)]
    out = []
    if test == "software":
        if g.remap_pending:
            out.append(w(f"GPU {i} had uncorrectable memory errors and row remapping is pending. Run a GPU reset.", 95))
        if g.remap_failure:
            out.append(w(f"GPU {i} had a row remapping failure.", 96))
    elif test == "pcie":
        if g.pcie_width < g.pcie_max_width:
            out.append(w(f"GPU {i} PCIe link width x{g.pcie_width} is below the maximum x{g.pcie_max_width}.", 76))
        if g.pcie_gen < g.pcie_max_gen:
            out.append(w(f"GPU {i} PCIe link generation {g.pcie_gen} is below the maximum {g.pcie_max_gen}.", 75))
        if g.nvlink_down:
            out.append(w(f"GPU {i} NVLink link(s) {g.nvlink_down} are down.", 31))
    elif test in ("memory", "memtest"):
        if g.remap_pending or g.remap_failure or g.ecc_volatile_dbe:
            out.append(w(f"GPU {i}: memory test found uncorrectable errors (DBE {g.ecc_volatile_dbe}, "
                         f"remap pending {g.remap_pending}, remap failure {g.remap_failure}).", 40))
    elif test in ("targeted_stress", "targeted_power", "diagnostic", "pulse_test"):
        if g.thermal_throttle:
            out.append(w(f"Clocks are being throttled for GPU {i} because of thermal violations (HW_THERMAL_SLOWDOWN).", 19))
        if g.power_brake or g.hw_slowdown:
            out.append(w(f"Clocks are being throttled for GPU {i} because of HW slowdown.", 20))
    return out


def dcgm_diag_output(health: NodeHealth, level: int) -> tuple[int, str]:
    if level not in (1, 2, 3, 4):
        return 1, f"Error: invalid diagnostic level {level} (use 1, 2, 3 or 4)"
    categories: dict[str, list[dict]] = {}
    failed = False
    for test, category, first in DCGM_TESTS:
        if level < first:
            continue
        results = []
        for g in health.gpus:
            problems = _dcgm_problems(test, g)
            failed |= bool(problems)
            results.append({"entity_group": "GPU", "entity_group_id": 1, "entity_id": g.index,
                            "status": "Fail" if problems else "Pass", "warnings": problems, "info": []})
        summary = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        categories.setdefault(category, []).append({"name": test, "results": results, "test_summary": {"status": summary}})
    doc = {
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in categories.items()]},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
            {"entity_id": g.index, "device_id": "2330", "serial_num": f"165{g.index:010d}"} for g in health.gpus]}],
        "metadata": {"version": "4.2.3", "Driver Version Detected": health.driver_version},
    }
    return (DCGM_FAIL_EXIT if failed else 0), json.dumps(doc, indent=2)


# -- all_reduce_perf ----------------------------------------------------------------------------------
def nccl_output(healths: list[NodeHealth], *, gpus_per_node: int = 8, min_bytes: int = 8, max_bytes: int = 2 * GIB,
                factor: int = 2, seed: str = "", hosts: list[str] | None = None, gpu_model: str | None = None) -> tuple[int, str]:
    """One all-reduce sweep over the group; the slowest node sets the pace (as in a real ring)."""
    rng = random.Random(seed)
    nodes = len(healths)
    ranks = nodes * gpus_per_node
    # single node: NVLink/NVSwitch; several: InfiniBand NDR (seed 001's 16-GPU figures peak at 445 GB/s)
    peak_gbps, lat_us = (480.0, 30.0) if nodes == 1 else (400.0, 60.0)
    peak_gbps *= min((h.nccl_busbw_factor for h in healths), default=1.0)
    slow = {s for h in healths for s in h.nccl_slow_sizes}
    hosts = hosts or [f"node-{i}" for i in range(nodes)]
    bus_factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
    lines = [f"# nThread 1 nGpus {gpus_per_node} minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) "
             "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for r in range(ranks):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {hosts[r // gpus_per_node]:>10} device "
                     f"{r % gpus_per_node:2d} [0x{pci_bus_id(r % gpus_per_node)[9:11]}] {gpu_model or DEFAULT_MODEL}")
    lines += ["#", "#" + " " * 58 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    busbws = []
    size = min_bytes
    while size <= max_bytes:
        cells = []
        for _half in range(2):
            bw = peak_gbps * (0.3 if size in slow else 1.0)
            t_us = (lat_us + bus_factor * size / (bw * 1e3)) * (1 + rng.uniform(-0.01, 0.01))
            algbw = size / t_us / 1e3
            cells.append((t_us, algbw, algbw * bus_factor))
        busbws.append(cells[0][2])
        half = "  ".join(f"{t:7.2f} {a:7.2f} {b:7.2f} {0:6d}" for t, a, b in cells)
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {half}")
        size *= factor
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f} ", "#", ""]
    return 0, "\n".join(lines)


# -- GPU stress summary -----------------------------------------------------------------------------
def stress_output(health: NodeHealth, seconds: float, seed: str = "") -> tuple[int, str]:
    rng = random.Random(seed)
    gpus = []
    for g in health.gpus:
        reasons, errors = [], []
        temp = rng.randint(66, 74)
        if g.thermal_throttle:
            temp, reasons = max(temp, 91), ["hw_slowdown", "hw_thermal_slowdown"]
        if g.power_brake:
            reasons += ["hw_slowdown", "hw_power_brake_slowdown"]
        if g.hw_slowdown and "hw_slowdown" not in reasons:
            reasons.append("hw_slowdown")
        if g.fallen_off_bus:
            errors.append("GPU is lost (XID 79): fell off the bus")
        errors += [f"XID {x} during stress" for x in g.pending_xids]
        gpus.append({"index": g.index, "max_temp_c": temp, "throttle_reasons": sorted(set(reasons)), "errors": errors})
    doc = {"tool": "gpu-stress", "duration_s": seconds, "gpus": gpus}
    return (1 if any(g["errors"] for g in gpus) else 0), json.dumps(doc, indent=2)


# -- ibstat + sysfs counters --------------------------------------------------------------------------
_IB_STATE = {"Active": ("Active", "LinkUp"), "Down": ("Down", "Disabled"), "Init": ("Initializing", "LinkUp")}


def ib_output(health: NodeHealth) -> tuple[int, str]:
    lines: list[str] = []
    counters: list[str] = []
    for p in health.ib_ports:
        dev = f"mlx5_{p.port - 1}"
        state, phys = _IB_STATE.get(p.state, (p.state, "Polling"))
        lines += [f"CA '{dev}'", "\tCA type: MT4129", "\tNumber of ports: 1", "\tFirmware version: 28.39.1002",
                  "\tHardware version: 0", f"\tNode GUID: 0xa088c20300{p.port:06x}", "\tPort 1:", f"\t\tState: {state}",
                  f"\t\tPhysical state: {phys}", f"\t\tRate: {p.rate_gbps if state == 'Active' else 10}",
                  f"\t\tBase lid: {p.port}", "\t\tLMC: 0", "\t\tSM lid: 1", "\t\tLink layer: InfiniBand"]
        base = f"/sys/class/infiniband/{dev}/ports/1/counters"
        counters += [f"{base}/symbol_error: {p.symbol_errors}", f"{base}/link_downed: {p.link_downed}",
                     f"{base}/link_error_recovery: 0", f"{base}/port_rcv_errors: 0"]
    return 0, "\n".join(lines + counters) + "\n"


# -- fio --output-format=json -------------------------------------------------------------------------
def fio_output(health: NodeHealth, numjobs: int = 4, size_bytes: int = 5 * GIB) -> tuple[int, str]:
    def job(name: str, rw: str, gbps: float) -> dict[str, Any]:
        bw = gbps * 1e9 / numjobs
        zero = {"io_bytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0, "runtime": 0}
        part = {"io_bytes": size_bytes, "bw_bytes": int(bw), "bw": int(bw / 1024), "iops": bw / (4 * 1024**2),
                "runtime": int(size_bytes / bw * 1000)}
        return {"jobname": name, "groupid": 0, "error": 0,
                "read": part if rw == "read" else zero, "write": part if rw == "write" else zero}

    jobs = [job("ckpt-write", "write", health.fio_write_gbps) for _ in range(numjobs)]
    jobs += [job("ckpt-read", "read", health.fio_read_gbps) for _ in range(numjobs)]
    return 0, json.dumps({"fio version": "fio-3.33", "timestamp": 1763769600, "jobs": jobs}, indent=2)


# -- nvidia-smi -q ------------------------------------------------------------------------------------
def nvidia_smi_output(health: NodeHealth, gpu_model: str | None = None) -> tuple[int, str]:
    model = gpu_model or DEFAULT_MODEL
    act = {True: "Active", False: "Not Active"}
    lines = ["", "==============NVSMI LOG==============", "", "Timestamp                                 : Sat Nov 22 00:00:00 2026",
             f"Driver Version                            : {health.driver_version}",
             "CUDA Version                              : 12.8", "",
             f"Attached GPUs                             : {sum(not g.fallen_off_bus for g in health.gpus)}"]
    for g in health.gpus:
        if g.fallen_off_bus:
            continue  # nvidia-smi cannot see a GPU that fell off the bus
        ind = lambda n, k, v: f"{'    ' * n}{k:<{42 - 4 * n}}: {v}"  # noqa: E731
        lines += [
            f"GPU {pci_bus_id(g.index)}", ind(1, "Product Name", model), ind(1, "Serial Number", f"165{g.index:010d}"),
            ind(1, "GPU UUID", g.uuid), ind(1, "VBIOS Version", health.vbios_version), "    Inforom Version",
            ind(2, "Image Version", "G520.0200.00.05"), "    GPU Link Info", "        PCIe Generation",
            ind(3, "Max", g.pcie_max_gen), ind(3, "Current", g.pcie_gen), "        Link Width",
            ind(3, "Max", f"{g.pcie_max_width}x"), ind(3, "Current", f"{g.pcie_width}x"), "    Clocks Event Reasons",
            ind(2, "Idle", "Active"), ind(2, "HW Slowdown", act[g.hw_slowdown or g.power_brake]),
            ind(3, "HW Thermal Slowdown", act[False]), ind(3, "HW Power Brake Slowdown", act[g.power_brake]),
            ind(2, "SW Thermal Slowdown", act[False]), "    ECC Errors", "        Volatile",
            ind(3, "SRAM Correctable", 0), ind(3, "SRAM Uncorrectable", 0), ind(3, "DRAM Correctable", g.ecc_volatile_sbe),
            ind(3, "DRAM Uncorrectable", g.ecc_volatile_dbe), "        Aggregate", ind(3, "SRAM Correctable", 0),
            ind(3, "SRAM Uncorrectable", 0), ind(3, "DRAM Correctable", g.ecc_volatile_sbe),
            ind(3, "DRAM Uncorrectable", g.ecc_volatile_dbe), "    Remapped Rows",
            ind(2, "Correctable Error", g.correctable_remaps), ind(2, "Uncorrectable Error", g.uncorrectable_remaps),
            ind(2, "Pending", "Yes" if g.remap_pending else "No"),
            ind(2, "Remapping Failure Occurred", "Yes" if g.remap_failure else "No"), "    Temperature",
            ind(2, "GPU Current Temp", f"{g.temperature_c} C"), ind(2, "GPU Slowdown Temp", "87 C"),
            "    GPU Power Readings", ind(2, "Power Draw", f"{g.power_w:.2f} W"), ind(2, "Current Power Limit", "700.00 W"),
        ]
    return 0, "\n".join(lines) + "\n"


# -- runners (fn(node, health, job, cluster) -> RunResult) ----------------------------------------------
def _int_arg(args: list[str], flags: tuple[str, ...], default: int) -> int:
    raw = arg_value(args, *flags)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _size_arg(raw: str | None, default: int) -> int:
    if not raw:
        return default
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(raw[-1].upper(), 1)
    try:
        return int(raw[:-1] if scale > 1 else raw) * scale
    except ValueError:
        return default


def node_gpu_model(cluster: Any, node: str) -> str | None:
    """The node's GPU product as NVML names it, from its GPU-feature-discovery label."""
    if cluster is None:
        return None
    label = cluster.node(node)["metadata"].get("labels", {}).get("nvidia.com/gpu.product")
    return label.replace("-", " ") if label else None


def run_nvml_probe(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    args = job_args(job)
    gpus = arg_value(args, "--expect-gpus")
    code, out = nvml_probe_output(health, expect_gpus=int(gpus) if gpus and gpus.isdigit() else None,
                                  expect_model=arg_value(args, "--expect-model"), gpu_model=node_gpu_model(cluster, node))
    return RunResult(code, out, 5.0)


def run_dcgm_diag(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    level = _int_arg(job_args(job), ("-r", "--run"), 1)
    code, out = dcgm_diag_output(health, level)
    return RunResult(code, out, {1: 60.0, 2: 600.0, 3: 1800.0, 4: 5400.0}.get(level, 1.0))


def run_nccl(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    from remedy.sim.jobs import job_nodes

    args = job_args(job)
    # A Job spread over several nodes (an Indexed Job, one pod per node by anti-affinity) is a multi-node group
    # run: every pod reports the whole group's sweep, paced by its slowest member.
    peers = job_nodes(cluster, job) if cluster is not None else []
    peers = peers if node in peers else [node]
    healths = [health if p == node else cluster.health_of(p) for p in peers]
    code, out = nccl_output(healths, gpus_per_node=len(health.gpus) or 8,
                            min_bytes=_size_arg(arg_value(args, "-b", "--minbytes"), 8),
                            max_bytes=_size_arg(arg_value(args, "-e", "--maxbytes"), 2 * GIB),
                            factor=_int_arg(args, ("-f", "--stepfactor"), 2),
                            seed=str(job.get("metadata", {}).get("uid", node)), hosts=peers,
                            gpu_model=node_gpu_model(cluster, node))
    return RunResult(code, out, 60.0)


def run_stress(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    seconds = float(_int_arg(job_args(job), ("--seconds",), 1800))
    code, out = stress_output(health, seconds, seed=str(job.get("metadata", {}).get("uid", node)))
    return RunResult(code, out, seconds)


def run_ib(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    code, out = ib_output(health)
    return RunResult(code, out, 2.0)


def run_fio(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    code, out = fio_output(health, numjobs=_int_arg(job_args(job), ("--numjobs",), 4))
    return RunResult(code, out, 60.0)


def run_nvidia_smi(node: str, health: NodeHealth, job: dict, cluster: Any) -> RunResult:
    code, out = nvidia_smi_output(health, node_gpu_model(cluster, node))
    return RunResult(code, out, 2.0)


for _check, _fn in (("nvml-probe", run_nvml_probe), ("dcgm-diag", run_dcgm_diag), ("nccl", run_nccl),
                    ("stress", run_stress), ("ib", run_ib), ("fio", run_fio), ("nvidia-smi", run_nvidia_smi)):
    register_runner(_check, _fn)
