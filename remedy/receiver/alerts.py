"""Alertmanager webhook → ledger incidents: validation, node check, dedup. Plain Python (no FastAPI, no Prefect).

One request is all or nothing at the payload level: a malformed payload (bad JSON, a missing field, an XID out of
range) raises `AlertPayloadError` before anything is written. A well-formed payload is then judged alert by
alert: an alert for a node the cluster does not know is rejected (counted, never acted on); the rest are grouped
by fault fingerprint (node + GPU + signal + XID) and written with one `open_incident` call per fault, so a storm
of repeats costs one ledger transaction per distinct fault per request, and a repeat inside the dedup window
bumps the existing incident's count instead of opening another.

Limits (`receiver.limits`): more distinct faults in one request than `max_incidents_per_request` refuses the payload
(`RequestOverLimit`, nothing written); an alert whose GPU index is not below the node's GPU count (or
`max_gpus_per_node` when the count is unknown) is rejected, as is a new fault on a node that already has
`max_incidents_per_node` distinct faults in the window. A ledger failure propagates (the app answers 503).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from remedy.detect.alertmanager import AlertPayloadError, parse_alertmanager
from remedy.detect.signals import Signal, Verdict, classify
from remedy.domain.durations import human_duration
from remedy.domain.model import Incident, IncidentStatus, incident_fingerprint, utcnow
from remedy.ledger.records import IncidentRecord
from remedy.receiver.outbox import RECEIVER_MARK, touch_resolved
from remedy.settings.receiver import ReceiverLimits
from remedy.settings.signals import SignalThresholds

OPENED, DEDUPLICATED, RESOLVED, REJECTED = "opened", "deduplicated", "resolved", "rejected"
log = logging.getLogger(__name__)


def rejection_reason(message: str) -> str:
    """Short metric label for why a payload was refused."""
    if "out of range" in message and "XID" in message:
        return "xid-out-of-range"
    if "not valid JSON" in message:
        return "invalid-json"
    return "malformed"


def count_alerts(payload: Any) -> int:
    """How many alerts a refused payload (decoded, or JSON text) carried, so every alert is accounted for; 1 if it
    cannot be told."""
    try:
        alerts = (json.loads(payload) if isinstance(payload, (str, bytes)) else payload).get("alerts")
    except (ValueError, AttributeError, RecursionError):
        return 1
    return len(alerts) if isinstance(alerts, list) and alerts else 1


class NodeDirectory:
    """Which nodes the cluster has, and how many GPUs each (0 = not known). A miss re-reads the ledger (and the
    cluster, if a lister is given), at most once per `refresh_seconds`, so a storm of alerts for a bogus host cannot
    hammer the API server. The lister yields node names or `Node`s (whose `gpu_count` then counts too)."""

    def __init__(self, ledger, lister: Callable[[], Iterable[Any]] | None = None, refresh_seconds: float = 10.0):
        self._ledger = ledger
        self._lister = lister
        self._refresh_seconds = refresh_seconds
        self._gpus: dict[str, int] = {}
        self._last_refresh = float("-inf")
        self._lock = threading.Lock()

    def refresh(self) -> set[str]:
        """Re-read; a ledger failure raises (the request cannot be recorded anyway), a cluster failure is logged."""
        gpus = {n.name: n.gpu_count for n in self._ledger.nodes()}
        if self._lister is not None:
            try:
                for item in self._lister():
                    name = item if isinstance(item, str) else item.name
                    count = 0 if isinstance(item, str) else int(getattr(item, "gpu_count", 0) or 0)
                    gpus[name] = max(count, gpus.get(name, 0))
            except Exception as exc:  # cluster unreachable: judge on what the ledger knows
                log.warning("node directory: could not list the cluster's nodes: %s", type(exc).__name__)
        with self._lock:
            self._gpus = gpus
            self._last_refresh = time.monotonic()
        return set(gpus)

    def knows(self, node: str) -> bool:
        if node in self._gpus:
            return True
        if time.monotonic() - self._last_refresh >= self._refresh_seconds:
            self.refresh()
        return node in self._gpus

    def gpu_count(self, node: str) -> int:
        """GPUs of a known node; 0 when no source says."""
        return self._gpus.get(node, 0)


@dataclass(frozen=True)
class AlertOutcome:
    index: int
    node: str
    signal: str
    gpu: int | None
    xid: int | None
    outcome: str  # opened | deduplicated | resolved | rejected
    reason: str = ""
    incident_id: int | None = None
    code: str = ""  # why a rejected alert was rejected, as a metric label: unknown-node | gpu-out-of-range | node-cap

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None) or k in ("gpu", "xid")}


@dataclass(frozen=True)
class OpenedIncident:
    record: IncidentRecord
    verdict: Verdict


@dataclass
class IntakeResult:
    outcomes: list[AlertOutcome] = field(default_factory=list)
    opened: list[OpenedIncident] = field(default_factory=list)
    truncated_alerts: int = 0

    def count(self, outcome: str) -> int:
        return sum(o.outcome == outcome for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "received": len(self.outcomes),
            **{k: self.count(k) for k in (OPENED, DEDUPLICATED, RESOLVED, REJECTED)},
            "truncated_alerts": self.truncated_alerts,
            "incidents": sorted({o.incident_id for o in self.outcomes if o.incident_id is not None}),
            "rejections": [o.to_dict() for o in self.outcomes if o.outcome == REJECTED],
        }


def _fault_key(s: Signal) -> str:
    return incident_fingerprint(s.node, s.gpu, s.kind.value, s.xid)


def occurrence_of(s: Signal) -> str:
    """One occurrence of one alert: Alertmanager's fingerprint + startsAt (a log-derived signal posted as an alert
    has no fingerprint: node + GPU + fault stand in, with its kernel time as startsAt)."""
    who = s.fingerprint or _fault_key(s)
    return f"{who}@{s.at.isoformat()}" if s.at is not None else ""


def _detail(s: Signal) -> str:
    name = s.labels.get("alertname", s.kind.value)
    summary = ""
    try:
        summary = json.loads(s.raw).get("annotations", {}).get("summary", "") if s.raw else ""
    except ValueError:
        pass
    return f"{RECEIVER_MARK} {name}" + (f": {summary}" if summary else "")


class RequestOverLimit(AlertPayloadError):
    """A well-formed payload over one of `receiver.limits` (answer 422, nothing written)."""


class AlertIntake:
    """Turns one webhook body into ledger incidents. Thread-safe (the ledger serialises writers)."""

    def __init__(self, ledger, nodes: NodeDirectory, *, window_seconds: float,
                 thresholds: SignalThresholds | None = None, limits: ReceiverLimits | None = None,
                 refresh_seconds: float = 10.0) -> None:
        self.ledger = ledger
        self.nodes = nodes
        self.window_seconds = window_seconds
        self.thresholds = thresholds or SignalThresholds()
        self.limits = limits or ReceiverLimits()
        self.refresh_seconds = refresh_seconds
        self._faults: dict[str, tuple[float, set[str]]] = {}  # node → (read at, fault keys in the window)
        # Writers in one process queue on the ledger's own lock (remedy.ledger.engine.write_transaction), not in
        # SQLite's busy handler.

    def ingest(self, body: bytes | str | dict) -> IntakeResult:
        """Validate, then record. AlertPayloadError (nothing written) for a payload that cannot be used."""
        batch = parse_alertmanager(body, strict=True)
        cap = self.limits.max_incidents_per_request
        faults = {_fault_key(s) for s in batch.signals}
        if len(faults) > cap:
            raise RequestOverLimit(f"alerts: {len(faults)} distinct faults in one request, more than "
                                   f"{cap} (receiver.limits.max_incidents_per_request); nothing recorded")
        result = IntakeResult(truncated_alerts=batch.truncated_alerts)
        now = utcnow()
        accepted: list[tuple[int, Signal]] = []
        for index, s in enumerate(batch.signals):
            if not self.nodes.knows(s.node):
                result.outcomes.append(_rejected(index, s, "unknown-node", f"unknown node {s.node!r}: not in the cluster"))
            elif (why := self._gpu_out_of_range(s)):
                result.outcomes.append(_rejected(index, s, "gpu-out-of-range", why))
            else:
                accepted.append((index, s))
        # Read outside any write transaction: two concurrent requests may overshoot the cap by what they carry, which
        # is fine for a sanity bound, and the storm's writers do not queue behind this read.
        accepted = self._within_node_cap(accepted, now, result)
        firing: dict[str, list[tuple[int, Signal]]] = {}
        for index, s in accepted:
            if s.resolved:
                result.outcomes.append(self._resolved(index, s, now))
            else:
                firing.setdefault(f"{_fault_key(s)}|{occurrence_of(s)}", []).append((index, s))
        for group in firing.values():
            result.outcomes.extend(self._record(group, now, result))
        result.outcomes.sort(key=lambda o: o.index)
        return result

    def _node_faults(self, node: str, now: datetime, *, fresh: bool = False) -> set[str]:
        """Fault keys seen on `node` within the window: read from the ledger when the node is first seen, kept up to
        date with what this receiver accepts, and read again (`fresh`, at most once per `refresh_seconds`) only when
        the cap would refuse a fault — older faults may have left the window since. A storm of re-sends then adds
        no read per request (it did: one read per alert, a sixth of the intake's time)."""
        hit = self._faults.get(node)
        if hit is not None and (not fresh or time.monotonic() - hit[0] < self.refresh_seconds):
            return hit[1]
        since = now - timedelta(seconds=self.limits.node_window_seconds)
        keys = self.ledger.fault_fingerprints(node, since)
        self._faults[node] = (time.monotonic(), keys)
        return keys

    def _gpu_out_of_range(self, s: Signal) -> str:
        if s.gpu is None:
            return ""
        count = self.nodes.gpu_count(s.node)
        bound = count or self.limits.max_gpus_per_node
        if s.gpu < bound:
            return ""
        if count:
            return f"GPU {s.gpu} out of range: {s.node} has {count} GPUs (0..{count - 1})"
        return (f"GPU {s.gpu} out of range: {s.node}'s GPU count is not known and the bound is "
                f"{bound} (receiver.limits.max_gpus_per_node)")

    def _within_node_cap(self, accepted: list[tuple[int, Signal]], now: datetime,
                         result: IntakeResult) -> list[tuple[int, Signal]]:
        """Alerts whose fault is already known on its node in the window, or new while the node is under
        `max_incidents_per_node` distinct faults; the rest are rejected."""
        cap = self.limits.max_incidents_per_node
        kept = []
        for index, s in accepted:
            faults, key = self._node_faults(s.node, now), _fault_key(s)
            if key not in faults and len(faults) >= cap:
                faults = self._node_faults(s.node, now, fresh=True)
            if key in faults or len(faults) < cap:
                faults.add(key)
                kept.append((index, s))
            else:
                result.outcomes.append(_rejected(
                    index, s, "node-cap", f"{s.node} already has {len(faults)} distinct faults in the last "
                    f"{human_duration(self.limits.node_window_seconds)} (receiver.limits.max_incidents_per_node): not recorded"))
        return kept

    def _record(self, group: list[tuple[int, Signal]], now: datetime, result: IntakeResult) -> list[AlertOutcome]:
        first = group[0][1]
        verdict = classify(first, self.thresholds)
        severity = "critical" if verdict.severity.value == "critical" else "warning"
        started = min((s.at for _, s in group if s.at is not None), default=now)
        incident = Incident(node=first.node, signal=first.kind.value, gpu=first.gpu, xid=first.xid,
                            first_seen=min(started, now), last_seen=now, count=len(group), detail=_detail(first),
                            occurrence=occurrence_of(first), alert_fingerprint=first.fingerprint,
                            evidence=first.evidence())
        record, created = self.ledger.open_incident(incident, window_seconds=self.window_seconds, severity=severity)
        if created:
            result.opened.append(OpenedIncident(record, verdict))
        out = []
        for n, (index, s) in enumerate(group):
            outcome = OPENED if created and n == 0 else DEDUPLICATED
            out.append(AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, outcome, incident_id=record.id))
        return out

    def _resolved(self, index: int, s: Signal, now: datetime) -> AlertOutcome:
        """Recorded, never acted on: moves the open incident's last_seen, or keeps a resolved row if none is open."""
        ended = s.ended_at or now
        incident_id = touch_resolved(self.ledger, _fault_key(s), min(ended, now))
        if incident_id is None:
            started = min(s.at or ended, ended)
            record, _ = self.ledger.open_incident(
                Incident(node=s.node, signal=s.kind.value, gpu=s.gpu, xid=s.xid, first_seen=started, last_seen=ended,
                         status=IncidentStatus.RESOLVED, detail=f"resolved before it was seen firing ({_detail(s)})"),
                window_seconds=0, severity="warning")
            incident_id = record.id
        return AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, RESOLVED, incident_id=incident_id)


def _rejected(index: int, s: Signal, code: str, reason: str) -> AlertOutcome:
    return AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, REJECTED, reason, code=code)


__all__ = ["AlertIntake", "AlertOutcome", "AlertPayloadError", "IntakeResult", "NodeDirectory", "OpenedIncident", "RequestOverLimit",
           "count_alerts", "rejection_reason"]
