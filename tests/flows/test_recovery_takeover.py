"""A killed background repair is taken over like any run (issue 32, item 5). Triage replaces the failed node first
(XID 79, a spare ready), then repairs it off the critical path (recover-node: reboot, verify, burn-in, back to the
spares). The process is killed with SIGKILL during that repair. On main the incident was already resolved, so
nothing took it over: the node stayed cordoned in repair, two actions stayed `running` for ever, and the spare
pool stayed one short. Now the repair holds the incident (`acting`, with its marker) while the node is out; the
watchdog re-announces it when the dead run's lease runs out, and the new triage run carries the repair on: the
node passes burn-in and is a spare again; nothing is left running.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a ledger shared by the killed process
and this one (a SQLite file, or a real PostgreSQL 15 database), the receiver's lease watchdog with the trigger's own
parameter mapping."""

from __future__ import annotations

import pytest

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from remedy.sim.faults import inject
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result
from tests.flows.takeover_helpers import (  # noqa: F401 - ledger_db and warm_flow_processes are fixtures
    KILL_POINTS,
    SPARES,
    acts,
    go,
    kill_when,
    lease_runs_out,
    ledger_db,
    spares_left,
    start,
    warm_flow_processes,  # autouse there, and here by this import: start() needs its warm processes
)

pytestmark = pytest.mark.prefect


@pytest.mark.parametrize("ledger_db", ["sqlite", "postgresql"], indirect=True)
def test_a_killed_background_repair_is_taken_over(prefect_server, sim, remedy_env, ledger_db, tmp_path):
    from flows.triage import triage
    from remedy.deployments import INCIDENT_TRIGGER, trigger_parameters
    from remedy.domain.model import Incident
    from remedy.platform.demo import _spares_validated_at_build
    from remedy.receiver.watchdog import LeaseWatchdog

    runtime = remedy_env(sim=sim, **ledger_db)
    node = "gpu003"
    log = tmp_path / "flow.log"
    proc = start("triage(incident_id=incident_id, return_state=True)", log, stop_at="repair during reboot", node=node)
    _spares_validated_at_build(runtime)
    inject(sim.cluster, "xid", node, gpu=2, code=79)  # fallen off the bus: a reboot, after the job got a spare
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node=node, signal="xid", gpu=2, xid=79), window_seconds=600)

    # the background reboot was issued, the node is not back yet
    kill_when(go(proc, incident.id), lambda: KILL_POINTS["repair during reboot"](led, incident.id, node), log)
    assert spares_left(runtime) == SPARES - 1  # the job runs on the spare; the failed node is out
    held = led.get_incident(incident.id)
    assert held.status is IncidentStatus.ACTING, held  # held by the repair (main: resolved, so never taken over)
    lease_runs_out(led, held.flow_run_id, "the dead run's lease to run out")

    sent: list[dict] = []
    dog = LeaseWatchdog(led, sent.extend, every_seconds=0.2, max_reannounces=3)
    [done] = dog.sweep()
    assert done["action"] == "reannounced" and done["from"] == held.flow_run_id
    [event] = sent
    out = run_to_state_result(triage, **trigger_parameters(INCIDENT_TRIGGER, event["payload"]))
    assert out["action"] == "recover", out
    assert out["recovery"]["status"] == "returned-to-spares", out["recovery"]

    # one spare spent, and the repaired node back in the pool: the pool is whole again
    promoted = {a.node for a in acts(led, incident.id, "set_state_active", ActionOutcome.SUCCEEDED)}
    assert len(promoted) == 1 and node not in promoted
    assert spares_left(runtime) == SPARES
    assert led.get_node(node).state is NodeState.SPARE
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)
    # nothing left running, the dead run's reboot recorded abandoned, the incident settled
    assert [a for a in led.actions(incident_id=incident.id) if a.outcome is ActionOutcome.RUNNING] == []
    reboots = [(a.outcome.value, a.error.split(":")[0]) for a in acts(led, incident.id, "fix_reboot")]
    assert reboots[0] == ("failed", "abandoned") and reboots[-1] == ("succeeded", ""), reboots
    inc = led.get_incident(incident.id)
    assert inc.status is IncidentStatus.RESOLVED and "background repair" in inc.detail, inc
    assert led.stranded_incidents() == []
