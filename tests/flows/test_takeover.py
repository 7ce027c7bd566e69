"""Dead runs are taken over: the flow runs in its own process and is killed with SIGKILL at each step of
replace-node and fix-in-place; then a new run (a person's, or the next trigger's) or the watchdog's re-announce
takes the incident over. Exactly one spare is used, the node is never left cordoned without a live owner, and the
incident ends settled. Nothing marks the dead run Crashed by hand: its lease runs out. The lease is long (60 s:
no stall of a loaded machine loses it before the kill point) and nobody waits for it: after the kill this process
moves its ledger's clock past it (remedy.ledger.base.LedgerBase.clock). One case (a stopped run on PostgreSQL)
waits for a real 10 s lease to run out.

Every kill point runs on SQLite; PostgreSQL runs one kill point per flow and the stopped run (the ledger's takeover
and fence are tested on both databases, fast, in tests/ledger/test_leases.py and test_fence.py).

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a ledger shared by the killed process
and this one (a SQLite file, or a real PostgreSQL 15 database), the receiver's lease watchdog with the trigger's own
parameter mapping. A run that is only stopped (SIGSTOP) and continued after it was taken over is refused at its next
write by the ledger's lease fence (remedy.ledger.base.LedgerBase._fenced)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from remedy.sim.faults import inject
from tests.approvals.helpers import flow_state, remedy_env, wait_for  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect

# a lease long enough to ride out any stall of this shared machine (flow processes seen silent for over 4 s at load
# 20 on 2 cores, and losing a 10 s lease before the kill point at load 25): nobody waits it out, the test moves its
# ledger's clock past it (lease_runs_out)
LEASES = {"LEASES__TTL_SECONDS": 60, "LEASES__RENEW_SECONDS": 1, "LEASES__WATCHDOG_SECONDS": 0.2}
# the one case that waits for a real lease to run out: short, still well above a renewal
REAL_LEASES = {"LEASES__TTL_SECONDS": 10, "LEASES__RENEW_SECONDS": 0.2, "LEASES__WATCHDOG_SECONDS": 0.2}
SPARES = 2  # the simulator's sim fixture: 16 nodes, 2 spares


@pytest.fixture
def ledger_db(request) -> dict[str, object]:
    """The ledger the flow processes share (remedy_env's SQLite file, or a fresh PostgreSQL database), with the
    test's lease settings."""
    if request.param == "sqlite":
        return dict(LEASES)
    return LEASES | {"DB_URL": request.getfixturevalue("fresh_postgres_url")}


def lease_runs_out(led, run_id: str, what: str, *, real: bool = False) -> None:
    """The dead (or stopped) run's lease runs out: this process's ledger clock moves past it at once (its lease was
    renewed at the latest when the process was killed), or, `real`, we wait for the wall clock."""
    if not real:
        from remedy.domain.model import utcnow

        ahead = timedelta(seconds=LEASES["LEASES__TTL_SECONDS"] + 1)
        led.clock = lambda: utcnow() + ahead
    wait_for(what, lambda: led.run_gone(run_id), timeout=60, every=0.05)


def _acts(led, incident_id: int, kind: str, outcome: ActionOutcome | None = None, *, not_node: str | None = None):
    return [a for a in led.actions(incident_id=incident_id, kind=kind)
            if (outcome is None or a.outcome is outcome) and (not_node is None or a.node != not_node)]


# what the ledger shows at the moment to kill (the flow writes each action's row before it acts)
REPLACE_STEPS: dict[str, Callable] = {
    "after cordon": lambda led, i, node: _acts(led, i, "cordon_node", ActionOutcome.SUCCEEDED),
    "during drain": lambda led, i, node: _acts(led, i, "drain_node", ActionOutcome.RUNNING),
    "after spare claim": lambda led, i, node: _acts(led, i, "claim_spare"),
    "during promotion": lambda led, i, node: _acts(led, i, "untaint_node", not_node=node),
}


# a flow process as a worker has it: Prefect and the flows imported before there is work (the slow part of starting a
# process on this machine); then it is told its settings, its log, its call and, at `go()`, the incident
WARM = ("import json, os, sys\n"
        "from flows.triage import triage\nfrom flows.replace_node import replace_node\n"
        "from flows.fix_in_place import fix_in_place\n"
        "job = json.loads(sys.stdin.readline())\n"
        "os.environ.update(job['env'])\n"
        "log = os.open(job['log'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
        "sys.stdout.flush(); sys.stderr.flush(); os.dup2(log, 1); os.dup2(log, 2)\n"
        "incident_id = int(sys.stdin.readline())\n"
        "exec(job['call'])\n")


class WarmFlowProcesses:
    """One flow process started ahead: it imports while the test before it runs, and the next is started as soon
    as one is taken. It starts without REMEDY_* settings (another test's would linger) and gets the taking test's."""

    def __init__(self, home) -> None:
        self.home = home
        self._spare: tuple[subprocess.Popen, object] | None = None
        self._started = 0

    def _spawn(self) -> tuple[subprocess.Popen, object]:
        import os

        from prefect.settings import PREFECT_API_URL

        self._started += 1
        boot = self.home / f"warm-{self._started}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMEDY_")}
        env["PREFECT_API_URL"] = PREFECT_API_URL.value()
        with open(boot, "wb") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen([sys.executable, "-c", WARM], env=env, stdin=subprocess.PIPE, stdout=log,
                                    stderr=subprocess.STDOUT)
        return proc, boot

    def start(self, call: str, log_path) -> subprocess.Popen:
        import json
        import os

        proc, boot = self._spare or self._spawn()
        self._spare = self._spawn()
        if proc.poll() is not None:
            pytest.fail(f"the flow process died before it was given work:\n{boot.read_text()[-3000:]}")
        job = {"env": {k: v for k, v in os.environ.items() if k.startswith("REMEDY_")}, "log": str(log_path),
               "call": call}
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        return proc

    def close(self) -> None:
        if self._spare is not None:
            self._spare[0].kill()
            self._spare[0].wait()
            self._spare = None


_warm: WarmFlowProcesses | None = None


@pytest.fixture(scope="module", autouse=True)
def warm_flow_processes(prefect_server, tmp_path_factory):
    global _warm
    _warm = WarmFlowProcesses(tmp_path_factory.mktemp("warm-flows"))
    yield _warm
    _warm.close()
    _warm = None


def start(call: str, log_path) -> subprocess.Popen:
    """`call` (a flow call using `incident_id`) in a flow process of its own, with this test's REMEDY_* settings
    and Prefect API, writing to `log_path`; it has imported the flows already and waits for `go()` with the
    incident id."""
    return _warm.start(call, log_path)


def go(proc: subprocess.Popen, incident_id: int) -> subprocess.Popen:
    proc.stdin.write(f"{incident_id}\n".encode())
    proc.stdin.close()
    return proc


def kill_when(proc: subprocess.Popen, ready: Callable[[], object], log_path, timeout: float = 240.0) -> None:
    # generous: on this shared machine at load 20 a fresh flow process took over 80 s to reach its first fix step
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the flow process ended before the kill point:\n{log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"kill point not reached in {timeout:.0f} s:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def recover(runtime, incident_id: int, how: str, rerun: Callable[[], dict]) -> dict:
    """After the kill: the dead run still looks alive until its lease runs out; then a new run takes over, started
    by a person (`rerun`) or by the watchdog's re-announce (triage with the trigger's parameters)."""
    from remedy.deployments import INCIDENT_TRIGGER, trigger_parameters
    from remedy.receiver.watchdog import LeaseWatchdog

    led = runtime.ledger()
    held = led.get_incident(incident_id)
    holder = held.flow_run_id
    assert held.status is IncidentStatus.ACTING and led.get_lease(holder) is not None
    lease_runs_out(led, holder, "the dead run's lease to run out")
    if how == "rerun":
        out = rerun()
    else:
        sent: list[dict] = []
        dog = LeaseWatchdog(led, sent.extend, every_seconds=0.2, max_reannounces=3)
        [done] = dog.sweep()
        assert done["action"] == "reannounced" and done["from"] == holder
        assert dog.sweep() == []  # once: the incident is open for the new run now
        [event] = sent
        assert event["payload"]["reannounce"] == 1 and event["payload"]["incident_id"] == incident_id
        from flows.triage import triage

        out = run_to_state_result(triage, **trigger_parameters(INCIDENT_TRIGGER, event["payload"]))
        assert out["status"] not in ("duplicate", "already-handled", "skipped"), out
        out = out["outcome"]
    # every run of the dead process (the holder, a subflow under it) is shown Crashed in Prefect and holds nothing;
    # the handover is in the ledger
    dead = dead_process_runs(led, holder)
    assert holder in dead and all(flow_state(run) == "CRASHED" for run in dead), dead
    assert all(led.get_lease(run).ended_at is not None for run in dead)
    handed = led.actions(incident_id=incident_id, kind="take_over_incident" if how == "rerun" else "reannounce_incident")
    assert [a.detail["from"] for a in handed] == [holder]
    return out


def dead_process_runs(led, holder: str) -> list[str]:
    from sqlalchemy import select

    from remedy.ledger import schema

    r = schema.run_leases.c
    with led.engine.connect() as conn:
        process = conn.execute(select(r.process).where(r.run_id == holder)).scalar_one()
        return [row.run_id for row in conn.execute(select(r.run_id).where(r.process == process))]


def assert_settled(runtime, incident_id: int, node: str) -> None:
    """Settled, nothing left running, no incident stranded, and a cordoned node has an owner: a repair (replaced)
    or a person (escalated), never a dead run."""
    led = runtime.ledger()
    inc = led.get_incident(incident_id)
    assert inc.status in (IncidentStatus.RESOLVED, IncidentStatus.ESCALATED), inc
    assert [a for a in led.actions(incident_id=incident_id) if a.outcome is ActionOutcome.RUNNING] == []
    assert led.stranded_incidents() == []
    if runtime.cluster().get_node(node).unschedulable:
        assert inc.status is IncidentStatus.ESCALATED or led.get_node(node).state is NodeState.REPAIR, inc


def spares_left(runtime) -> int:
    return [n.labels.get("remedy.io/pool") for n in runtime.cluster().list_gpu_nodes()].count("spare")


@pytest.mark.parametrize("ledger_db,step,how", [
    ("sqlite", "after cordon", "rerun"),
    ("sqlite", "during drain", "watchdog"),
    ("sqlite", "after spare claim", "rerun"),
    ("sqlite", "during promotion", "watchdog"),
    ("postgresql", "during promotion", "watchdog"),
], indirect=["ledger_db"])
def test_replace_node_killed_at_each_step_is_taken_over(prefect_server, sim, remedy_env, ledger_db, tmp_path, step,
                                                        how):
    """`rerun`: the killed process ran replace-node by hand, a person runs it again; `watchdog`: it ran triage (as
    the trigger does), the watchdog re-announces, and triage runs again with the trigger's parameters."""
    from flows.replace_node import replace_node
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build

    runtime = remedy_env(sim=sim, **ledger_db)
    node, signal_kind = "gpu007", "row-remap-failure"  # triage's path for it is replace
    log = tmp_path / "flow.log"
    proc = start("triage(incident_id=incident_id, return_state=True)" if how == "watchdog" else
                 f"replace_node(node='{node}', cause='row remap failed', signal='{signal_kind}', gpu=4, "
                 "incident_id=incident_id, return_state=True)", log)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal=signal_kind, gpu=4), window_seconds=600)
    kill_when(go(proc, incident.id), lambda: REPLACE_STEPS[step](led, incident.id, node), log)
    assert runtime.cluster().get_node(node).unschedulable  # cordoned, and its owner is dead

    out = recover(runtime, incident.id, how, lambda: run_to_state_result(
        replace_node, node=node, cause="row remap failed", signal=signal_kind, gpu=4, incident_id=incident.id))
    assert out["status"] == "replaced", out
    promoted = {a.node for a in _acts(led, incident.id, "set_state_active", ActionOutcome.SUCCEEDED)}
    assert promoted == {out["replacement"]}  # exactly one spare
    assert spares_left(runtime) == SPARES - 1
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
    assert_settled(runtime, incident.id, node)


# fix-in-place's steps inside one rung (the ladder attempt row is running throughout): (rung, what the ledger shows)
FIX_STEPS: dict[str, tuple[str, Callable]] = {
    "after cordon": ("reset", lambda led, i: _acts(led, i, "cordon_node", ActionOutcome.SUCCEEDED)),
    "during drain": ("reset", lambda led, i: _acts(led, i, "drain_node", ActionOutcome.RUNNING)),
    "during reset": ("reset", lambda led, i: _acts(led, i, "job_gpu-reset", ActionOutcome.RUNNING)),
    "during verify": ("reset", lambda led, i: (_acts(led, i, "job_gpu-reset", ActionOutcome.SUCCEEDED)  # the probe
                                              and _acts(led, i, "job_nvml-probe", ActionOutcome.RUNNING))),
    # the reboot was issued (the simulator reboots by Job) and the node is not back yet
    "during reboot": ("reboot", lambda led, i: (_acts(led, i, "job_reboot")
                                                and _acts(led, i, "fix_reboot", ActionOutcome.RUNNING))),
}


@pytest.mark.parametrize("ledger_db,step,how", [
    ("sqlite", "after cordon", "rerun"),
    ("sqlite", "during drain", "watchdog"),
    ("sqlite", "during reset", "watchdog"),
    ("sqlite", "during verify", "rerun"),
    ("sqlite", "during reboot", "rerun"),
    ("postgresql", "during verify", "rerun"),
], indirect=["ledger_db"])
def test_fix_in_place_killed_at_each_step_is_taken_over(prefect_server, sim, remedy_env, ledger_db, tmp_path, step,
                                                        how):
    """The rung the dead run was on is tried again (its abandoned attempt says nothing about the fix): the node is
    fixed in place, no spare is spent."""
    from flows.fix_in_place import fix_in_place
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build

    rung, during = FIX_STEPS[step]
    # fixed in place, not replaced first (triage would give the job a spare and fix the node off the critical path)
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false", **ledger_db)
    node = "gpu005"
    log = tmp_path / "flow.log"
    proc = start("triage(incident_id=incident_id, return_state=True)" if how == "watchdog" else
                 f"fix_in_place(node='{node}', xid=145, gpu=3, incident_id=incident_id, return_state=True)", log)
    _spares_validated_at_build(runtime)
    inject(sim.cluster, "xid", node, gpu=3, code=145)
    if rung == "reboot":  # the reset does not clear it; the reboot does
        inject(sim.cluster, "reset-fails", node, gpu=3)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal="xid", gpu=3, xid=145), window_seconds=600)
    kill_when(go(proc, incident.id), lambda: during(led, incident.id), log)
    assert runtime.cluster().get_node(node).unschedulable

    out = recover(runtime, incident.id, how, lambda: run_to_state_result(
        fix_in_place, node=node, xid=145, gpu=3, incident_id=incident.id))
    assert out["status"] == "fixed", out
    attempts = [(a.kind, a.outcome.value, a.error.split(":")[0]) for a in led.actions(incident_id=incident.id)
                if a.kind.startswith("fix_")]
    fix = f"fix_{'reset-gpu' if rung == 'reset' else 'reboot'}"
    assert attempts[-2:] == [(fix, "failed", "abandoned"), (fix, "succeeded", "")], attempts
    assert spares_left(runtime) == SPARES  # fixed in place: no spare spent
    assert not runtime.cluster().get_node(node).unschedulable and led.get_node(node).state is NodeState.ACTIVE
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
    assert_settled(runtime, incident.id, node)


def test_a_late_approval_for_a_killed_run_says_so_and_the_incident_is_reannounced(prefect_server, sim, remedy_env,
                                                                                   tmp_path):
    """The run paused for an answer is killed (as when `remedy up` is stopped); a Slack click afterwards does not
    report "resumed": it says the run is gone, and the receiver's watchdog re-announces the incident at once."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    from remedy.approvals.signing import click_payload, form_body, signed_headers
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build
    from remedy.receiver.server import ReceiverServer, build_receiver
    from tests.approvals.helpers import APPROVER, SECRET, wait_paused_approval

    # no budget for automation: the gate asks a person; the watchdog runs only when woken (not on its own timer)
    runtime = remedy_env(sim=sim, BUDGET__MAX_NODES_IN_REMEDIATION=0, APPROVALS__TIMEOUT_SECONDS=600,
                         **(LEASES | {"LEASES__WATCHDOG_SECONDS": 3600}))
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node="gpu009", signal="row-remap-failure", gpu=1), window_seconds=600)
    log = tmp_path / "flow.log"
    proc = go(start("replace_node(node='gpu009', signal='row-remap-failure', gpu=1, incident_id=incident_id, "
                    "return_state=True)", log), incident.id)
    receiver = build_receiver(runtime.settings(), led, api_url=PREFECT_API_URL.value())
    with ReceiverServer(receiver) as server:
        pending = wait_paused_approval(led, timeout=90)
        assert pending.kind.startswith("hold:")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lease_runs_out(led, pending.flow_run_id, "the paused run's lease to run out")

        body = form_body(click_payload(approval_id=pending.id, flow_run_id=pending.flow_run_id, approve=True,
                                       user_id=APPROVER, channel_id="C0REMEDY1"))
        r = httpx.post(f"{server.url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body),
                       timeout=30)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["resumed"] is False and answer["gone"] is True, answer
        assert "The run waiting for this answer is gone" in answer["text"]
        assert f"Incident {incident.id} on gpu009 is re-announced" in answer["text"]

        reannounced = wait_for("the incident to be re-announced", lambda: led.actions(
            incident_id=incident.id, kind="reannounce_incident"), timeout=30)
    assert reannounced[0].detail["from"] == pending.flow_run_id
    rec = led.get_incident(incident.id)
    assert rec.status is IncidentStatus.OPEN and rec.flow_run_id == f"event:{reannounced[0].detail['event_id']}"
    closed = led.get_approval(pending.id)  # nobody waits for it: closed, not approved
    assert (closed.decision, closed.decided_by) == ("timeout", "gpu-remedy")
    [late] = led.actions(incident_id=incident.id, kind="approval_too_late")
    assert late.requested_by == APPROVER and late.detail["decision"] == "approve"
    assert flow_state(pending.flow_run_id) == "CRASHED"  # not Paused with a live Resume button
    assert runtime.cluster().get_node("gpu009").unschedulable is False  # the gate held it: never cordoned


@pytest.mark.parametrize("lost", ["lease ended", "incident handed over"])
def test_a_run_that_lost_its_lease_stops_acting(prefect_server, sim_factory, remedy_env, lost):
    """A live run whose lease was found expired (its process stalled past it) and whose incident went to another run
    stops before its next step: it never claims or promotes a spare next to the run that has its incident now.
    `incident handed over`: its lease is still live (its own process sees nothing wrong), only the incident changed
    hands: the ledger's fence inside the next write is what stops it."""
    from flows.replace_node import replace_node
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build
    from tests.approvals.helpers import FlowThread
    from tests.fixtures.prefect import run_to_state

    sim = sim_factory(nodes=16, spares=2, time_scale=0.05)  # the 30 s drain grace lasts 1.5 s: time to step in
    runtime = remedy_env(sim=sim, **LEASES)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node="gpu011", signal="row-remap-failure", gpu=0), window_seconds=600)
    run = FlowThread(lambda: run_to_state(replace_node, node="gpu011", signal="row-remap-failure", gpu=0,
                                          incident_id=incident.id))
    wait_for("the drain", lambda: _acts(led, incident.id, "drain_node", ActionOutcome.RUNNING), timeout=60,
             every=0.01)
    holder = led.get_incident(incident.id).flow_run_id
    if lost == "lease ended":
        assert led.end_lease(holder, reason="gone: found gone by the watchdog (test)")  # as after a long stall
        assert led.claim(incident.id, "the-run-that-took-over").took_over_from == holder
    else:
        assert led.take_over_incident(incident.id, "the-run-that-took-over", expected_holder=holder,
                                      reason="test: handed to another run", holder_over=False).claimed
        assert led.get_lease(holder).ended_at is None
    state, out = run.result(120)
    assert state.is_failed() and "LeaseLost" in state.message and "it stops here" in state.message, state
    assert _acts(led, incident.id, "claim_spare") == [] and _acts(led, incident.id, "set_state_active") == []
    assert spares_left(runtime) == SPARES
    assert led.get_incident(incident.id).flow_run_id == "the-run-that-took-over"  # never written over


def _stop_outside_a_write(proc, db_url: str) -> None:
    """SIGSTOP `proc`, but not inside a SQLite write transaction: a process frozen holding SQLite's write lock
    blocks every writer until it continues (one reason production runs the ledger on PostgreSQL, where a frozen
    client holds only its own rows). If the write lock is held, let it run a moment and stop it again."""
    import os
    import sqlite3

    proc.send_signal(signal.SIGSTOP)
    if not db_url.startswith("sqlite"):
        return
    path = db_url.split("///", 1)[-1]
    assert os.path.exists(path), path  # else sqlite3 would create an empty file and the check would prove nothing
    for _ in range(200):
        con = sqlite3.connect(path, timeout=0.05)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.rollback()
            return
        except sqlite3.OperationalError:  # locked: the stopped process is inside a write
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
            proc.send_signal(signal.SIGSTOP)
        finally:
            con.close()
    raise AssertionError("the run never left its write transaction")


@pytest.mark.parametrize("ledger_db", ["sqlite", "postgresql"], indirect=True)
def test_a_stopped_run_taken_over_meanwhile_is_refused_when_it_continues(prefect_server, sim_factory, remedy_env,
                                                                         ledger_db, tmp_path):
    """SIGSTOP the process running replace-node during the drain (a frozen VM, a paused container): its lease runs
    out, a person's run takes the incident over and replaces the node. SIGCONT: the stopped run wakes up mid-drain
    and is refused at its next write: it claims no spare, promotes nothing, writes no status. Exactly one spare."""
    from flows.replace_node import replace_node
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build

    sim = sim_factory(nodes=16, spares=2, time_scale=0.05)  # the 30 s drain grace lasts 1.5 s: time to stop it
    real = "DB_URL" in ledger_db  # PostgreSQL: the lease runs out on the wall clock
    runtime = remedy_env(sim=sim, **(ledger_db | (REAL_LEASES if real else {})))
    node = "gpu010"
    log = tmp_path / "flow.log"
    proc = start(f"replace_node(node='{node}', signal='row-remap-failure', gpu=2, incident_id=incident_id, "
                 "return_state=True)", log)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal="row-remap-failure", gpu=2), window_seconds=600)
    go(proc, incident.id)
    deadline = time.monotonic() + 240
    while not _acts(led, incident.id, "drain_node", ActionOutcome.RUNNING):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.005)
    _stop_outside_a_write(proc, runtime.settings().db_url)
    try:
        stalled = led.get_incident(incident.id).flow_run_id
        # PostgreSQL: the wall clock, once (the end-to-end check that a real lease runs out on its own)
        lease_runs_out(led, stalled, "the stopped run's lease to run out", real=real)
        out = run_to_state_result(replace_node, node=node, signal="row-remap-failure", gpu=2, incident_id=incident.id)
        assert out["status"] == "replaced", out
        [handed] = led.actions(incident_id=incident.id, kind="take_over_incident")
        assert handed.detail["from"] == stalled
    finally:
        proc.send_signal(signal.SIGCONT)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the continued run did not stop:\n{log.read_text()[-3000:]}")
    said = log.read_text()
    assert "LeaseLost" in said and "it stops here" in said, said[-3000:]

    mine = [a for a in led.actions(incident_id=incident.id) if stalled in a.requested_by]
    kinds = {a.kind for a in mine}
    assert kinds.isdisjoint({"claim_spare", "untaint_node", "label_node", "set_state_active", "set_state_repair"}), kinds
    assert all(a.outcome is not ActionOutcome.RUNNING for a in mine), mine
    promoted = {a.node for a in _acts(led, incident.id, "set_state_active", ActionOutcome.SUCCEEDED)}
    assert promoted == {out["replacement"]}
    assert len({a.node for a in _acts(led, incident.id, "claim_spare")}) == 1
    assert spares_left(runtime) == SPARES - 1  # exactly one spare
    rec = led.get_incident(incident.id)
    assert rec.status is IncidentStatus.RESOLVED and rec.flow_run_id != stalled
    assert_settled(runtime, incident.id, node)
