"""Alertmanager webhook payloads (version "4") → signals.

Structure is validated with pydantic; every error names where it is ("alerts[2].startsAt: …"). Each alert
becomes one `Signal`; resolved alerts come back flagged `resolved=True`, never dropped.

Label mapping:
- node: in the receiver, `remedy.receiver.identity` checks each candidate label against the cluster (node,
  kubernetes_node, nodename, Hostname → pod, instance → address, pod+namespace); alone (the CLI), the first of
  NODE_CANDIDATES present, `instance` without its `:port`;
- gpu: `gpu`; xid: `xid`, else `err_code` (dcgm-exporter), else the `value` annotation (the DCGM_FI_DEV_XID_ERRORS
  sample is the code), else the description's text (remedy.detect.rulesets);
- value: `value` annotation (seconds a condition lasted, an error rate, a count — see each rule); for NotReady and
  an IB port down without one: the rule's `for:` plus the time since it fired;
- kind: a `signal` label naming a SignalKind wins, else the alert's content (remedy.detect.rulesets: the XID code,
  the rule's published meaning, the metric family of its expression), else unknown.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remedy.detect.signals import Signal, SignalKind
from remedy.domain.xid import XID_MAX, XID_MIN
from remedy.errors import RemedyError

# alertname → SignalKind. gpu-remedy's own rule names first, then common kube-prometheus names.
ALERTNAME_KINDS: dict[str, SignalKind] = {
    "GpuXidError": SignalKind.XID,
    "NvSwitchSxidError": SignalKind.SXID,
    "GpuRowRemapFailure": SignalKind.ROW_REMAP_FAILURE,
    "GpuRowRemapPending": SignalKind.ROW_REMAP_PENDING,
    "GpuUncorrectableRemappedRows": SignalKind.UNCORRECTABLE_REMAP,
    "GpuCorrectableRemappedRows": SignalKind.CORRECTABLE_REMAP,
    "GpuHwSlowdown": SignalKind.HW_SLOWDOWN,
    "GpuThermalThrottle": SignalKind.THERMAL_THROTTLE,
    "GpuPowerBrake": SignalKind.POWER_BRAKE,
    "GpuPcieLinkDegraded": SignalKind.PCIE_DEGRADED,
    "GpuNvlinkCrcErrors": SignalKind.NVLINK_ERROR,
    "GpuNvlinkReplayRecoveryErrors": SignalKind.NVLINK_ERROR,
    "InfinibandPortDown": SignalKind.IB_PORT_DOWN,
    "InfinibandCumulativeDowntime": SignalKind.IB_DOWNTIME,
    "NcclWatchdogTimeout": SignalKind.NCCL_TIMEOUT,
    "TrainingLossNan": SignalKind.LOSS_NAN,
    "NodeNotReady": SignalKind.NODE_NOT_READY,
    "GpuEarlyWarning": SignalKind.EARLY_WARNING,  # label `detector`: remap-acceleration, ib-downtime, straggler, …
    "KubeNodeNotReady": SignalKind.NODE_NOT_READY,  # kube-prometheus
    "KubeNodeUnreachable": SignalKind.NODE_NOT_READY,  # kube-prometheus
}


class AlertPayloadError(RemedyError):
    """An Alertmanager payload that cannot be used; the message gives the path of the problem."""


class WebhookAlert(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime = Field(alias="startsAt")
    ends_at: datetime | None = Field(None, alias="endsAt")
    generator_url: str = Field("", alias="generatorURL")
    fingerprint: str = ""


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    version: Literal["4"]
    receiver: str
    status: Literal["firing", "resolved"]
    alerts: list[WebhookAlert]
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")
    common_labels: dict[str, str] = Field(default_factory=dict, alias="commonLabels")
    common_annotations: dict[str, str] = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str = Field("", alias="externalURL")
    group_key: str = Field("", alias="groupKey")
    truncated_alerts: int = Field(0, ge=0, alias="truncatedAlerts")


@dataclass
class AlertBatch:
    receiver: str
    status: str
    group_key: str
    truncated_alerts: int  # Alertmanager dropped this many from the payload (max_alerts); say so, never hide it
    signals: list[Signal] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # per-alert errors when parsed with strict=False

    def summary(self) -> dict[str, Any]:
        return {
            "receiver": self.receiver, "status": self.status, "group_key": self.group_key,
            "truncated_alerts": self.truncated_alerts, "alerts": len(self.signals) + len(self.problems),
            "signals": len(self.signals), "resolved": sum(s.resolved for s in self.signals),
            "problems": list(self.problems),
        }


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "payload"


def validate_payload(payload: Any) -> WebhookPayload:
    """Parse a decoded JSON payload (or JSON text/bytes) into models; AlertPayloadError names the bad path."""
    if isinstance(payload, (str, bytes, bytearray)):
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise AlertPayloadError(f"payload: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except (RecursionError, ValueError):  # nested too deep; bytes not UTF-8; an integer past the digit limit
            raise AlertPayloadError("payload: not valid JSON (too deeply nested, not UTF-8, or a number too long)") from None
    if not isinstance(payload, dict):
        raise AlertPayloadError(f"payload: must be a JSON object, got {type(payload).__name__}")
    try:
        return WebhookPayload.model_validate(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "missing field"
        elif err["type"] == "literal_error":
            msg = f"{msg}, got {err.get('input')!r}"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise AlertPayloadError(f"{_path(tuple(err['loc']))}: {msg}{more}") from None


NODE_CANDIDATES = ("node", "kubernetes_node", "nodename", "Hostname", "instance")


class UnresolvedNode(AlertPayloadError):
    """An alert whose labels name no node of this cluster (the receiver records it, counted, never acted on)."""

    def __init__(self, message: str, labels: dict[str, str]) -> None:
        super().__init__(message)
        self.labels = labels


def node_name(labels: dict[str, str]) -> str | None:
    """The node a label set names without asking the cluster: the first of NODE_CANDIDATES present (`instance`
    without its :port), or None. The receiver checks each candidate against the cluster instead
    (remedy.receiver.identity)."""
    from remedy.receiver.identity import strip_port

    for key in NODE_CANDIDATES:
        value = labels.get(key, "").strip()
        if value:
            return strip_port(value) if key == "instance" else value
    return None


def _node(labels: dict[str, str], where: str) -> str:
    node = node_name(labels)
    if node is None:
        raise AlertPayloadError(f"{where}.labels: missing node label: need one of {', '.join(NODE_CANDIDATES)}")
    return node


def _int_label(value: str | None, where: str, what: str) -> int | None:
    if value is None or value == "":
        return None
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        raise AlertPayloadError(f"{where}: {what} must be a whole number, got {value[:40]!r}") from None
    # inf/nan/1e400 have no integer; past 2**31 no GPU index or XID is meant (and the ledger's INTEGER overflows)
    if not math.isfinite(number) or number != int(number) or number < 0 or number >= 2**31:
        raise AlertPayloadError(f"{where}: {what} must be a non-negative whole number below 2^31, got {value[:40]!r}")
    return int(number)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(at: datetime, where: str) -> datetime:
    """An alert time the ledger can store and compute windows on: with a zone, not before 1970 (Go's zero time
    0001-01-01 is what Alertmanager sends as endsAt of a firing alert, so only a resolved alert's endsAt is read)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise AlertPayloadError(f"{where}: must carry a time zone, got {at.isoformat()!r}")
    if at < EPOCH:
        raise AlertPayloadError(f"{where}: before 1970, got {at.isoformat()!r}")
    return at


_XID_WHERE = {"xid": "labels.xid", "err_code": "labels.err_code", "value": "annotations.value",
              "description": "annotations (text)", "rule": "the rule"}


def alert_to_signal(alert: WebhookAlert, where: str = "alert", *, resolve=None, now: datetime | None = None) -> Signal:
    """One alert → Signal, its meaning read from its content (remedy.detect.rulesets). `resolve(labels)` (the
    receiver's NodeResolver) checks the node against the cluster; UnresolvedNode when nothing confirms one."""
    from remedy.detect.rulesets import read_alert

    labels = dict(alert.labels)
    if resolve is not None:
        found = resolve(labels)
        if found.node is None:
            raise UnresolvedNode(f"{where}.labels: {found.why_not()}", labels)
        node = found.node
    else:
        node = _node(labels, where)
    reading = None
    if labels.get("signal"):
        try:
            kind = SignalKind(labels["signal"])
        except ValueError:
            raise AlertPayloadError(
                f"{where}.labels.signal: unknown signal kind {labels['signal']!r} (one of: {', '.join(k.value for k in SignalKind)})"
            ) from None
    else:
        reading = read_alert(labels, alert.annotations, alert.generator_url)
        kind = reading.kind or SignalKind.UNKNOWN
        for k, v in reading.labels.items():
            labels.setdefault(k, v)
    value_text = alert.annotations.get("value")
    value: float | None = None
    if value_text not in (None, ""):
        try:
            value = float(value_text)
        except ValueError:
            raise AlertPayloadError(f"{where}.annotations.value: not a number: {value_text[:40]!r}") from None
        if math.isinf(value):  # NaN stays "no number" (Signal); an infinite sample is nothing a rule can compare
            raise AlertPayloadError(f"{where}.annotations.value: must be finite, got {value_text[:40]!r}")
    gpu = _int_label(labels.get("gpu"), f"{where}.labels.gpu", "gpu")
    xid = _int_label(labels.get("xid"), f"{where}.labels.xid", "xid")
    xid_from = "xid" if xid is not None else ""
    if kind is SignalKind.XID and xid is None:
        if reading is not None:
            if reading.xid_text is None:
                raise AlertPayloadError(f"{where}: XID alert without its code (no xid or err_code label, no value "
                                        "that is the code, no 'XID n' in its description)")
            xid_from = reading.xid_from
            xid = _int_label(reading.xid_text, f"{where}.{_XID_WHERE.get(xid_from, xid_from)}", "xid")
        elif value is not None:
            xid_from = "value"
            xid = _int_label(value_text, f"{where}.annotations.value", "xid")
        else:
            raise AlertPayloadError(f"{where}: xid alert without an xid label or a value annotation")
        if xid_from == "value":
            value = None  # the value was the code, not a measurement
    if xid is not None and not XID_MIN <= xid <= XID_MAX:
        raise AlertPayloadError(f"{where}: XID {xid} out of range: must be {XID_MIN}..{XID_MAX}")
    starts_at = _time(alert.starts_at, f"{where}.startsAt")
    resolved = alert.status == "resolved"
    ends_at = _time(alert.ends_at, f"{where}.endsAt") if resolved and alert.ends_at is not None else None
    if value is None and kind in (SignalKind.NODE_NOT_READY, SignalKind.IB_PORT_DOWN):
        # how long the condition has held: the rule's `for:` (kube-prometheus KubeNodeNotReady waits 15 min before
        # it fires) plus the time since it fired
        held_for = reading.for_seconds if reading is not None else 0.0
        until = ends_at or now or datetime.now(UTC)
        value = held_for + max(0.0, (until - starts_at).total_seconds())
    if xid_from:
        labels.setdefault("remedy_xid_from", xid_from)
    return Signal(
        node=node, kind=kind, gpu=gpu, xid=xid, value=value, at=starts_at, labels=labels,
        source="alertmanager", raw=json.dumps(alert.model_dump(mode="json", by_alias=True), sort_keys=True)[:2000],
        resolved=resolved, fingerprint=alert.fingerprint, ended_at=ends_at,
    )


def parse_alertmanager(payload: Any, *, strict: bool = True) -> AlertBatch:
    """Webhook payload → AlertBatch. strict: the first bad alert raises; else bad alerts go to `problems`."""
    model = validate_payload(payload)
    batch = AlertBatch(receiver=model.receiver, status=model.status, group_key=model.group_key,
                       truncated_alerts=model.truncated_alerts)
    for i, alert in enumerate(model.alerts):
        try:
            batch.signals.append(alert_to_signal(alert, f"alerts[{i}]"))
        except (AlertPayloadError, ValueError) as exc:
            if strict:
                raise AlertPayloadError(str(exc)) from None
            batch.problems.append(str(exc))
    return batch
