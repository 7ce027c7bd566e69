"""Shared by the approval, receiver and fix-flow tests: a real receiver (uvicorn on a free loopback port) serving
this area's routers, a flow run in a background thread, and gpu-remedy settings pointed at the simulator."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def run_receiver() -> Iterator[str]:
    """uvicorn serving remedy.receiver.slack + open_loop routers on 127.0.0.1:<free port>; yields its URL."""
    import uvicorn
    from fastapi import FastAPI

    from remedy.receiver import open_loop, slack

    app = FastAPI()
    app.include_router(slack.router)
    app.include_router(open_loop.router)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="receiver", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("receiver did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class FlowThread:
    """Run a flow call in a thread; `.result()` waits for it and re-raises what it raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._out: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn) -> None:
        try:
            self._out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self._out["error"] = exc

    def result(self, timeout: float = 120) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"flow still running after {timeout} s")
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_paused_approval(led, kind: str | None = None, timeout: float = 60.0):
    """The first pending approval whose flow run has reached its pause."""
    from remedy.approvals.decide import is_paused

    def ready():
        for a in led.approvals(pending=True):
            if (kind is None or a.kind == kind) and is_paused(a.flow_run_id):
                return led.get_approval(a.id)  # re-read: the Slack ts was written after the list was read
        return None

    return wait_for("a paused flow run waiting for approval", ready, timeout)


def flow_state(flow_run_id: str) -> str:
    from uuid import UUID

    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(flow_run_id)).state.type.value


SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U0ALICE"


UI_APPROVER = "bob"  # answers in the Prefect UI form


@pytest.fixture
def remedy_env(monkeypatch, tmp_path):
    """Point gpu-remedy's runtime at a fresh SQLite ledger and the given simulator / Slack stub.

    Returns `configure(sim=None, slack=None, **env)`; extra env keys are REMEDY_* names without the prefix."""
    from remedy import runtime

    def configure(sim=None, slack=None, **env: Any):
        values = {"DB_URL": f"sqlite:///{tmp_path / 'ledger.db'}", "SLACK__SIGNING_SECRET": SECRET,
                  "SLACK__APPROVERS": json.dumps([APPROVER]),
                  "APPROVALS__APPROVERS": json.dumps([UI_APPROVER]), "RECEIVER__EXECUTE_TOKEN": "open-loop-token"}
        if sim is not None:
            values |= {"CLUSTER__MODE": "simulator", "CLUSTER__SIMULATOR_URL": sim.url, "CLUSTER__API_RETRIES": "1"}
        if slack is not None:
            values |= {"SLACK__BASE_URL": slack.base_url, "SLACK__BOT_TOKEN": "xoxb-test", "SLACK__CHANNEL": "#gpu"}
        values |= {k: (json.dumps(v) if isinstance(v, (list, dict)) else str(v)) for k, v in env.items()}
        for k, v in values.items():
            monkeypatch.setenv(f"REMEDY_{k}", v)
        runtime.reset()
        return runtime

    yield configure
    runtime.reset()


RACK_STORM = ["gpu009", "gpu010", "gpu011", "gpu012", "gpu013"]  # rack-2 of a 32-node, 4-rack simulator


def rack_storm(remedy_env, sim, runner, slack=None, **env: Any) -> tuple[Any, dict[str, FlowThread]]:
    """Five XID 79s in rack-2 and a replace-node run for each, the rack breaker being the scope under test: the PDU,
    switch and cluster windows (other failure domains that would trip first or too) are opened up, the capacity
    budget leaves room for the whole storm, and every node is adopted with its spares freshly validated.
    `runner(flow, **params)` runs one flow (tests.fixtures.prefect's run_to_state or run_to_state_result).
    Returns (the runtime, {node: its run in a thread})."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    wide = {f"BREAKER__{k}__{f}": v for k in ("PDU", "SWITCH", "CLUSTER") for f, v in (("MAX_FAILURES", 100),
                                                                                        ("MAX_PERCENT", 100))}
    runtime = remedy_env(sim=sim, slack=slack, **({"BUDGET__MAX_NODES_IN_REMEDIATION": 8,
                                                    "BUDGET__MAX_PERCENT_IN_REMEDIATION": 50} | wide | env))
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
        if n.state.value == "spare":
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")
    for node in RACK_STORM:
        inject(sim.cluster, "xid", node, gpu=0, code=79)
    runs = {node: FlowThread(lambda node=node: runner(replace_node, node=node, cause="XID 79", xid=79, gpu=0))
            for node in RACK_STORM}
    return runtime, runs
