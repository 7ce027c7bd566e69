"""The warm dispatcher's slots on a real Prefect server: runs paused for an approval give their slot back, so they
never starve a new incident's run; runs that are working do hold theirs (the limit still limits)."""

from __future__ import annotations

import threading
import time
from uuid import UUID

import pytest
from prefect import flow

from remedy.platform.dispatcher import Dispatcher

pytestmark = pytest.mark.prefect

# Runs of `hold` that are working block on this until the test lets them go (a module global: the flow runs in
# the dispatcher's threads, in this process).
_RELEASE = threading.Event()


@flow(name="dispatcher-slot-test")
def hold(mode: str) -> str:
    """mode "pause": wait for an approval (as tasks/approvals.py does); "work": busy until released; else done."""
    from prefect.flow_runs import pause_flow_run

    if mode == "pause":
        pause_flow_run(timeout=120, poll_interval=1)
    elif mode == "work":
        _RELEASE.wait(60)
    return mode


def _state(client, run_id: UUID):
    return client.read_flow_run(run_id).state


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def deployment(prefect_server):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("dispatcher-slot-test")
        yield client, client.create_deployment(flow_id=flow_id, name=f"slots-{time.monotonic_ns()}", paused=True)


def test_runs_paused_for_approval_do_not_starve_a_new_incident(deployment):
    from prefect.flow_runs import resume_flow_run

    client, dep = deployment
    # One slot, taken by a run that now waits for a person (one, not several: each run start costs seconds here).
    dispatcher = Dispatcher({dep: hold}, poll_seconds=0.2, max_workers=1, max_waiting=4).start()
    try:
        paused = [client.create_flow_run_from_deployment(dep, parameters={"mode": "pause"}).id]
        dispatcher.wake()
        assert _wait_for(lambda: all(_state(client, r).is_paused() for r in paused), 60), \
            [_state(client, r).name for r in paused]

        # The only slot is held by a run waiting for an approval: a new incident's run starts and ends anyway.
        sent = time.monotonic()
        new = client.create_flow_run_from_deployment(dep, parameters={"mode": "done"}).id
        dispatcher.wake()
        assert _wait_for(lambda: _state(client, new).is_completed(), 15), _state(client, new).name
        assert time.monotonic() - sent < 15
        assert all(_state(client, r).is_paused() for r in paused)  # still waiting for their approvals
    finally:
        for run_id in paused:
            resume_flow_run(run_id)
        dispatcher.wait_idle(30)
        dispatcher.stop()
    assert all(_state(client, r).is_completed() for r in paused)


def test_runs_that_are_working_hold_their_slots(deployment):
    client, dep = deployment
    _RELEASE.clear()
    dispatcher = Dispatcher({dep: hold}, poll_seconds=0.2, max_workers=2).start()
    try:
        busy = [client.create_flow_run_from_deployment(dep, parameters={"mode": "work"}).id for _ in range(2)]
        dispatcher.wake()
        assert _wait_for(lambda: all(_state(client, r).is_running() for r in busy), 60)

        queued = client.create_flow_run_from_deployment(dep, parameters={"mode": "done"}).id
        dispatcher.wake()
        time.sleep(2)  # ten brisk polls: none may claim it while both slots work
        assert _state(client, queued).is_scheduled(), _state(client, queued).name
        assert dispatcher.working() == 2

        _RELEASE.set()  # a slot frees: the queued run starts without waiting for an alert
        assert _wait_for(lambda: _state(client, queued).is_completed(), 15), _state(client, queued).name
    finally:
        _RELEASE.set()
        dispatcher.wait_idle(30)
        dispatcher.stop()
