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

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError

from remedy.detect.alertmanager import AlertPayloadError, UnresolvedNode, alert_to_signal, validate_payload
from remedy.detect.signals import Signal, SignalKind, Verdict, classify
from remedy.domain.durations import human_duration
from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, incident_fingerprint, utcnow
from remedy.domain.xid import RemediationPath, lookup
from remedy.ledger.errors import IdempotentReplay
from remedy.ledger.ib_ports import fold_port_alert
from remedy.ledger.records import IncidentRecord
from remedy.receiver.outbox import RECEIVER_MARK, touch_resolved
from remedy.settings.receiver import ReceiverLimits
from remedy.settings.signals import SignalThresholds

OPENED, DEDUPLICATED, RESOLVED, REJECTED, IGNORED = "opened", "deduplicated", "resolved", "rejected", "ignored"
# The ledger's record of an alert that did not become (or join) an incident: one action row per alert occurrence,
# kind `alert_refused`, `error` = the reason, detail = code, labels, whether Alertmanager is asked to re-send it.
REFUSED_KIND = "alert_refused"
# Refusal codes Alertmanager should re-send (the receiver answers 503 when any alert carries one): a limit that
# frees itself, not the payload's fault.
RETRYABLE = frozenset({"node-cap"})
# gpu-remedy's own fixes that clear a GPU's state: after one of these, a last-XID gauge still showing the same code
# on the same GPU is the gauge, not a new fault (tasks/fixes.py action kinds)
FIX_KINDS = frozenset({"job_gpu-reset", "job_reboot", "reboot_instance"})
# Job symptoms name no node; application-class XIDs are the job's: neither fills a node's hardware cap
_JOB_SIGNALS = frozenset({SignalKind.NCCL_TIMEOUT.value, SignalKind.LOSS_NAN.value})
_NOT_THE_NODE = frozenset({RemediationPath.RESTART_APP, RemediationPath.IGNORE, RemediationPath.WATCH})
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
    code: str = ""  # why: unresolved-node | malformed | xid-out-of-range | gpu-out-of-range | node-cap | unhandled
    retryable: bool = False  # not recorded for a reason that passes: Alertmanager should send it again

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
            **{k: self.count(k) for k in (OPENED, DEDUPLICATED, RESOLVED, REJECTED, IGNORED)},
            "truncated_alerts": self.truncated_alerts,
            "incidents": sorted({o.incident_id for o in self.outcomes if o.incident_id is not None}),
            "rejections": [o.to_dict() for o in self.outcomes if o.outcome == REJECTED],
            "ignored_alerts": [o.to_dict() for o in self.outcomes if o.outcome == IGNORED],
            "retry": self.retry,
        }

    @property
    def retry(self) -> bool:
        """Some alert was not recorded for a reason that passes (a limit): the answer asks for a re-send."""
        return any(o.retryable for o in self.outcomes)


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
    """Turns one webhook body into ledger incidents, alert by alert. Thread-safe (the ledger serialises writers).

    `resolver` (remedy.receiver.identity.NodeResolver) checks each alert's node against the cluster; without one,
    the node directory alone decides on the first node label present."""

    def __init__(self, ledger, nodes: NodeDirectory, *, window_seconds: float,
                 thresholds: SignalThresholds | None = None, limits: ReceiverLimits | None = None,
                 refresh_seconds: float = 10.0, resolver=None) -> None:
        from remedy.receiver.identity import NodeResolver

        self.ledger = ledger
        self.nodes = nodes
        self.window_seconds = window_seconds
        self.thresholds = thresholds or SignalThresholds()
        self.limits = limits or ReceiverLimits()
        self.refresh_seconds = refresh_seconds
        self.resolver = resolver or NodeResolver(nodes.knows)
        # node → (read at, hardware fault keys, application fault keys) in the window
        self._faults: dict[str, tuple[float, set[str], set[str]]] = {}
        self._sticky: dict[tuple[str, datetime], str] = {}  # (fault, startsAt) → why it is a sticky re-fire, or ""
        # Writers in one process queue on the ledger's own lock (remedy.ledger.engine.write_transaction), not in
        # SQLite's busy handler.

    def ingest(self, body: bytes | str | dict) -> IntakeResult:
        """Validate the envelope (AlertPayloadError, nothing written, when it cannot be used), then judge each alert
        on its own: a bad or unresolvable alert is refused alone (recorded in the ledger, reported in the answer)
        and its neighbours are recorded whatever it carries."""
        model = validate_payload(body)
        result = IntakeResult(truncated_alerts=model.truncated_alerts)
        now = utcnow()
        signals: list[tuple[int, Signal]] = []
        for index, alert in enumerate(model.alerts):
            if (why := _unhandled(alert)):
                # not a fault gpu-remedy handles (TargetDown, Watchdog, a temperature rule): acknowledged and
                # counted, whatever node labels it carries or lacks
                result.outcomes.append(AlertOutcome(index, "", alert.labels.get("alertname", ""), None, None,
                                                    IGNORED, why, code="unhandled"))
                continue
            try:
                signals.append((index, alert_to_signal(alert, f"alerts[{index}]", resolve=self.resolver.resolve,
                                                       now=now)))
            except UnresolvedNode as exc:
                self._refuse(result, index, alert, "unresolved-node", str(exc))
            except (AlertPayloadError, ValueError) as exc:
                msg = str(exc)
                self._refuse(result, index, alert, rejection_reason(msg), msg)
        cap = self.limits.max_incidents_per_request
        faults = {_fault_key(s) for _, s in signals}
        if len(faults) > cap:
            raise RequestOverLimit(f"alerts: {len(faults)} distinct faults in one request, more than "
                                   f"{cap} (receiver.limits.max_incidents_per_request); nothing recorded")
        accepted: list[tuple[int, Signal]] = []
        for index, s in signals:
            if s.kind is SignalKind.UNKNOWN:
                # not a fault gpu-remedy handles (TargetDown, Watchdog, an unknown rule): acknowledged and counted
                name = s.labels.get("alertname", "") or "an alert"
                result.outcomes.append(AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, IGNORED,
                                                    f"{name[:80]}: not a fault gpu-remedy handles", code="unhandled"))
            elif (why := self._gpu_out_of_range(s)):
                self._refuse_signal(result, index, s, "gpu-out-of-range", why)
            elif (why := self._sticky_refire(s)):
                result.outcomes.append(AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, IGNORED, why,
                                                    code="sticky-gauge"))
            else:
                accepted.append((index, s))
        # Read outside any write transaction: two concurrent requests may overshoot the cap by what they carry, which
        # is fine for a sanity bound, and the storm's writers do not queue behind this read.
        accepted = self._within_node_cap(accepted, now, result)
        firing: dict[str, list[tuple[int, Signal]]] = {}
        for index, s in accepted:
            if s.kind is SignalKind.IB_PORT_DOWN:
                accepted_extra = self._fold_ib(s)
                for extra in accepted_extra:
                    firing.setdefault(f"{_fault_key(extra)}|{occurrence_of(extra)}", []).append((-1, extra))
            if s.resolved:
                result.outcomes.append(self._resolved(index, s, now))
            else:
                firing.setdefault(f"{_fault_key(s)}|{occurrence_of(s)}", []).append((index, s))
        for group in firing.values():
            result.outcomes.extend(o for o in self._record(group, now, result) if o.index >= 0)
        result.outcomes.sort(key=lambda o: o.index)
        return result

    # ---- refusals: answered, counted, and kept in the ledger (one row per alert occurrence)
    def _refuse(self, result: IntakeResult, index: int, alert, code: str, reason: str) -> None:
        from remedy.detect.alertmanager import node_name

        labels = dict(alert.labels)
        claimed = node_name(labels) or "(no node label)"
        occurrence = f"{alert.fingerprint or incident_fingerprint(claimed, None, code)}@{alert.starts_at.isoformat()}"
        self._record_refusal(claimed, code, reason, labels, occurrence)
        result.outcomes.append(AlertOutcome(index, claimed, labels.get("signal") or labels.get("alertname", ""),
                                            None, None, REJECTED, reason, code=code, retryable=code in RETRYABLE))

    def _refuse_signal(self, result: IntakeResult, index: int, s: Signal, code: str, reason: str) -> None:
        self._record_refusal(s.node, code, reason, s.labels, occurrence_of(s) or _fault_key(s))
        result.outcomes.append(_rejected(index, s, code, reason))

    def _record_refusal(self, node: str, code: str, reason: str, labels: dict[str, str], occurrence: str) -> None:
        detail = {"code": code, "retryable": code in RETRYABLE,
                  "labels": {str(k)[:100]: str(v)[:300] for k, v in list(labels.items())[:40]}}
        node = node.strip()[:253] or "(no node label)"
        # one row per (node, alert occurrence, reason): a re-send of a refused alert adds nothing
        digest = hashlib.sha256(f"{node}|{code}|{occurrence}".encode()).hexdigest()[:24]
        try:
            self.ledger.start_action(Action(
                kind=REFUSED_KIND, node=node, requested_by="receiver", outcome=ActionOutcome.SKIPPED,
                error=reason[:2000], detail=detail, idempotency_key=f"{REFUSED_KIND}:{code}:{digest}"))
        except (IdempotentReplay, ValueError, DataError, IntegrityError) as exc:  # a value the ledger refuses: counted and answered anyway
            log.warning("alert refusal not kept in the ledger: %s", type(exc).__name__)

    # ---- sticky last-XID gauges
    def _sticky_refire(self, s: Signal) -> str:
        """DCGM_FI_DEV_XID_ERRORS keeps the last XID until the GPU is reset, and an exporter restart re-fires it with
        a new startsAt. When gpu-remedy reset or rebooted since the last incident of this XID on this GPU and the
        gauge still shows the same code, it is the gauge, not a new occurrence: "" when it is new."""
        if s.kind is not SignalKind.XID or s.resolved or s.at is None or not _from_xid_gauge(s):
            return ""
        key = _fault_key(s)
        seen = self._sticky.get((key, s.at))
        if seen is not None:  # Alertmanager re-sends one occurrence every repeat_interval: judged once
            return seen
        why = self._sticky_judge(s, key)
        if len(self._sticky) > 10_000:
            self._sticky.clear()
        self._sticky[(key, s.at)] = why
        return why

    def _sticky_judge(self, s: Signal, key: str) -> str:
        prior = [i for i in self.ledger.incidents(node=s.node) if i.fingerprint == key and i.first_seen < s.at]
        if not prior:
            return ""
        last = max(prior, key=lambda i: i.first_seen)
        fixes = [a for a in self.ledger.actions(node=s.node) if a.kind in FIX_KINDS
                 and a.outcome is ActionOutcome.SUCCEEDED and last.first_seen <= a.started_at <= s.at]
        if not fixes:
            return ""
        fix = fixes[-1]
        return (f"XID {s.xid} on {s.node} GPU {s.gpu}: the last-XID gauge still shows the code of incident "
                f"{last.id}, which gpu-remedy fixed ({fix.kind} at {fix.started_at.isoformat(timespec='seconds')}); "
                "an exporter restart re-fired it, not a new fault")

    # ---- InfiniBand: port up/down folded into cumulative downtime, kept in the ledger (remedy.ledger.ib_ports), so
    # the outages every receiver saw, before and after a restart, add up as rules.yml promises
    def _fold_ib(self, s: Signal) -> list[Signal]:
        try:
            fold = fold_port_alert(self.ledger, s, self.thresholds, now=utcnow())
        except ValueError as exc:  # no port label or no time: the alert itself is still recorded
            log.info("IB downtime: %s", exc)
            return []
        # the single-outage rule is the alert's own verdict (its value); the cumulative one is new evidence
        return [fold.tripped] if fold.tripped is not None else []

    def _node_faults(self, node: str, now: datetime, *, fresh: bool = False) -> tuple[set[str], set[str]]:
        """(hardware, application) fault keys seen on `node` within the window: read from the ledger when the node is
        first seen, kept up to date with what this receiver accepts, and read again (`fresh`, at most once per
        `refresh_seconds`) only when the cap would refuse a fault — older faults may have left the window since. A
        storm of re-sends then adds no read per request."""
        hit = self._faults.get(node)
        if hit is not None and (not fresh or time.monotonic() - hit[0] < self.refresh_seconds):
            return hit[1], hit[2]
        since = now - timedelta(seconds=self.limits.node_window_seconds)
        hw: set[str] = set()
        app: set[str] = set()
        for i in self.ledger.incidents(node=node, since=since):
            (hw if _counts_for_node(i.signal, i.xid) else app).add(i.fingerprint)
        self._faults[node] = (time.monotonic(), hw, app)
        return hw, app

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
        `max_incidents_per_node` distinct faults of its class; the rest are refused with a retryable answer. The
        cap counts node-attributable faults; application-class XIDs and job symptoms have a bucket of their own of
        the same size, so application noise never blocks a hardware fault."""
        cap = self.limits.max_incidents_per_node
        kept = []
        for index, s in accepted:
            hardware = _counts_for_node(s.kind.value, s.xid)
            key = _fault_key(s)
            faults = self._node_faults(s.node, now)[0 if hardware else 1]
            if key not in faults and len(faults) >= cap:
                faults = self._node_faults(s.node, now, fresh=True)[0 if hardware else 1]
            if key in faults or len(faults) < cap or s.resolved:
                faults.add(key)
                kept.append((index, s))
            else:
                what = "node-attributable" if hardware else "application-class"
                self._refuse_signal(result, index, s, "node-cap", (
                    f"{s.node} already has {len(faults)} distinct {what} faults in the last "
                    f"{human_duration(self.limits.node_window_seconds)} (receiver.limits.max_incidents_per_node): "
                    "not recorded yet; Alertmanager is asked to send it again"))
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
    return AlertOutcome(index, s.node, s.kind.value, s.gpu, s.xid, REJECTED, reason, code=code,
                        retryable=code in RETRYABLE)


def _counts_for_node(signal: str, xid: int | None) -> bool:
    """Does a fault count against its node's hardware cap: not a job symptom, not an XID NVIDIA's catalog puts on
    the application (13, 31, 43, 45 …: restart the app, watch, ignore)."""
    if signal in _JOB_SIGNALS:
        return False
    if signal == SignalKind.XID.value and xid is not None:
        try:
            return lookup(xid).path not in _NOT_THE_NODE
        except ValueError:
            return True
    return True


def _unhandled(alert) -> str:
    """Why an alert is not one gpu-remedy handles ("" when it is): no `signal` label and nothing in its content
    (remedy.detect.rulesets) names a fault."""
    from remedy.detect.rulesets import read_alert

    if alert.labels.get("signal"):
        return ""
    reading = read_alert(alert.labels, alert.annotations, alert.generator_url)
    if reading.kind is not None:
        return ""
    name = alert.labels.get("alertname", "") or "an alert without a name"
    return f"{name[:80]}: not a fault gpu-remedy handles" + (f" ({reading.by[:300]})" if reading.by else "")


def _from_xid_gauge(s: Signal) -> bool:
    """Was this XID read off DCGM_FI_DEV_XID_ERRORS (a last-value gauge): the code is the alert's value or
    dcgm-exporter's err_code, or the rule's expression reads the gauge."""
    if s.labels.get("remedy_xid_from") in ("value", "err_code"):
        return True
    try:
        url = json.loads(s.raw).get("generatorURL", "") if s.raw else ""
    except ValueError:
        url = ""
    from remedy.detect.rulesets import expression_of

    return "DCGM_FI_DEV_XID_ERRORS" in expression_of(url)


__all__ = ["AlertIntake", "AlertOutcome", "AlertPayloadError", "IGNORED", "IntakeResult", "REFUSED_KIND", "RETRYABLE", "NodeDirectory", "OpenedIncident", "RequestOverLimit",
           "count_alerts", "rejection_reason"]
