"""Incident events for Prefect (`remedy.incident.opened`) and the re-emitter that delivers them.

Why not `prefect.events.emit_event`: it queues the event for a background websocket and never says whether the
server got it, so a receiver restart (or an API outage longer than its reconnect attempts) could lose an event for
an incident we already acknowledged. Here events go to the API's `POST /events` route, which answers 204 once the
server has taken them; only then is the incident marked announced in the ledger (`remedy.receiver.outbox`).
Until then the re-emitter retries every `emit_retry_seconds`, from the ledger, so a restart loses nothing.

Event ids are derived from the incident (uuid5), so an event re-sent after an ambiguous failure is the same event:
Prefect's trigger service skips ids it has already seen, and triage's claim makes a duplicate run harmless anyway.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from remedy.detect.signals import classify
from remedy.ledger.records import IncidentRecord
from remedy.receiver import outbox
from remedy.receiver.metrics import ReceiverMetrics
from remedy.settings.signals import SignalThresholds

log = logging.getLogger(__name__)

EVENT_OPENED = "remedy.incident.opened"
_NAMESPACE = uuid.UUID("6f1c3f8e-2f0a-4d4e-9a51-6d0c1b7e2a11")


def node_resource_id(node: str) -> str:
    return f"remedy.node.{node}"


def event_id(record: IncidentRecord, reannounce: int = 0, ledger_id: str = "") -> str:
    """The incident's event id; the lease watchdog's n-th re-announce of it (`reannounce`) is an event of its own,
    and so is the same incident number in another ledger (`ledger_id`: a reset or a second stack)."""
    name = f"{EVENT_OPENED}|{record.id}|{record.fingerprint}|{record.first_seen.isoformat()}"
    name += f"|ledger-{ledger_id}" if ledger_id else ""
    return str(uuid.uuid5(_NAMESPACE, name + (f"|reannounce-{reannounce}" if reannounce else "")))


def verdict_of(record: IncidentRecord, thresholds: SignalThresholds | None = None) -> dict[str, str]:
    """Path and severity for the payload, from the incident and the evidence it kept (the re-emitter has no alert at
    hand): the same signal triage classifies (`triage_policy.signal_of`), so a driver's "Nonfatal" or a value below
    its threshold gives the same path here as in triage."""
    from remedy.receiver.triage_policy import signal_of

    try:
        v = classify(signal_of({"node": record.node, "signal": record.signal, "gpu": record.gpu, "xid": record.xid,
                                "evidence": record.evidence, "detail": record.detail}), thresholds)
        return {"path": v.path.value, "severity": v.severity.value, "rule": v.rule}
    except ValueError as exc:  # a signal kind this version does not know: triage escalates it
        return {"path": "escalate", "severity": record.severity, "rule": f"unclassifiable: {exc}"}


def incident_event(record: IncidentRecord, verdict: dict[str, str] | None = None, ledger_id: str = "") -> dict[str, Any]:
    """The Prefect event (JSON form of `prefect.events.Event`) announcing a new incident; `ledger_id` (the ledger's
    identity) goes into the payload, the event id and so the triage run's key."""
    verdict = verdict or verdict_of(record)
    related = []
    if record.gpu is not None:
        related.append({"prefect.resource.id": f"remedy.gpu.{record.node}.{record.gpu}",
                        "prefect.resource.role": "gpu", "prefect.resource.name": f"{record.node} GPU {record.gpu}"})
    if record.rack:
        related.append({"prefect.resource.id": f"remedy.rack.{record.rack}", "prefect.resource.role": "rack",
                        "prefect.resource.name": record.rack})
    if record.xid is not None:
        related.append({"prefect.resource.id": f"remedy.xid.{record.xid}", "prefect.resource.role": "xid",
                        "prefect.resource.name": f"XID {record.xid}"})
    related.append({"prefect.resource.id": f"remedy.incident.{record.id}", "prefect.resource.role": "incident"})
    return {
        "id": event_id(record, ledger_id=ledger_id),
        "occurred": record.first_seen.isoformat(),
        "event": EVENT_OPENED,
        "resource": {"prefect.resource.id": node_resource_id(record.node), "prefect.resource.name": record.node},
        "related": related,
        "payload": {
            "incident_id": record.id,
            "node": record.node,
            "gpu": record.gpu,
            "signal": record.signal,
            "xid": record.xid,
            "severity": verdict.get("severity", record.severity),
            "path": verdict.get("path", ""),
            "rule": verdict.get("rule", ""),
            "detected_at": record.first_seen.isoformat(),
            "fingerprint": record.fingerprint,
            "ledger": ledger_id,
        },
    }


class PrefectEventSink:
    """POSTs events to `<api_url>/events` and reports whether the server took them (2xx)."""

    def __init__(self, api_url: str, *, timeout: float = 5.0, api_key: str | None = None,
                 auth_string: str | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        auth: tuple[str, str] | None = None
        if auth_string and ":" in auth_string:
            user, _, password = auth_string.partition(":")
            auth = (user, password)
        self._client = httpx.Client(timeout=timeout, headers=headers, auth=auth)

    def send(self, events: list[dict[str, Any]]) -> None:
        """Raise on anything but a 2xx (httpx errors included)."""
        resp = self._client.post(f"{self.api_url}/events", json=events)
        if resp.status_code // 100 != 2:
            raise RuntimeError(f"Prefect API answered {resp.status_code} to POST /events: {resp.text[:200]}")

    def close(self) -> None:
        self._client.close()


class IncidentAnnouncer:
    """Background thread: announce new incidents now, and any the API has not acknowledged, every `retry_seconds`.

    `notify()` wakes it at once (the receiver calls it after a request opened incidents). `on_sent` is called with
    the incident ids after each acknowledged batch (the embedded stack uses it to poll for the triggered runs).
    """

    def __init__(self, ledger, sink, metrics: ReceiverMetrics, *, retry_seconds: float = 2.0,
                 thresholds: SignalThresholds | None = None, batch: int = 200,
                 on_sent: Callable[[list[int]], None] | None = None, watchdog=None) -> None:
        self.ledger, self.sink, self.metrics = ledger, sink, metrics
        self.retry_seconds, self.thresholds, self.batch = retry_seconds, thresholds, batch
        self.on_sent = on_sent
        self.watchdog = watchdog  # remedy.receiver.watchdog.LeaseWatchdog: re-announces incidents of gone runs
        # remedy.receiver.quarantine.IntakeQuarantine: cordons what the catalog takes out, before the run exists
        self.quarantine: Callable[[list[IncidentRecord], list[str]], None] | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> IncidentAnnouncer:
        self._thread = threading.Thread(target=self._loop, name="incident-announcer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout)

    def notify(self) -> None:
        self._wake.set()

    def check_leases(self) -> None:
        """Run the lease watchdog at once (a late answer arrived for a run that is gone)."""
        if self.watchdog is not None:
            self.watchdog.request()
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.announce_pending()
            except Exception:  # never let the thread die; the next round retries from the ledger
                log.exception("announcing incidents failed")
            if self.watchdog is not None and self.watchdog.due():
                try:
                    self.watchdog.sweep()
                except Exception:  # the ledger is down: the next round tries again
                    log.exception("lease watchdog failed")
            wait = self.retry_seconds if self.watchdog is None else min(self.retry_seconds, self.watchdog.every_seconds)
            self._wake.wait(wait)

    def announce_pending(self) -> int:
        """Send every unannounced incident (in batches). Returns how many were acknowledged this round."""
        sent = 0
        while not self._stop.is_set():
            pending = outbox.unannounced(self.ledger, limit=self.batch)
            if not pending:
                break
            ledger_id = self.ledger.identity()
            events = [incident_event(r, verdict_of(r, self.thresholds), ledger_id) for r in pending]
            if self.quarantine is not None:  # never raises: a node it cannot cordon is cordoned by its flow
                self.quarantine(pending, [e["payload"]["path"] for e in events])
            try:
                self.sink.send(events)
            except Exception as exc:
                self.metrics.event_emit_failures.inc(len(events))
                if not self._failing:
                    log.warning("Prefect API did not take %d incident events (%s); retrying every %.1f s",
                                len(events), exc, self.retry_seconds)
                self._failing = True
                return sent
            if self._failing:
                self.metrics.event_emit_retries.inc(len(events))
                log.info("Prefect API back: %d held incident events delivered", len(events))
            self._failing = False
            outbox.mark_announced(self.ledger, {r.id: e["id"] for r, e in zip(pending, events)})
            self.metrics.events_emitted.inc(len(events))
            sent += len(events)
            if self.on_sent:
                try:
                    self.on_sent([r.id for r in pending])
                except Exception:
                    log.exception("on_sent hook failed")
            if len(pending) < self.batch:
                break
        return sent
