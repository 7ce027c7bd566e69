"""Dead runs are taken over: the flow runs in its own process and is killed with SIGKILL at each step of
replace-node and fix-in-place (forked from a zygote that imported the flows once; it stops itself right after
the ledger write that reaches the kill point, and is killed there); then a new run (a person's, or the next trigger's) or the watchdog's re-announce
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
write by the ledger's lease fence (remedy.ledger.base.LedgerBase._fenced). The flow processes and the takeover
helpers are tests/flows/takeover_helpers.py, shared with tests/flows/test_fencing.py."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from remedy.sim.faults import inject
from tests.approvals.helpers import flow_state, remedy_env, wait_for  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result
from tests.flows.takeover_helpers import (  # noqa: F401 - ledger_db and warm_flow_processes are fixtures
    KILL_POINTS,
    LEASES,
    REAL_LEASES,
    SPARES,
    acts,
    assert_settled,
    go,
    kill_when,
    lease_runs_out,
    ledger_db,
    recover,
    spares_left,
    start,
    stop_outside_a_write,
    wait_stopped_at,
    warm_flow_processes,  # autouse: every test here forks flow processes from the module's zygote
)

pytestmark = pytest.mark.prefect


# the kill points (takeover_helpers.KILL_POINTS: what the ledger shows at the moment to kill; the flow writes each
# action's row before it acts) are reached in the flow process, which stops itself there for the kill

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
                 "incident_id=incident_id, return_state=True)", log, stop_at=f"replace {step}", node=node)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal=signal_kind, gpu=4), window_seconds=600)
    kill_when(go(proc, incident.id), lambda: KILL_POINTS[f"replace {step}"](led, incident.id, node), log)
    assert runtime.cluster().get_node(node).unschedulable  # cordoned, and its owner is dead

    out = recover(runtime, incident.id, how, lambda: run_to_state_result(
        replace_node, node=node, cause="row remap failed", signal=signal_kind, gpu=4, incident_id=incident.id))
    assert out["status"] == "replaced", out
    promoted = {a.node for a in acts(led, incident.id, "set_state_active", ActionOutcome.SUCCEEDED)}
    assert promoted == {out["replacement"]}  # exactly one spare
    assert spares_left(runtime) == SPARES - 1
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
    assert_settled(runtime, incident.id, node)


# the rung of fix-in-place's ladder each kill point is on
FIX_RUNG = {"after cordon": "reset", "during drain": "reset", "during reset": "reset", "during verify": "reset",
            "during reboot": "reboot"}


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

    rung = FIX_RUNG[step]
    # fixed in place, not replaced first (triage would give the job a spare and fix the node off the critical path)
    runtime = remedy_env(sim=sim, LADDER__REPLACE_FIRST="false", **ledger_db)
    node = "gpu005"
    log = tmp_path / "flow.log"
    proc = start("triage(incident_id=incident_id, return_state=True)" if how == "watchdog" else
                 f"fix_in_place(node='{node}', xid=145, gpu=3, incident_id=incident_id, return_state=True)", log,
                 stop_at=f"fix {step}", node=node)
    _spares_validated_at_build(runtime)
    inject(sim.cluster, "xid", node, gpu=3, code=145)
    if rung == "reboot":  # the reset does not clear it; the reboot does
        inject(sim.cluster, "reset-fails", node, gpu=3)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal="xid", gpu=3, xid=145), window_seconds=600)
    kill_when(go(proc, incident.id), lambda: KILL_POINTS[f"fix {step}"](led, incident.id, node), log)
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
    wait_for("the drain", lambda: acts(led, incident.id, "drain_node", ActionOutcome.RUNNING), timeout=60,
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
    assert acts(led, incident.id, "claim_spare") == [] and acts(led, incident.id, "set_state_active") == []
    assert spares_left(runtime) == SPARES
    assert led.get_incident(incident.id).flow_run_id == "the-run-that-took-over"  # never written over


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
                 "return_state=True)", log, stop_at="replace during drain", node=node)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal="row-remap-failure", gpu=2), window_seconds=600)
    go(proc, incident.id)
    wait_stopped_at(proc, lambda: KILL_POINTS["replace during drain"](led, incident.id, node), log)
    # stopped by its own SIGSTOP mid-drain; not holding SQLite's write lock (the lease renewal could be)
    stop_outside_a_write(proc, runtime.settings().db_url, stop=False)
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
    promoted = {a.node for a in acts(led, incident.id, "set_state_active", ActionOutcome.SUCCEEDED)}
    assert promoted == {out["replacement"]}
    assert len({a.node for a in acts(led, incident.id, "claim_spare")}) == 1
    assert spares_left(runtime) == SPARES - 1  # exactly one spare
    rec = led.get_incident(incident.id)
    assert rec.status is IncidentStatus.RESOLVED and rec.flow_run_id != stalled
    assert_settled(runtime, incident.id, node)
