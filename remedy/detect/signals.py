"""Typed signals and the one decision per signal: which remediation path applies.

Parsers (kernel log, dcgm-exporter, Alertmanager, job logs) turn their input into `Signal`s; the triage flow
calls `classify(signal, thresholds)` and acts on the `Verdict`. Plain Python: no Prefect import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from remedy.domain.durations import human_duration
from remedy.domain.xid import (
    EARLY_WARNING_XIDS,
    NVLINK5_XIDS,
    RemediationPath,
    decode_nvlink5,
    lookup,
    recovery_action_path,
)
from remedy.settings.signals import SignalThresholds


class SignalKind(StrEnum):
    XID = "xid"
    SXID = "sxid"  # NVSwitch error
    ROW_REMAP_FAILURE = "row-remap-failure"
    ROW_REMAP_PENDING = "row-remap-pending"
    UNCORRECTABLE_REMAP = "uncorrectable-remap"
    CORRECTABLE_REMAP = "correctable-remap"  # trend handled by the early-warning module
    HW_SLOWDOWN = "hw-slowdown"
    THERMAL_THROTTLE = "thermal-throttle"
    POWER_BRAKE = "power-brake"
    PCIE_DEGRADED = "pcie-degraded"
    NVLINK_ERROR = "nvlink-error"
    IB_PORT_DOWN = "ib-port-down"
    IB_DOWNTIME = "ib-downtime"  # cumulative, see remedy.detect.ib
    NCCL_TIMEOUT = "nccl-timeout"
    LOSS_NAN = "loss-nan"
    NODE_NOT_READY = "node-not-ready"
    EARLY_WARNING = "early-warning"  # a detector expects this node to fail soon (remedy.warn)
    UNKNOWN = "unknown"


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Signal:
    """One observation about one node (and maybe one GPU).

    `value` depends on the kind: the XID count or metric sample, seconds a condition has lasted
    (throttle, NotReady, IB outage), an error rate (NVLink CRC, per second), a remap count.
    `None` means the source gave no number (a log line, an alert without a value annotation).
    """

    node: str
    kind: SignalKind
    gpu: int | None = None
    xid: int | None = None
    value: float | None = None
    at: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str = ""  # dmesg | dcgm | alertmanager | joblog | ib-ports | ...
    raw: str = ""  # the line / sample / alert it came from, for the ledger and operators
    resolved: bool = False  # Alertmanager said the condition ended; kept, never dropped
    ended_at: datetime | None = None  # when a resolved condition ended (Alertmanager endsAt)
    fingerprint: str = ""  # Alertmanager's alert fingerprint when it came from there

    def __post_init__(self) -> None:
        if not isinstance(self.node, str) or not self.node.strip():
            raise ValueError(f"signal {self.kind}: node must be a non-empty string, got {self.node!r}")
        if not isinstance(self.kind, SignalKind):
            try:
                object.__setattr__(self, "kind", SignalKind(self.kind))
            except ValueError:
                allowed = ", ".join(k.value for k in SignalKind)
                raise ValueError(f"unknown signal kind {self.kind!r} (one of: {allowed})") from None
        if self.kind in (SignalKind.XID,) and self.xid is None:
            raise ValueError(f"signal xid on {self.node}: the XID code is missing")
        if self.gpu is not None and (isinstance(self.gpu, bool) or not isinstance(self.gpu, int) or self.gpu < 0):
            raise ValueError(f"signal {self.kind} on {self.node}: gpu must be a non-negative integer, got {self.gpu!r}")
        if self.value is not None and isinstance(self.value, float) and math.isnan(self.value):
            object.__setattr__(self, "value", None)  # NaN = no number; keep one spelling of "missing"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind.value,
            "gpu": self.gpu,
            "xid": self.xid,
            "value": self.value,
            "at": self.at.isoformat() if self.at else None,
            "labels": dict(self.labels),
            "source": self.source,
            "raw": self.raw,
            "resolved": self.resolved,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "fingerprint": self.fingerprint,
        }

    def evidence(self) -> dict[str, Any]:
        """What the incident keeps of this signal, so triage decides on the value, not just the kind: the number
        and its unit, the labels (port, counter, severity, GPU UUID/serial), the raw text (XID 154's recovery
        action is in it), when it started and the alert's identity. Raw text is cut to RAW_LIMIT characters."""
        out: dict[str, Any] = {"value": self.value, "unit": UNITS.get(self.kind, ""), "labels": dict(self.labels),
                               "source": self.source, "raw": self.raw[:RAW_LIMIT]}
        if self.at is not None:
            out["starts_at"] = self.at.isoformat()
        if self.fingerprint:
            out["alert_fingerprint"] = self.fingerprint
        if self.value is not None and UNITS.get(self.kind) == "s":
            out["duration_seconds"] = self.value
        for key in ("UUID", "uuid", "gpu_uuid", "serial", "gpu_serial"):
            if self.labels.get(key):
                out["gpu_uuid" if "uuid" in key.lower() else "gpu_serial"] = self.labels[key]
        return out

    @classmethod
    def from_evidence(cls, node: str, kind: SignalKind, *, gpu: int | None, xid: int | None,
                      evidence: dict[str, Any]) -> Signal:
        """The signal an incident was opened on, rebuilt from its evidence (see `evidence`)."""
        value = evidence.get("value")
        return cls(node=node, kind=kind, gpu=gpu, xid=xid,
                   value=float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                   labels={str(k): str(v) for k, v in (evidence.get("labels") or {}).items()},
                   source=str(evidence.get("source") or ""), raw=str(evidence.get("raw") or ""),
                   fingerprint=str(evidence.get("alert_fingerprint") or ""))


RAW_LIMIT = 4000
# The unit of Signal.value by kind (see the rules below): seconds a condition lasted, an error rate, a count.
UNITS: dict[SignalKind, str] = {
    SignalKind.HW_SLOWDOWN: "s", SignalKind.THERMAL_THROTTLE: "s", SignalKind.POWER_BRAKE: "s",
    SignalKind.NODE_NOT_READY: "s", SignalKind.IB_PORT_DOWN: "s", SignalKind.IB_DOWNTIME: "s",
    SignalKind.NVLINK_ERROR: "errors", SignalKind.ROW_REMAP_FAILURE: "count", SignalKind.ROW_REMAP_PENDING: "count",
    SignalKind.UNCORRECTABLE_REMAP: "rows", SignalKind.CORRECTABLE_REMAP: "rows",
}


@dataclass(frozen=True)
class Verdict:
    path: RemediationPath
    severity: Severity
    rule: str  # names the rule that matched, e.g. "xid-catalog", "ib-single-outage"
    explanation: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path.value, "severity": self.severity.value, "rule": self.rule, "explanation": self.explanation}


_CRITICAL_PATHS = {
    RemediationPath.RESET_GPU,
    RemediationPath.REBOOT,
    RemediationPath.REPLACE,
    RemediationPath.ISOLATE,
    RemediationPath.ESCALATE,
}


def _severity_for(path: RemediationPath) -> Severity:
    if path in _CRITICAL_PATHS:
        return Severity.CRITICAL
    if path is RemediationPath.IGNORE:
        return Severity.INFO
    return Severity.WARNING


def _where(signal: Signal) -> str:
    return signal.node + ("" if signal.gpu is None else f" GPU {signal.gpu}")


def classify(signal: Signal, thresholds: SignalThresholds | None = None, *, recurrences: int = 1) -> Verdict:
    """Decide the remediation path for one signal.

    `recurrences` is how many times this fault (same node, GPU, kind, XID) has been seen, this one included;
    at `thresholds.xid_recurrence_limit` an XID takes its catalog recurrence path (seed 002 §4.3.5).
    """
    t = thresholds or SignalThresholds()
    if recurrences < 1:
        raise ValueError(f"recurrences must be >= 1 (this occurrence included), got {recurrences}")
    if signal.resolved:
        return Verdict(RemediationPath.IGNORE, Severity.INFO, "alert-resolved",
                       f"{signal.kind.value} on {_where(signal)} resolved; recorded, no new action")
    rule = _RULES.get(signal.kind)
    if rule is None:  # pragma: no cover - every kind has a rule; guarded by a test
        raise ValueError(f"no rule for signal kind {signal.kind}")
    return rule(signal, t, recurrences)


# --- one function per rule -------------------------------------------------------------------

def _xid(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    entry = lookup(int(s.xid))  # type: ignore[arg-type]  # Signal guarantees xid for this kind
    where = _where(s)
    if entry.code == 154 and s.raw:
        path = recovery_action_path(s.raw)
        if path is not None:
            return Verdict(path, _severity_for(path), "xid-154-recovery-action",
                           f"XID 154 on {where}: the driver's new recovery action → {path.value}")
    if entry.code in NVLINK5_XIDS and s.raw:
        path, why = explain_nvlink5(s.raw, entry.code)
        if path is RemediationPath.WATCH:
            return Verdict(path, Severity.WARNING, "xid-nvlink5-no-reset", f"XID {entry.code} on {where}: {why}")
        if path is RemediationPath.RESET_GPU and n < t.xid_recurrence_limit:
            return Verdict(path, Severity.CRITICAL, "xid-nvlink5-reset", f"XID {entry.code} on {where}: {why}")
    if n >= t.xid_recurrence_limit and entry.recurrence_path != entry.path:
        path = entry.recurrence_path
        return Verdict(path, _severity_for(path), "xid-recurrence",
                       f"XID {entry.code} ({entry.description}) seen {n} times on {where} "
                       f"(limit {t.xid_recurrence_limit}): stop retrying {entry.path.value}, {path.value}")
    return Verdict(entry.path, _severity_for(entry.path), "xid-catalog" if entry.known else "xid-unknown",
                   f"XID {entry.code} ({entry.description}) on {where}: {entry.reason}")


# What NVIDIA's XID catalog says about an XID 144-150 line, in an operator's words (remedy.domain.xid has the
# decode table). Subcodes the catalog singles out get their own sentence.
_NVL5_SUBCODE_NOTES = {
    (149, 38): "it points at software or a user action on the link, not at the GPU",
    (149, 40): "it points at the host machine around the GPU, not at the GPU itself",
}
_LINK = re.compile(r"\bLink\s+(\d{1,3})\b")


def explain_nvlink5(line: str, xid: int | None = None) -> tuple[RemediationPath | None, str]:
    """What an XID 144-150 kernel line means and what gpu-remedy does about it, for an operator: (the path, the
    sentence). NVIDIA's catalog decides per NVLink unit, subcode and error status, not by the word "Fatal" in the
    line; a line the catalog has no entry for falls back to that word. (None, why) when the line carries no unit and
    registers to decode."""
    d = decode_nvlink5(line, xid)
    if d is None:
        low = f" {line.lower()} "
        if " nonfatal " in low or " non-fatal " in low:
            return RemediationPath.WATCH, ("the kernel line says the NVLink error is non-fatal and gives nothing more "
                                           "to decode: gpu-remedy does not reset the GPU; it watches the link")
        if " fatal " in low:
            return RemediationPath.RESET_GPU, ("the kernel line says the NVLink error is fatal and gives nothing more "
                                               "to decode: gpu-remedy resets the GPU")
        return None, "the line has no NVLink unit and registers to decode: the XID's own entry decides"
    link = _LINK.search(line)
    what = (f"NVLink error in the {d.unit} unit" + (f" on link {int(link.group(1))}" if link else "")
            + f", subcode {d.subcode}" + (f", error status {d.error_status:#x}" if d.error_status is not None else ""))
    note = _NVL5_SUBCODE_NOTES.get((d.xid, d.subcode))
    note = f" ({note})" if note else ""
    if d.bucket == "IGNORE":
        despite = ", although the line says 'Fatal'" if d.fatal_word else ""
        return RemediationPath.WATCH, (
            f"{what}. NVIDIA's XID catalog says this one needs no recovery{note}{despite}. "
            "gpu-remedy does not reset the GPU: it records the event and watches the link; a later error that does "
            "need a reset is acted on when it comes")
    if d.bucket == "XID_154_EVAL":
        return RemediationPath.WATCH, (
            f"{what}. NVIDIA's XID catalog says the driver decides the recovery and reports it in the XID 154 that "
            "follows. gpu-remedy does not reset the GPU on this line alone: it does what that XID 154 asks (reset "
            "the GPU or reboot the node) when it arrives")
    if d.bucket == "RESET_GPU":
        return RemediationPath.RESET_GPU, (
            f"{what}. NVIDIA's XID catalog says the GPU must be reset to recover the link{note}. gpu-remedy resets "
            "the GPU; if it happens again on the same GPU, the node is replaced")
    # the catalog has no entry for this unit, subcode and status: the driver's own word decides
    if d.fatal_word:
        return RemediationPath.RESET_GPU, (
            f"{what}. NVIDIA's XID catalog has no entry for it; the line says 'Fatal', so gpu-remedy resets the GPU")
    return RemediationPath.WATCH, (
        f"{what}. NVIDIA's XID catalog has no entry for it; the line says 'Nonfatal', so gpu-remedy does not reset "
        "the GPU: it watches the link")


def _sxid(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    # The kernel line says "Fatal" or "Non-fatal"; fatal NVSwitch errors need the switch and its GPUs reset,
    # which on an HGX baseboard means rebooting the node (NVIDIA Fabric Manager guide; confidence: medium).
    fatal = s.labels.get("severity", "").lower() == "fatal"
    code = s.labels.get("sxid", "?")
    if fatal:
        return Verdict(RemediationPath.REBOOT, Severity.CRITICAL, "sxid-fatal",
                       f"fatal NVSwitch SXid {code} on {s.node}: reset the fabric (reboot the node)")
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "sxid-nonfatal",
                   f"non-fatal NVSwitch SXid {code} on {s.node}: watch for recurrence")


def _positive(v: float | None) -> bool:
    return v is None or v > 0


def _remap_failure(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    if not _positive(s.value):
        return Verdict(RemediationPath.IGNORE, Severity.INFO, "row-remap-failure-clear", f"no remap failure on {_where(s)}")
    return Verdict(RemediationPath.REPLACE, Severity.CRITICAL, "row-remap-failure",
                   f"row remapping failed on {_where(s)}: a bank reached {t.remap_rows_per_bank_limit} uncorrectable "
                   "remaps and has no spare rows (NVIDIA memory error management); replace")


def _remap_pending(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    if not _positive(s.value):
        return Verdict(RemediationPath.IGNORE, Severity.INFO, "row-remap-pending-clear", f"no remap pending on {_where(s)}")
    return Verdict(RemediationPath.RESET_GPU, Severity.CRITICAL, "row-remap-pending",
                   f"row remap pending on {_where(s)}: a GPU reset activates it")


def _uncorrectable(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    if not _positive(s.value):
        return Verdict(RemediationPath.IGNORE, Severity.INFO, "uncorrectable-remap-none", f"no uncorrectable remaps on {_where(s)}")
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "uncorrectable-remap",
                   f"{s.value if s.value is not None else 'some'} uncorrectable remapped rows on {_where(s)}: watch; "
                   f"the remap-failure flag (a bank at {t.remap_rows_per_bank_limit}) triggers replacement "
                   "(in the field, rising counts preceded a dead GPU)")


def _correctable(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    return Verdict(RemediationPath.WATCH, Severity.INFO, "correctable-remap-trend",
                   f"{s.value if s.value is not None else 'some'} correctable remapped rows on {_where(s)}: the trend "
                   "matters, not the count; handed to early warning")


def _throttle(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    what = s.kind.value
    if s.value is not None and s.value >= t.throttle_replace_seconds:
        return Verdict(RemediationPath.REPLACE, Severity.CRITICAL, f"{what}-persistent",
                       f"{what} on {_where(s)} for {human_duration(s.value)} (>= {human_duration(t.throttle_replace_seconds)}): "
                       "fail-slow node drags every step; replace")
    if s.value is not None and s.value < t.throttle_warn_seconds:
        return Verdict(RemediationPath.WATCH, Severity.INFO, f"{what}-transient",
                       f"{what} on {_where(s)} for {human_duration(s.value)} (< {human_duration(t.throttle_warn_seconds)}): keep observing")
    lasted = "duration unknown" if s.value is None else human_duration(s.value)
    return Verdict(RemediationPath.WATCH, Severity.WARNING, what,
                   f"{what} on {_where(s)} ({lasted}): watch; replaced if it persists {human_duration(t.throttle_replace_seconds)}")


def _pcie(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    detail = ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k.startswith("pcie_"))
    return Verdict(RemediationPath.REPLACE, Severity.WARNING, "pcie-link-below-max",
                   f"PCIe link below its maximum on {_where(s)}{f' ({detail})' if detail else ''}: bandwidth lost "
                   "without any XID; replace at the next checkpoint")


def _nvlink(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    counter = s.labels.get("counter", "")
    if counter == "fatal" and _positive(s.value):
        # a fatal NVLink error (DCGM health: DCGM_FR_NVLINK_ERROR_CRITICAL) takes the link down: the GPU is reset
        return Verdict(RemediationPath.RESET_GPU, Severity.CRITICAL, "nvlink-fatal",
                       f"fatal NVLink error on {_where(s)}: the link is down; reset the GPU")
    if s.value is None:
        return Verdict(RemediationPath.WATCH, Severity.WARNING, "nvlink-errors-rate-unknown",
                       f"NVLink {counter or 'error'} counter non-zero on {_where(s)}; rate unknown from one sample: watch")
    if counter in ("replay", "recovery"):
        if s.value >= t.nvlink_replay_recovery_errors:
            return Verdict(RemediationPath.RESET_GPU, Severity.CRITICAL, "nvlink-replay-recovery",
                           f"{s.value:.0f} new NVLink {counter} errors on {_where(s)} "
                           f"(>= {t.nvlink_replay_recovery_errors}, DCGM health limit): reset the GPU")
        return Verdict(RemediationPath.IGNORE, Severity.INFO, "nvlink-quiet", f"no new NVLink {counter} errors on {_where(s)}")
    if s.value >= t.nvlink_crc_errors_per_second:
        return Verdict(RemediationPath.RESET_GPU, Severity.CRITICAL, "nvlink-crc-rate",
                       f"NVLink CRC errors at {s.value:.1f}/s on {_where(s)} "
                       f"(>= {t.nvlink_crc_errors_per_second:.0f}/s, DCGM health limit): reset the GPU")
    if s.value > 0:
        return Verdict(RemediationPath.WATCH, Severity.WARNING, "nvlink-crc-low",
                       f"NVLink CRC errors at {s.value:.2f}/s on {_where(s)}: below the reset limit, watch")
    return Verdict(RemediationPath.IGNORE, Severity.INFO, "nvlink-quiet", f"no NVLink errors on {_where(s)}")


def _ib_port_down(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    port = s.labels.get("port", "")
    if s.value is not None and s.value >= t.ib_single_outage_seconds:
        return Verdict(RemediationPath.RESTART_APP, Severity.CRITICAL, "ib-single-outage",
                       f"IB port {port} on {s.node} down {human_duration(s.value)} (>= {human_duration(t.ib_single_outage_seconds)} "
                       "transport timeout): the run's connections are gone; restart from checkpoint now")
    lasted = "so far" if s.value is None else human_duration(s.value)
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "ib-port-down",
                   f"IB port {port} on {s.node} down ({lasted}): one flap is not a fault; cumulative downtime is tracked")


def _ib_downtime(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    port = s.labels.get("port", "")
    if s.value is not None and s.value >= t.ib_cumulative_seconds:
        return Verdict(RemediationPath.REPLACE, Severity.CRITICAL, "ib-cumulative-downtime",
                       f"IB port {port} on {s.node} down {human_duration(s.value)} in total within {human_duration(t.ib_window_seconds)} "
                       f"(>= {human_duration(t.ib_cumulative_seconds)}): cumulative downtime, not flap count, kills runs")
    total = "unknown" if s.value is None else human_duration(s.value)
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "ib-downtime-below-budget",
                   f"IB port {port} on {s.node}: {total} down in the window, below {human_duration(t.ib_cumulative_seconds)}")


def _isolate(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    what = "NCCL watchdog timeout" if s.kind is SignalKind.NCCL_TIMEOUT else "loss became NaN/zero"
    return Verdict(RemediationPath.ISOLATE, Severity.CRITICAL, s.kind.value,
                   f"{what} in the job on {s.node}: the symptom names no culprit; isolate by bisection")


def _not_ready(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    if s.value is not None and s.value >= t.node_not_ready_seconds:
        return Verdict(RemediationPath.REPLACE, Severity.CRITICAL, "node-not-ready-persistent",
                       f"{s.node} NotReady for {human_duration(s.value)} (>= {human_duration(t.node_not_ready_seconds)}): replace")
    lasted = "duration unknown" if s.value is None else human_duration(s.value)
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "node-not-ready",
                   f"{s.node} NotReady ({lasted}): replaced after {human_duration(t.node_not_ready_seconds)}")


def is_early_warning(signal: str, xid: int | None) -> bool:
    """Does this incident announce a failure (weighed as a swap at a checkpoint) rather than report one?"""
    return signal == SignalKind.EARLY_WARNING.value or (signal == SignalKind.XID.value and xid in EARLY_WARNING_XIDS)


def _early_warning(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    detector = s.labels.get("detector") or "a detector"
    return Verdict(RemediationPath.WATCH, Severity.WARNING, "early-warning",
                   f"{detector} expects {_where(s)} to fail soon: triage weighs a swap at the job's next checkpoint "
                   "against waiting for the failure")


def _unknown(s: Signal, t: SignalThresholds, n: int) -> Verdict:
    name = s.labels.get("alertname", "") or s.raw[:80]
    return Verdict(RemediationPath.ESCALATE, Severity.WARNING, "unknown-signal",
                   f"unrecognised signal on {_where(s)} ({name}): a human decides")


_RULES = {
    SignalKind.XID: _xid,
    SignalKind.SXID: _sxid,
    SignalKind.ROW_REMAP_FAILURE: _remap_failure,
    SignalKind.ROW_REMAP_PENDING: _remap_pending,
    SignalKind.UNCORRECTABLE_REMAP: _uncorrectable,
    SignalKind.CORRECTABLE_REMAP: _correctable,
    SignalKind.HW_SLOWDOWN: _throttle,
    SignalKind.THERMAL_THROTTLE: _throttle,
    SignalKind.POWER_BRAKE: _throttle,
    SignalKind.PCIE_DEGRADED: _pcie,
    SignalKind.NVLINK_ERROR: _nvlink,
    SignalKind.IB_PORT_DOWN: _ib_port_down,
    SignalKind.IB_DOWNTIME: _ib_downtime,
    SignalKind.NCCL_TIMEOUT: _isolate,
    SignalKind.LOSS_NAN: _isolate,
    SignalKind.NODE_NOT_READY: _not_ready,
    SignalKind.EARLY_WARNING: _early_warning,
    SignalKind.UNKNOWN: _unknown,
}
