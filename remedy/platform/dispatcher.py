"""The warm dispatcher: runs our deployments' scheduled flow runs inside this long-lived process.

Why: `serve` polls every 10 s and starts a fresh ~100 MB interpreter per run (3.5 s just to import Prefect), so an
event-triggered run completed 9.4 s after its event here; the target is a cordoned node 2 s after the alert.

How: every `poll_seconds` (and at once when `wake()` is called — the receiver does after Prefect acknowledged an
incident event) it asks the API for SCHEDULED runs of the registered deployments that are due, proposes PENDING
for each (the server's orchestration rules let only one proposer win, so two dispatchers never run one run
twice), and runs the flow with Prefect's own engine (`prefect.flow_engine.run_flow`) in a worker thread. The runs
stay ordinary deployment runs: visible in the UI with logs, artifacts, subflows; retryable and cancellable.

Slots: at most `max_workers` runs work at once. A run paused for an approval waits for a person, maybe an hour; it
keeps its thread but gives its slot back, so runs waiting for approvals can never starve a new incident's triage.
Paused runs have their own budget (`max_waiting`). A run that is full is not claimed: it stays Scheduled and starts
when a slot frees (every finished run wakes the poll).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

log = logging.getLogger(__name__)

BURST_SECONDS = 10.0  # how long after a wake the dispatcher polls briskly
BURST_POLL_SECONDS = 0.2


class Dispatcher:
    def __init__(self, flows: dict[UUID, Any], *, poll_seconds: float = 0.2, max_workers: int = 8,
                 max_waiting: int = 64, heartbeat: bool = False) -> None:
        self.flows = dict(flows)  # deployment id → flow object
        self.poll_seconds = poll_seconds
        self.heartbeat = heartbeat
        self.max_workers = max_workers  # runs working at once
        self.max_waiting = max_waiting  # runs paused for an approval at once, on top of those
        # Daemon threads, not a pool: a run paused for approval may hold its thread for an hour, and must not keep
        # the process alive after Ctrl-C (stop() marks such runs crashed, so they show up as retryable).
        self._inflight: set[UUID] = set()  # claimed here and not finished, paused or not
        self._waiting: set[UUID] = set()  # of those, paused at the last look (`_look_for_paused`)
        self._looked_at = -1e9  # monotonic time of the last look
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._burst_until = 0.0  # after a wake, poll every BURST_POLL_SECONDS until then
        self._settings_base: Any = None
        self._settings: Any = None
        self.started_runs: list[tuple[UUID, float]] = []  # (flow run id, monotonic time) — for the bench

    def start(self) -> Dispatcher:
        self._thread = threading.Thread(target=self._loop, name="dispatcher", daemon=True)
        self._thread.start()
        return self

    def wake(self, *_: Any) -> None:
        """Poll now, and briskly for the next few seconds: Prefect's trigger creates a run a moment after the event
        that woke us. Between alerts the poll idles at `poll_seconds`, so it does not compete with the runs for the
        API (each poll is a query on the server's database)."""
        self._burst_until = time.monotonic() + BURST_SECONDS
        self._wake.set()

    def next_wait(self) -> float:
        """Seconds until the next poll: brisk for BURST_SECONDS after a wake, else `poll_seconds`."""
        if time.monotonic() < self._burst_until:
            return min(self.poll_seconds, BURST_POLL_SECONDS)
        return self.poll_seconds

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no run this dispatcher started is still in progress (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop polling; runs still in progress (e.g. paused for approval) are marked Crashed with the reason."""
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(10)
        with self._lock:
            left = list(self._inflight)
        if not left:
            return
        try:
            from prefect.client.orchestration import get_client
            from prefect.states import Crashed

            with get_client(sync_client=True) as client:
                for run_id in left:
                    state = client.read_flow_run(run_id).state
                    if state is not None and state.is_final():  # e.g. cancelled by `remedy up` on the way out
                        continue
                    client.set_flow_run_state(run_id, Crashed(message="remedy up stopped while this run was in "
                                                              "progress; retry it from the UI"), force=True)
        except Exception:
            log.warning("could not mark %d in-progress runs crashed", len(left))

    def _loop(self) -> None:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    self.poll_once(client)
                except Exception:  # API restarting, network blip: keep polling
                    log.exception("dispatcher poll failed")
                self._wake.wait(self.next_wait())

    def poll_once(self, client) -> int:
        """Claim and start every due run; returns how many were started."""
        if not self.flows:
            return 0
        due = datetime.now(UTC) + timedelta(seconds=0.5)
        runs = client.get_scheduled_flow_runs_for_deployments(deployment_ids=list(self.flows), scheduled_before=due)
        return sum(self.submit(client, run) for run in sorted(runs, key=lambda r: r.next_scheduled_start_time or due))

    def submit(self, client, run) -> bool:
        """Claim one scheduled run (propose PENDING; only one proposer wins) and start it in a thread."""
        from prefect.exceptions import Abort
        from prefect.states import Pending
        from prefect.utilities.engine import propose_state_sync

        if run.deployment_id not in self.flows:
            return False
        if not self.has_room(client):
            return False  # stays Scheduled: the poll starts it when a slot frees
        with self._lock:
            if run.id in self._inflight:
                return False
            self._inflight.add(run.id)
        try:
            state = propose_state_sync(client, Pending(), flow_run_id=run.id)
        except Abort:
            state = None
        except Exception:
            log.exception("could not claim flow run %s", run.id)
            state = None
        if state is None or not state.is_pending():
            with self._lock:
                self._inflight.discard(run.id)
            return False
        self.started_runs.append((run.id, time.monotonic()))
        threading.Thread(target=self._run, args=(run,), name=f"flow-run-{run.id}", daemon=True).start()
        return True

    def working(self) -> int:
        """Runs started here that are not paused for an approval (at the last look)."""
        with self._lock:
            return len(self._inflight - self._waiting)

    def has_room(self, client) -> bool:
        """Whether one more run may start now: a slot among `max_workers` that is not held by a paused run, and
        room in the paused runs' own budget. Asks the API which runs are paused only when the count says full."""
        with self._lock:
            if len(self._inflight) < self.max_workers:
                return True
        try:
            self._look_for_paused(client)
        except Exception:  # API blip: judge by the last look; the poll asks again
            log.warning("could not read which runs are paused; judging by the last look", exc_info=True)
        with self._lock:
            working = len(self._inflight - self._waiting)
            return working < self.max_workers and len(self._inflight) < self.max_workers + self.max_waiting

    def _look_for_paused(self, client, *, every: float = 0.5) -> None:
        """Which of our runs are paused now (one query, at most every `every` seconds): a paused run's state is on
        the server (`pause_flow_run` set it), its thread only polls for the answer. A run resumed since then counts
        as working again at the next look."""
        from prefect.client.schemas.filters import (
            FlowRunFilter,
            FlowRunFilterId,
            FlowRunFilterState,
            FlowRunFilterStateType,
        )
        from prefect.client.schemas.objects import StateType

        now = time.monotonic()
        with self._lock:
            if now - self._looked_at < every:
                return
            self._looked_at = now
            ids = list(self._inflight)
        paused = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=ids),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))), limit=len(ids))
        with self._lock:
            self._waiting = {r.id for r in paused} & self._inflight

    def _run_settings(self):
        """The settings every run gets: the heartbeat thread adds ~1 s to every flow and subflow
        (shared/notes/environment.md). Built once per process settings, not per run (a copy of Prefect's settings
        costs tens of ms, on the way to the cordon)."""
        import prefect.context

        ctx = prefect.context.get_settings_context()
        with self._lock:
            if self._settings_base is not ctx.settings:
                updates: dict[Any, Any] = {} if self.heartbeat else {"flows.heartbeat_frequency": None}
                self._settings_base, self._settings = ctx.settings, ctx.settings.copy_with_update(updates=updates)
            settings = self._settings
        return prefect.context.SettingsContext(profile=ctx.profile, settings=settings)

    def _run(self, run) -> None:
        from prefect.flow_engine import run_flow

        try:
            flow = self.flows[run.deployment_id]
            with self._run_settings():
                run_flow(flow, flow_run=run, return_type="state")
        except BaseException:  # the engine already recorded the failure on the run; never kill the pool thread
            log.exception("flow run %s raised outside the engine", run.id)
        finally:
            with self._lock:
                self._inflight.discard(run.id)
                self._waiting.discard(run.id)
            self._wake.set()  # a slot is free: a run left Scheduled for lack of one starts now


def triage_key(payload: dict[str, Any]) -> str:
    """One triage run per incident of one ledger (its identity, in the payload: a reset ledger's or another stack's
    incident with the same number is another run), and one more per re-announce by the lease watchdog."""
    again, ledger = payload.get("reannounce"), payload.get("ledger")
    return (f"triage:{'ledger-' + ledger + ':' if ledger else ''}incident:{payload['incident_id']}"
            + (f":reannounce-{again}" if again else ""))


def _run_tags(event: dict[str, Any]) -> list[str]:
    """The triage run's UI tags, from the event (its rack is a related resource): the run is created tagged, so
    the flow does not spend API round trips tagging itself before it acts (tasks.tags.tag_this_run)."""
    from remedy.domain.run_tags import run_tags

    payload = event["payload"]
    rack = next((r["prefect.resource.name"] for r in event.get("related", ())
                 if r.get("prefect.resource.role") == "rack"), None)
    return run_tags(payload["node"], stage="triage", xid=payload.get("xid"), rack=rack)


class DirectTriageSink:
    """Embedded fast path: after Prefect took the incident events, create each incident's triage run ourselves.

    Measured here, the server's own event → trigger → run path took 0.7–34 s under load (its trigger and action
    services are queues), against a 2 s alert → cordon target. So the embedded stack applies the triage trigger
    disabled and does what it would: one `run-deployment` per `remedy.incident.opened` event, with the same
    parameters (`remedy.deployments.trigger_parameters`). The idempotency key is per incident (and per re-announce of
    an incident whose run is gone: `triage_key`), so a re-sent event can never make a second run: one triage run per
    announcement. If creating the run fails, `send` raises and the announcer keeps the incident unannounced and
    retries (the ledger is the outbox).
    """

    def __init__(self, inner, deployment_id: UUID, trigger, dispatcher: Dispatcher | None = None) -> None:
        self.inner, self.deployment_id, self.trigger, self.dispatcher = inner, deployment_id, trigger, dispatcher
        self._client: SyncPrefectClient | None = None

    def send(self, events: list[dict[str, Any]]) -> None:
        from prefect.client.orchestration import get_client

        from remedy.deployments import trigger_parameters

        if self._client is None:
            self._client = get_client(sync_client=True)
            self._client.__enter__()
        # The run first, handed straight to the dispatcher (no poll round trip); then the event, for the record.
        for event in events:
            payload = event["payload"]
            run = self._client.create_flow_run_from_deployment(
                self.deployment_id, parameters=trigger_parameters(self.trigger, payload),
                idempotency_key=triage_key(payload), tags=_run_tags(event),
            )
            if self.dispatcher is not None and run.state is not None and run.state.is_scheduled():
                self.dispatcher.submit(self._client, run)
        self.inner.send(events)

    def close(self) -> None:
        if self._client is not None:
            self._client.__exit__(None, None, None)
        self.inner.close()
