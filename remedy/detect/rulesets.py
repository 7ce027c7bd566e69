"""What an alert means, read from its content, not from what its rule happens to be called.

Operators bring their own rules: dcgm-exporter's community rules behind kube-prometheus-stack, the GPU operator's
(its node-status-exporter and operator-metrics PrometheusRules; its dcgm-exporter rule file only records
`accelerator_*` series and alerts on nothing),
kube-prometheus-stack's node rules, NVSentinel health events, node-problem-detector conditions. The same fault goes
by many names (`GPUXidError`, `GPUXIDError`, `GpuXidError`, `GPUXidErrors`) and the XID code sits in different
places (an `xid` label, dcgm-exporter's `err_code` label, the alert's value, only the description's text). So the
receiver reads, in this order:

1. a `signal` label naming a SignalKind (gpu-remedy's own rules, deployments/prometheus/rules.yml);
2. the XID code itself: `xid`, then `err_code` (dcgm-exporter's label on DCGM_FI_DEV_XID_ERRORS; "0" = no error);
3. the rule's meaning from `RULES`, looked up by a normalised name (case and punctuation ignored, a plural `s`
   dropped), each entry with the public rule set it comes from and the rule's `for:` where the rule states one;
4. the metric family the rule's expression reads (the `generatorURL`'s `g0.expr`), through `METRIC_FAMILIES`;
5. the description/summary text: "XID 79", "Xid (PCI:…): 79", "xid=79".

An alert none of these explain is not a fault gpu-remedy handles (kube-prometheus' `TargetDown`, `Watchdog`): the
receiver acknowledges, counts and ignores it. Plain Python; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from remedy.detect.signals import SignalKind


@dataclass(frozen=True)
class RuleMeaning:
    kind: SignalKind | None  # None: a rule gpu-remedy knows and deliberately does not act on
    source: str  # where the rule is published
    for_seconds: float = 0.0  # the rule's `for:`: the condition held this long before the alert fired
    labels: dict[str, str] = field(default_factory=dict)  # labels the rule implies (e.g. counter=fatal)


_KP = "prometheus-community/helm-charts charts/kube-prometheus-stack (kubernetes-mixin rules)"
_DCGM_COMMUNITY = ("dcgm-exporter community rule files (`expr: DCGM_FI_DEV_XID_ERRORS > 0` / "
                   "`increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0`), see tests/realdata/SOURCES.md 'alert rule sets'")
_OWN = "gpu-remedy deployments/prometheus/rules.yml"
_GPU_OP_NODE = ("NVIDIA/gpu-operator assets/state-node-status-exporter/0800_prometheus_rule_openshift.yaml "
                "@ 05ccfecf: the GPU software stack's deployment on one node")
_GPU_OP_CLUSTER = ("NVIDIA/gpu-operator assets/state-operator-metrics/0400_prometheus_rule_openshift.yaml "
                   "@ 05ad7af8: the operator itself, no node")


def normalise(name: str) -> str:
    """`GPUXidError`, `GPUXIDError`, `gpu_xid_errors` → `gpuxiderror`."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return key[:-1] if key.endswith("s") and len(key) > 3 else key


def _rules(*entries: tuple[str, SignalKind | None, str, float, dict[str, str]]) -> dict[str, RuleMeaning]:
    return {normalise(n): RuleMeaning(k, src, f, dict(lab)) for n, k, src, f, lab in entries}


RULES: dict[str, RuleMeaning] = _rules(
    # gpu-remedy's own names first (their `signal` label says the same)
    ("GpuXidError", SignalKind.XID, _OWN, 0, {}),
    ("NvSwitchSxidError", SignalKind.SXID, _OWN, 0, {}),
    ("GpuRowRemapFailure", SignalKind.ROW_REMAP_FAILURE, _OWN, 0, {}),
    ("GpuRowRemapPending", SignalKind.ROW_REMAP_PENDING, _OWN, 0, {}),
    ("GpuUncorrectableRemappedRows", SignalKind.UNCORRECTABLE_REMAP, _OWN, 0, {}),
    ("GpuCorrectableRemappedRows", SignalKind.CORRECTABLE_REMAP, _OWN, 0, {}),
    ("GpuHwSlowdown", SignalKind.HW_SLOWDOWN, _OWN, 0, {}),
    ("GpuThermalThrottle", SignalKind.THERMAL_THROTTLE, _OWN, 0, {}),
    ("GpuPowerBrake", SignalKind.POWER_BRAKE, _OWN, 0, {}),
    ("GpuPcieLinkDegraded", SignalKind.PCIE_DEGRADED, _OWN, 0, {}),
    ("GpuNvlinkCrcErrors", SignalKind.NVLINK_ERROR, _OWN, 0, {}),
    ("GpuNvlinkReplayRecoveryErrors", SignalKind.NVLINK_ERROR, _OWN, 0, {}),
    ("InfinibandPortDown", SignalKind.IB_PORT_DOWN, _OWN, 0, {}),
    ("InfinibandCumulativeDowntime", SignalKind.IB_DOWNTIME, _OWN, 0, {}),
    ("NcclWatchdogTimeout", SignalKind.NCCL_TIMEOUT, _OWN, 0, {}),
    ("TrainingLossNan", SignalKind.LOSS_NAN, _OWN, 0, {}),
    ("NodeNotReady", SignalKind.NODE_NOT_READY, _OWN, 0, {}),
    ("GpuEarlyWarning", SignalKind.EARLY_WARNING, _OWN, 0, {}),
    # community dcgm-exporter rule files: the same XID gauge under other spellings (normalise folds case and plural)
    ("GPUXidError", SignalKind.XID, _DCGM_COMMUNITY, 0, {}),
    ("GPUXidErrorFatalPattern", SignalKind.XID, _DCGM_COMMUNITY, 0, {}),
    ("GPURowRemapFailure", SignalKind.ROW_REMAP_FAILURE,
     "dcgm-exporter field DCGM_FI_DEV_ROW_REMAP_FAILURE (etc/dcp-metrics-included.csv); community rule name", 0, {}),
    ("GPURowRemapPending", SignalKind.ROW_REMAP_PENDING,
     "dcgm-exporter field DCGM_FI_DEV_ROW_REMAP_PENDING; community rule name", 0, {}),
    ("NVLinkFatalError", SignalKind.NVLINK_ERROR,
     "DCGM health watch NVLink fatal errors (DCGM_FI_DEV_NVLINK_*_ERROR_COUNT; DCGM_FR_NVLINK_ERROR_CRITICAL); "
     "community rule name", 0, {"counter": "fatal"}),
    ("GPUNVLinkFatalError", SignalKind.NVLINK_ERROR, "as NVLinkFatalError", 0, {"counter": "fatal"}),
    # kube-prometheus-stack (kubernetes-mixin): node conditions, with the rule's `for:`
    ("KubeNodeNotReady", SignalKind.NODE_NOT_READY, _KP + " `for: 15m`", 900, {}),
    ("KubeNodeUnreachable", SignalKind.NODE_NOT_READY, _KP + " `for: 15m`", 900, {}),
    # rules kube-prometheus ships that are about the monitoring, not a GPU node: acknowledged, counted, ignored
    ("TargetDown", None, "prometheus-community/helm-charts kube-prometheus-stack general.rules `for: 10m`", 600, {}),
    ("Watchdog", None, "kube-prometheus-stack general.rules: always firing, proves the pipeline works", 0, {}),
    ("InfoInhibitor", None, "kube-prometheus-stack general.rules: inhibits info alerts", 0, {}),
    ("KubeNodeReadinessFlapping", None, _KP + " (a flapping kubelet; NodeNotReady covers the fault)", 900, {}),
    # NVIDIA NVSentinel health-event check names (health-monitors/*): the XID/SXid monitors' events posted as alerts
    ("SysLogsXIDError", SignalKind.XID, "NVIDIA/NVSentinel health-monitors/syslog-health-monitor (XID check)", 0, {}),
    ("SysLogsSXIDError", SignalKind.SXID, "NVIDIA/NVSentinel health-monitors/syslog-health-monitor (SXid check)", 0,
     {}),
    ("SysLogsGPUFallenOff", SignalKind.XID, "NVIDIA/NVSentinel syslog-health-monitor (GPU fell off the bus)", 0,
     {"xid": "79"}),
    # node-problem-detector conditions (kubernetes/node-problem-detector config/*.json): not GPU faults; kernel
    # deadlocks and read-only filesystems are the kubelet's and NotReady's business
    ("KernelDeadlock", None, "kubernetes/node-problem-detector config/kernel-monitor.json condition", 0, {}),
    ("ReadonlyFilesystem", None, "kubernetes/node-problem-detector config/kernel-monitor.json condition", 0, {}),
    ("FrequentKubeletRestart", None, "kubernetes/node-problem-detector config/systemd-monitor-counter.json", 0, {}),
    ("FrequentDockerRestart", None, "kubernetes/node-problem-detector config/systemd-monitor-counter.json", 0, {}),
    ("FrequentContainerdRestart", None, "kubernetes/node-problem-detector config/systemd-monitor-counter.json", 0,
     {}),
    ("CorruptDockerOverlay2", None, "kubernetes/node-problem-detector config/docker-monitor.json condition", 0, {}),
    ("KubeletUnhealthy", None, "kubernetes/node-problem-detector config/health-checker-kubelet.json condition", 0,
     {}),
    ("ContainerRuntimeUnhealthy", None,
     "kubernetes/node-problem-detector config/health-checker-containerd.json condition", 0, {}),
    # The NVIDIA GPU operator's own PrometheusRules. They watch the operator's deployment of the GPU software stack
    # (driver, container toolkit, CUDA validation, device plugin) and its reconcile loop, not the GPUs: the operator
    # re-deploys its operands itself, and gpu-remedy's remedies (reset, reboot, replace) do not fix a driver container
    # that fails to deploy. A node that exposes no GPU gets no GPU pod, so no run is hurt while it waits: acknowledged,
    # counted, ignored (a GPU that fell off the bus is XID 79, which these rules do not read).
    ("GPUOperatorNodeDeploymentFailed", None, _GPU_OP_NODE + " (gpu_operator_node_device_plugin_devices_total == 0, "
     "`for: 30m`)", 1800, {}),
    ("GPUOperatorNodeDeploymentDriverFailed", None, _GPU_OP_NODE + " (gpu_operator_node_driver_validation == 0, "
     "`for: 30m`)", 1800, {}),
    ("GPUOperatorNodeDeploymentToolkitFailed", None, _GPU_OP_NODE + " (gpu_operator_node_toolkit_ready == 0, "
     "`for: 30m`)", 1800, {}),
    ("GPUOperatorNodeDeploymentCudaFailed", None, _GPU_OP_NODE + " (gpu_operator_node_cuda_ready == 0, `for: 30m`)",
     1800, {}),
    ("GPUOperatorReconciliationFailed", None, _GPU_OP_CLUSTER + " (the operator's reconcile loop, `for: 1h`)", 3600,
     {}),
    ("GPUOperatorReconciliationFailedNfdLabelsMissing", None, _GPU_OP_CLUSTER + " (NFD labels missing, `for: 30m`)",
     1800, {}),
    ("GPUOperatorOpenshiftDriverToolkitEnabledNfdTooOld", None, _GPU_OP_CLUSTER + " (OpenShift DTK, `for: 30m`)",
     1800, {}),
    ("GPUOperatorOpenshiftDriverToolkitEnabledImageStreamMissing", None,
     _GPU_OP_CLUSTER + " (OpenShift DTK, `for: 30m`)", 1800, {}),
    ("GPUOperatorOpenshiftDriverToolkitEnabledImageStreamBroken", None,
     _GPU_OP_CLUSTER + " (OpenShift DTK, `for: 30m`)", 1800, {}),
    ("GPUOperatorOpenshiftDriverToolkitEnabledImageTagsMissing", None,
     _GPU_OP_CLUSTER + " (OpenShift DTK, `for: 30m`)", 1800, {}),
    ("GPUOperatorDriverAutoUpgradeFailures", None, _GPU_OP_CLUSTER + " (driver auto-upgrade failed on some nodes, "
     "`for: 30m`)", 1800, {}),
)

# Metric families a rule's expression may read (generatorURL `g0.expr`), first match wins.
METRIC_FAMILIES: tuple[tuple[str, SignalKind, dict[str, str]], ...] = (
    ("DCGM_FI_DEV_XID_ERRORS", SignalKind.XID, {}),
    ("DCGM_EXP_XID_ERRORS_COUNT", SignalKind.XID, {}),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", SignalKind.ROW_REMAP_FAILURE, {}),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", SignalKind.ROW_REMAP_PENDING, {}),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", SignalKind.UNCORRECTABLE_REMAP, {}),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", SignalKind.CORRECTABLE_REMAP, {}),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT", SignalKind.NVLINK_ERROR, {"counter": "crc"}),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT", SignalKind.NVLINK_ERROR, {"counter": "replay"}),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT", SignalKind.NVLINK_ERROR, {"counter": "recovery"}),
    ("node_infiniband_state_id", SignalKind.IB_PORT_DOWN, {}),
    ("node_infiniband_physical_state_id", SignalKind.IB_PORT_DOWN, {}),
)

_COUNTS = re.compile(r"\b(?:increase|rate|irate|delta|idelta|changes|resets|count_over_time)\s*\(")
_XID_TEXT = re.compile(r"(?i)\bxid\b[\s:=#]*(?:\([^)]*\)\s*[:,]?\s*)?(?:error\s*(?:code)?\s*[:=]?\s*)?(\d{1,5})\b")


@dataclass(frozen=True)
class Reading:
    """What an alert's content says: the kind (None = not a fault gpu-remedy handles), the XID and where it was
    read, the rule's `for:` to credit, labels the rule implies, and which clue decided (for the ledger)."""

    kind: SignalKind | None
    xid_text: str | None = None
    xid_from: str = ""  # xid | err_code | value | description | rule
    for_seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    by: str = ""  # signal-label | xid-label | rule:<source> | metric:<family> | description


def expression_of(generator_url: str) -> str:
    """The PromQL of the rule behind an alert (Prometheus' generatorURL carries it as g0.expr), or ""."""
    try:
        return (parse_qs(urlsplit(generator_url).query).get("g0.expr") or [""])[0]
    except ValueError:
        return ""


def xid_in_text(*texts: str) -> str | None:
    for text in texts:
        m = _XID_TEXT.search(text or "")
        if m:
            return m.group(1)
    return None


def read_alert(labels: dict[str, str], annotations: dict[str, str], generator_url: str = "") -> Reading:
    """The meaning of one alert from its content (see the module doc for the order)."""
    name = labels.get("alertname", "")
    rule = RULES.get(normalise(name)) if name else None
    xid_label = (labels.get("xid") or "").strip()
    err_code = (labels.get("err_code") or "").strip()
    no_error = err_code in ("0", "0.0")  # dcgm-exporter's "No Error": the gauge is at rest
    if no_error:
        err_code = ""
    texts = (annotations.get("description", ""), annotations.get("summary", ""), annotations.get("message", ""))
    expr = expression_of(generator_url)
    family = next(((f, k, lab) for f, k, lab in METRIC_FAMILIES if f in expr), None)
    for_s = rule.for_seconds if rule else 0.0
    implied = dict(rule.labels) if rule else {}
    if xid_label:
        return Reading(SignalKind.XID, xid_label, "xid", for_s, implied, "xid-label")
    if err_code:
        return Reading(SignalKind.XID, err_code, "err_code", for_s, implied, "err_code-label")
    if no_error and not xid_label:
        return Reading(None, for_seconds=for_s, by="err_code=0: dcgm-exporter reports no XID")
    kind, by = None, ""
    if rule is not None:
        kind, by = rule.kind, f"rule:{rule.source}"
        if kind is None:
            return Reading(None, for_seconds=for_s, by=by)
    elif family is not None:
        kind, by = family[1], f"metric:{family[0]}"
        implied = dict(family[2])
    if kind is SignalKind.XID or kind is None:
        if implied.get("xid"):
            return Reading(SignalKind.XID, implied.pop("xid"), "rule", for_s, implied, by)
        value = (annotations.get("value") or "").strip()
        # `increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0` alerts with the increase as its value, not the code
        if kind is SignalKind.XID and value and not _COUNTS.search(expr):
            return Reading(SignalKind.XID, value, "value", for_s, implied, by)
        code = xid_in_text(*texts)
        if code is not None:
            return Reading(SignalKind.XID, code, "description", for_s, implied, by or "description")
    return Reading(kind, None, "", for_s, implied, by)


__all__ = ["METRIC_FAMILIES", "RULES", "Reading", "RuleMeaning", "expression_of", "normalise", "read_alert",
           "xid_in_text"]
