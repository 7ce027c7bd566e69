"""Fault injection: change a node's hidden health the way a real fault would, write the kernel log line,
and raise the alert an exporter would (Alertmanager webhook v4 to the cluster's alert_url).

    inject(cluster, "xid", "gpu071", gpu=3, code=79)
    inject(cluster, "ib-port-down", "gpu012", port=2, seconds=30)
    inject(cluster, "heal", "gpu071")
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from remedy.sim import alerts
from remedy.sim.hardware import pci_bus_id
from remedy.sim.health import NodeHealth
from remedy.sim.store import now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

# seed 002 Table 3: 79 → reboot (RESTART_BM); 119/145/149 → GPU reset; 31/43/94 → restart the app.
APP_LEVEL_XIDS = frozenset({13, 31, 43, 45, 94})
XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_1c000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000010",
    45: "Ch 00000010",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, "
        "subpartition 0.",
    63: "Row Remapper: New row (0x0000000000012a40) is marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row (0x0000000000012a40): no spare rows left in bank.",
    74: "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate detected",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: SM (0x1). RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) "
         "(0x20800a4c 0x4).",
    145: "NVLink: RLW Error, Link 5 (0x00000004) Unit 0 Index 0 (0x00000001)",
    149: "NETIR Error: Link 3, NETIR_LINK_EVT Fatal error detected on LINK 3 (0x2)",
}
CRITICAL_XIDS = frozenset({48, 64, 74, 79, 95, 119, 145, 149})
# kind -> the CLI's positional value's parameter name
VALUE_PARAM = {"xid": "code", "correctable-remaps": "count", "pcie-degraded": "width", "ib-port-down": "seconds",
               "slow-nccl": "size", "thermal": "temperature", "nvlink-down": "link"}


class FaultError(ValueError):
    """A fault that cannot be injected as asked (unknown kind, GPU out of range, bad parameter)."""


def _int(params: dict, key: str, default: int | None = None) -> int:
    value = params.get(key, default)
    if value is None:
        raise FaultError(f"parameter {key!r} is required")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise FaultError(f"parameter {key!r} must be an integer, got {value!r}") from None


def _gpu(health: NodeHealth, gpu: int | None, node: str):
    index = 0 if gpu is None else gpu
    for g in health.gpus:
        if g.index == index:
            return g
    raise FaultError(f"{node} has no GPU {index} (it has {len(health.gpus)})")


def _restart_training_pod(cluster: Cluster, node: str, why: str) -> None:
    """The training process on this node crashed: its container restarts (restartPolicy OnFailure)."""
    for pod in cluster.pods_on(node):
        labels = pod["metadata"].get("labels") or {}
        if pod["metadata"].get("namespace") != "training" or pod["status"].get("phase") != "Running":
            continue

        def change(p: dict, labels=labels) -> None:
            for cs in p["status"].get("containerStatuses") or []:
                cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
                started = (cs.get("state", {}).get("running") or {}).get("startedAt", now_iso())
                cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": started,
                                                  "finishedAt": now_iso()}}
                cs["state"] = {"running": {"startedAt": now_iso()}}

        cluster.store.mutate("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], change)
        cluster.append_log(pod["metadata"]["namespace"], pod["metadata"]["name"], why)


def _xid(cluster, node, health, gpu, params):
    code = _int(params, "code")
    g = _gpu(health, gpu, node)
    g.last_xid = code
    if code not in APP_LEVEL_XIDS:
        g.pending_xids.append(code)
    if code == 79:
        g.fallen_off_bus = True
    elif code == 48:
        g.ecc_volatile_dbe += 1
    elif code == 63:
        g.remap_pending = True
    elif code == 64:
        g.remap_failure = True
    elif code in (74, 145, 149):
        g.nvlink_errors += 1
    bus = pci_bus_id(g.index)[4:-2]  # 0000:18:00
    pid = "'<unknown>', name=<unknown>" if code not in APP_LEVEL_XIDS else f"{random.randint(20000, 90000)}, name=python3"
    cluster.kernel_log(node, f"NVRM: Xid (PCI:{bus}): {code}, pid={pid}, {XID_TEXT.get(code, 'Unknown error')}")
    _restart_training_pod(cluster, node, f"RuntimeError: CUDA error: unspecified launch failure (Xid {code} on "
                                         f"GPU {g.index}); restarting worker")
    severity = "critical" if code in CRITICAL_XIDS else "warning"
    return ("GpuXidError", severity, {"xid": str(code)}, f"XID {code} on {node} GPU {g.index}: {XID_TEXT.get(code, '')}",
            code)


def _remap_pending(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    g.remap_pending = True
    g.uncorrectable_remaps += 1
    return "GpuRowRemapPending", "warning", {}, f"{node} GPU {g.index}: row remap pending, reset to apply", 1


def _remap_failure(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    g.remap_failure = True
    g.uncorrectable_remaps = max(g.uncorrectable_remaps, 8)  # 8 uncorrectable remaps in a bank (seed 002)
    return "GpuRowRemapFailure", "critical", {}, f"{node} GPU {g.index}: row remap failure, replace the GPU", 1


def _correctable(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    g.correctable_remaps += _int(params, "count", 1)
    return ("GpuCorrectableRemappedRows", "warning", {}, f"{node} GPU {g.index}: {g.correctable_remaps} correctable "
            "remaps", g.correctable_remaps)


def _pcie(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    width = _int(params, "width", 8)
    if width not in (1, 2, 4, 8, 16):
        raise FaultError(f"PCIe width must be 1, 2, 4, 8 or 16, got {width}")
    g.pcie_width = width
    return ("GpuPcieLinkDegraded", "warning", {}, f"{node} GPU {g.index}: PCIe x{width} (expected x{g.pcie_max_width})",
            width)


def _thermal(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    g.thermal_throttle = True
    g.temperature_c = _int(params, "temperature", 92)
    return "GpuThermalThrottle", "warning", {}, f"{node} GPU {g.index}: HW thermal slowdown at {g.temperature_c} C", None


def _nvlink(cluster, node, health, gpu, params):
    g = _gpu(health, gpu, node)
    link = _int(params, "link", 0)
    if link not in g.nvlink_down:
        g.nvlink_down.append(link)
    g.nvlink_errors += 1
    # no standard alert for a down link: name the signal kind explicitly (the `signal` label wins in detect)
    return ("GpuNvlinkDown", "critical", {"link": str(link), "signal": "nvlink-error"},
            f"{node} GPU {g.index}: NVLink {link} down", None)


def _ib_down(cluster, node, health, gpu, params):
    port_no = _int(params, "port", 1)
    seconds = float(params.get("seconds") or 0)
    port = next((p for p in health.ib_ports if p.port == port_no), None)
    if port is None:
        raise FaultError(f"{node} has no InfiniBand port {port_no} (ports 1..{len(health.ib_ports)})")
    port.state = "Down"
    port.link_downed += 1
    if seconds > 0:  # a flap: the port comes back, the cumulative downtime stays (seed 001)
        port.downtime_seconds += seconds

        def back() -> None:
            port.state = "Active"

        cluster.call_later(seconds, back)
    return ("InfinibandPortDown", "critical", {"port": str(port_no)}, f"{node} IB port {port_no} down",
            seconds or None)


def _not_ready(cluster, node, health, gpu, params):
    health.not_ready = True
    return "KubeNodeNotReady", "critical", {"node": node}, f"{node} kubelet stopped posting status", None


def _lemon(cluster, node, health, gpu, params):
    health.lemon = True
    return None


def _divergent(cluster, node, health, gpu, params):
    health.divergent = True
    return None


def _slow_nccl(cluster, node, health, gpu, params):
    if params.get("factor") is not None:
        health.nccl_busbw_factor = float(params["factor"])
    size = params.get("size")
    if size is not None or params.get("factor") is None:
        size = _int(params, "size", 1 << 30)
        if size not in health.nccl_slow_sizes:
            health.nccl_slow_sizes.append(size)
    return None


def _nfs_starved(cluster, node, health, gpu, params):
    health.nfs_slot_starved = True  # no alert: the daily NFS audit is what finds it
    return None


def _reset_fails(cluster, node, health, gpu, params):
    for g in health.gpus if gpu is None else [_gpu(health, gpu, node)]:
        g.reset_clears = False
    return None


def _heal(cluster, node, health, gpu, params):
    fresh = NodeHealth.healthy(gpus=len(health.gpus), ib_ports=len(health.ib_ports))
    for old, new in zip(health.gpus, fresh.gpus):
        new.uuid = old.uuid
    fresh.driver_version, fresh.vbios_version = health.driver_version, health.vbios_version
    cluster.health[node] = fresh
    cluster.rebooting.pop(node, None)
    return None


HANDLERS = {
    "xid": _xid, "row-remap-pending": _remap_pending, "row-remap-failure": _remap_failure,
    "correctable-remaps": _correctable, "pcie-degraded": _pcie, "thermal": _thermal, "nvlink-down": _nvlink,
    "ib-port-down": _ib_down, "not-ready": _not_ready, "lemon": _lemon, "divergent": _divergent,
    "slow-nccl": _slow_nccl, "reset-fails": _reset_fails, "nfs-slot-starvation": _nfs_starved, "heal": _heal,
}
FAULT_KINDS = tuple(HANDLERS)


def inject(cluster: Cluster, kind: str, node: str, gpu: int | None = None, **params) -> dict:
    """Apply the fault, then post its alert (if alert_url is set). Returns what happened, incl. the alert outcome.

    Raises NodeNotFound for an unknown node and FaultError (a ValueError) for a bad kind or parameter."""
    key = str(kind).strip().lower().replace("_", "-")
    if key not in HANDLERS:
        raise FaultError(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})")
    if gpu is not None:
        try:
            gpu = int(gpu)
        except (TypeError, ValueError):
            raise FaultError(f"gpu must be an integer index, got {gpu!r}") from None
    with cluster.lock:
        health = cluster.health_of(node)
        raised = HANDLERS[key](cluster, node, health, gpu, params)
        cluster.reconcile({node})
        health_now = cluster.health_of(node).to_dict()
        to_post, labels = [], None
        if raised is not None:
            alertname, severity, extra, summary, value = raised
            labels = {"alertname": alertname, "Hostname": node, "severity": severity, "job": "dcgm-exporter",
                      "instance": f"{node}:9400"}
            if gpu is not None or key not in ("ib-port-down", "not-ready"):
                g = _gpu(health, gpu, node)
                labels.update({"gpu": str(g.index), "UUID": g.uuid, "modelName": "NVIDIA B200"})
            labels.update(extra)
            annotations = {"summary": summary, "description": summary}
            if value is not None:
                annotations["value"] = str(value)
            alert = alerts.make_alert(labels, annotations)
            cluster.firing.setdefault(node, []).append(alert)
            to_post = [alert]
        elif key == "heal" and cluster.firing.get(node):
            to_post = [dict(a, status="resolved", endsAt=now_iso()) for a in cluster.firing.pop(node)]
        url, token = cluster.alert_url, cluster.alert_token
    outcome = None
    if to_post:  # never hold the cluster lock during network I/O
        outcome = alerts.post(url, token, alerts.webhook_payload(to_post))
        with cluster.lock:
            cluster.alerts.append({"at": time.time(), "labels": to_post[0]["labels"], "status": to_post[0]["status"],
                                   **outcome})
    return {"kind": key, "node": node, "gpu": gpu, "params": params, "health": health_now,
            "alert": ({"labels": to_post[0]["labels"], "status": to_post[0]["status"], **outcome}
                      if to_post else None)}
