"""The lease watchdog: incidents left `acting` by a run that is gone are announced again, so a new run takes over.

A run renews its lease while its process lives (remedy.ledger.leases); SIGKILL, OOM or a stopped `remedy up` stop
the renewals and the incident stays `acting` with its node cordoned. Every `leases.watchdog_seconds` (and at once
when a late approval arrives for a gone run) the receiver's outbox loop calls `sweep()`:

- the incident is announced again as a new `remedy.incident.opened` event (its own event id, so Prefect's trigger
  and the embedded stack start a new triage run; a re-send of the same re-announce is the same event), then moved
  back to `open` for that run to claim. Triage sees the node was cordoned by this very incident and continues the
  remediation: finished steps replay from the ledger, the one claimed spare stays the one spare;
- an incident re-announced `leases.max_reannounces` times already is escalated to a person instead (its runs keep
  dying: another run would only die again), with a Slack notice when Slack is configured;
- every gone run (its lease expired and was never ended) is reaped: its lease ended, the run shown Crashed in
  Prefect (a run paused for an answer would otherwise show Paused for good, a subflow Running).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from remedy.ledger.leases import gone_since
from remedy.receiver.events import event_id, incident_event, verdict_of
from remedy.settings.signals import SignalThresholds

log = logging.getLogger(__name__)
BY = "watchdog"


def reannounce_event(record, generation: int, previous_run: str,
                     thresholds: SignalThresholds | None = None, ledger_id: str = "") -> dict[str, Any]:
    """The incident's `remedy.incident.opened` event, announced again for the `generation`-th time."""
    event = incident_event(record, verdict_of(record, thresholds), ledger_id)
    event["id"] = event_id(record, generation, ledger_id)
    event["payload"] |= {"reannounce": generation, "previous_run": previous_run}
    return event


def show_gone_in_prefect(run_ids, why: str) -> int:
    """Mark runs that are not final in Prefect as Crashed, with why; returns how many. Best effort: the ledger has
    the facts, this is what the UI shows (a dead process never reports its own end)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL
    from prefect.states import Crashed

    marked = 0
    if not PREFECT_API_URL.value():  # never start a throwaway Prefect server just to say this
        return marked
    try:
        with get_client(sync_client=True) as client:
            for run_id in run_ids:
                try:
                    run_uuid = UUID(str(run_id))
                except ValueError:  # not a flow run id ("cli", "event:<id>")
                    continue
                state = client.read_flow_run(run_uuid).state
                if state is not None and not state.is_final():
                    client.set_flow_run_state(run_uuid, Crashed(message=why[:500]), force=True)
                    marked += 1
    except Exception as exc:  # noqa: BLE001 - cosmetic: never let it stop a takeover
        log.warning("could not show gone runs %s as crashed in Prefect: %s", ", ".join(map(str, run_ids)), exc)
    return marked


class LeaseWatchdog:
    """`send(events)` raises unless the events were taken (the announcer's sink); `show_gone(run_ids, why)` marks
    the gone runs in Prefect; `notify(text)` tells a person (Slack) about an escalation."""

    def __init__(self, ledger, send: Callable[[list[dict[str, Any]]], None], *, every_seconds: float,
                 max_reannounces: int, thresholds: SignalThresholds | None = None,
                 show_gone: Callable[[list[str], str], Any] | None = show_gone_in_prefect,
                 notify: Callable[[str], Any] | None = None, batch: int = 50) -> None:
        self.ledger, self.send = ledger, send
        self.every_seconds, self.max_reannounces, self.thresholds = every_seconds, max_reannounces, thresholds
        self.show_gone, self.notify, self.batch = show_gone, notify, batch
        self._next = 0.0
        self._asked = threading.Event()

    def request(self) -> None:
        """Sweep at the next turn of the loop (a late approval for a gone run just arrived)."""
        self._asked.set()

    def due(self) -> bool:
        return self._asked.is_set() or time.monotonic() >= self._next

    def sweep(self) -> list[dict[str, Any]]:
        """One round: every stranded incident re-announced (or escalated). Returns what was done, one dict each."""
        self._asked.clear()
        self._next = time.monotonic() + self.every_seconds
        done = []
        self._reap()
        for record, lease in self.ledger.stranded_incidents(limit=self.batch):
            try:
                done.append(self._one(record, lease))
            except Exception:  # noqa: BLE001 - one bad row must not stop the others; the next round retries
                log.exception("watchdog: incident %s left by run %s could not be handed on", record.id, lease.run_id)
        return [d for d in done if d]

    def _reap(self) -> None:
        """Runs whose process died (lease expired, never ended), whatever they did: ended in the ledger, Crashed in
        Prefect (a subflow of a dead triage run would otherwise show Running for good)."""
        for lease in self.ledger.gone_runs(limit=self.batch):
            why = f"gone: {gone_since(lease)}"
            if self.ledger.end_lease(lease.run_id, reason=why):
                log.warning("run %s is gone: %s", lease.run_id, gone_since(lease))
                self._show_gone([lease.run_id], why)

    def _one(self, record, lease) -> dict[str, Any] | None:
        gone = lease.run_id
        why = f"run {gone} {gone_since(lease)}"
        waiting = [a.flow_run_id for a in self.ledger.approvals(incident_id=record.id, pending=True)
                   if a.flow_run_id == gone or self.ledger.run_gone(a.flow_run_id) is not None]
        if self.ledger.stood_down_by_operator(record.id):
            # its run stood down for the operator's change and died before closing it: the change stands, no new
            # run (it would re-cordon and drain the node the operator just uncordoned)
            reason = f"{why}; it had stood down for the operator's change on {record.node}: the operator's change stands"
            if not self.ledger.close_stood_down(record.id, gone, reason=reason, by=BY):
                return None
            log.warning("incident %s on %s closed: %s", record.id, record.node, reason)
            self._show_gone([gone, *waiting], f"gone; incident {record.id} closed: stood down for the operator")
            return {"incident_id": record.id, "action": "closed-stood-down", "from": gone, "why": reason}
        n = self.ledger.reannounces(record.id)
        if n >= self.max_reannounces:
            reason = (f"{why}; re-announced {n} time(s) already and its runs keep ending without settling it: "
                      f"a person decides ({record.node} stays as it is)")
            if not self.ledger.escalate_stranded(record.id, gone, reason=reason, by=BY):
                return None
            log.error("incident %s on %s escalated: %s", record.id, record.node, reason)
            if self.notify is not None:
                try:
                    self.notify(f":rotating_light: gpu-remedy: incident {record.id} on {record.node} needs a person: "
                                f"{reason}")
                except Exception as exc:  # noqa: BLE001 - the ledger has it; Slack is a courtesy
                    log.warning("watchdog: Slack notice for incident %s failed: %s", record.id, exc)
            self._show_gone([gone, *waiting], f"gone; incident {record.id} escalated to a person")
            return {"incident_id": record.id, "action": "escalated", "from": gone, "why": reason}
        event = reannounce_event(record, n + 1, gone, self.thresholds, self.ledger.identity())
        self.send([event])  # first: if it fails, nothing changed and the next round tries again
        mark = f"event:{event['id']}"
        if not self.ledger.reannounce_incident(record.id, gone, mark, reason=f"re-announced: {why}", by=BY,
                                               detail={"event_id": event["id"], "reannounce": n + 1}):
            return None  # a run took it over meanwhile (the event's triage run will stand down)
        log.warning("incident %s on %s re-announced (%d/%d): %s", record.id, record.node, n + 1,
                    self.max_reannounces, why)
        self._show_gone([gone, *waiting], f"gone: {why}; incident {record.id} re-announced for a new run")
        return {"incident_id": record.id, "action": "reannounced", "from": gone, "event_id": event["id"],
                "reannounce": n + 1}

    def _show_gone(self, run_ids: list[str], why: str) -> None:
        if self.show_gone is not None:
            self.show_gone(sorted(set(run_ids)), why)
