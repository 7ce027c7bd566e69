"""replace_node with no spare ready (issue #4 part 9, seed 002 §4.3.5): plan a preemption of lower-priority work,
a person approves, the session is evicted and the gang job is back at full size on the freed node — on the
simulator through the real client and a real Prefect server; approvals answered through the real paths."""

from __future__ import annotations

from uuid import UUID

import pytest

from tests.approvals.helpers import (  # noqa: F401 - remedy_env is a fixture
    FlowThread,
    remedy_env,
    wait_paused_approval,
)
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect

FAILED = "gpu003"
SESSIONS = {"notebook-gpu008": "gpu008", "notebook-gpu016": "gpu016"}  # the last node of each rack
# 16 nodes, no spare, 2 sessions: the training job runs on the other 14. With no ready spare there is no reserve to
# ask about: the gate takes the failed node out and the preemption question ("preempt") is the only one.


@pytest.fixture
def sim(sim_factory):
    return sim_factory(nodes=16, spares=0, sessions=2)


def adopt(runtime) -> None:
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")


def preemptions(runtime, incident_id=None, outcome="succeeded"):
    return [a for a in runtime.ledger().actions(kind="preempt_workload", incident_id=incident_id)
            if a.outcome.value == outcome]


def replace(**kw):
    from flows.replace_node import replace_node

    return run_to_state_result(replace_node, node=FAILED, cause="XID 79", xid=79, gpu=0, **kw)


def test_approved_preemption_evicts_one_session_and_the_job_is_back_at_full_size(prefect_server, sim, remedy_env):
    from remedy.approvals.auto import AutoApprover
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim)
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    with AutoApprover(decision=True, by="demo-operator") as auto:
        out = replace()
    assert out["status"] == "preempted", out
    assert [a["decision"] for a in auto.answered] == ["approve"]  # one question: the preemption
    freed = out["replacement"]
    victim = next(p for p, n in SESSIONS.items() if n == freed)
    assert out["preemption"]["victims"][0]["name"] == f"sessions/{victim}"
    assert out["preemption"]["result"]["preempted"] == [f"sessions/{victim}"]
    assert sim.cluster.sessions() == {p: n for p, n in SESSIONS.items() if p != victim}  # the other one runs on
    cluster = runtime.cluster()
    assert cluster.workload_size("training", "llm-pretrain") == (14, 14)
    assert cluster.workload_running_on("training", "llm-pretrain", freed)
    assert cluster.get_node(freed).labels["remedy.io/pool"] == "active"
    assert [e["reason"] for e in cluster.node_events(freed)].count("RemedyPreempt") == 1
    steps = [row["step"] for row in out["timeline"]]
    assert steps[:6] == ["detected", "cordoned", "drained", "preempted", "job resumed", "to repair"]
    led = runtime.ledger()
    assert len(preemptions(runtime, out["incident_id"])) == 1
    assert led.get_incident(out["incident_id"]).status.value == "resolved"
    assert led.get_node(FAILED).state.value == "repair"
    (approval,) = [a for a in led.approvals() if a.kind == "preempt"]
    assert (approval.decision, approval.decided_by) == ("approve", "demo-operator")

    # a late duplicate of the resolved incident stands down: no second preemption, no second question
    with AutoApprover(decision=True, by="demo-operator"):
        again = replace(incident_id=out["incident_id"])
    assert again["status"] == "duplicate" and "already resolved" in again["why"], again
    assert len(preemptions(runtime)) == 1 and len(led.actions(kind="preempt_workload")) == 1
    assert len([a for a in led.approvals() if a.kind == "preempt"]) == 1
    assert sim.cluster.sessions() == {p: n for p, n in SESSIONS.items() if p != victim}


def test_denied_preemption_keeps_the_sessions_and_escalates(prefect_server, sim, remedy_env):
    from prefect.flow_runs import resume_flow_run

    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim, APPROVALS__TIMEOUT_SECONDS=120)
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    run = FlowThread(replace)
    pending = wait_paused_approval(runtime.ledger(), kind="preempt")
    # while the question is open the job is one node short: its new pod cannot fit beside a session
    pods = sim.cluster.store.objects("Pod", "training")
    (waiting,) = [p for p in pods if not p["spec"].get("nodeName")]
    message = waiting["status"]["conditions"][0]["message"]
    # 13 nodes run the job's other pods, 2 run sessions; the failed node left the pool (quarantined)
    assert message.startswith("0/16 nodes are available: 15 Insufficient nvidia.com/gpu, 1 node(s) didn't match")
    assert waiting["status"]["phase"] == "Pending"
    resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "deny", "reason": "demo day", "approver": "bob"})
    out = run.result(120)
    assert out["status"] == "no-spare", out
    assert "preemption not approved (deny by bob)" in out["why"]
    assert out["preemption"]["approval"]["decision"] == "deny"
    assert sim.cluster.sessions() == SESSIONS
    assert not runtime.ledger().actions(kind="preempt_workload")
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (13, 14)


def test_no_answer_is_a_deny(prefect_server, sim, remedy_env):
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim, APPROVALS__TIMEOUT_SECONDS=6)
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    out = replace()
    assert out["status"] == "no-spare" and out["preemption"]["approval"]["decision"] == "timeout", out
    assert sim.cluster.sessions() == SESSIONS
    assert not runtime.ledger().actions(kind="preempt_workload")
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"


def test_nothing_below_the_threshold_escalates_with_the_reason(prefect_server, sim, remedy_env):
    from remedy.approvals.auto import AutoApprover
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim, SPARES__PREEMPT_BELOW_PRIORITY=10)  # sessions are priority 10
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    with AutoApprover(decision=False, by="demo-operator"):
        out = replace()
    assert out["status"] == "no-spare", out
    assert out["preemption"]["plan"] is False
    assert "priority 10 is not below the preemption threshold 10" in out["why"]
    assert "cannot free nodes for training/llm-pretrain" in out["why"]
    assert runtime.ledger().approvals() == []  # nothing to ask about
    assert sim.cluster.sessions() == SESSIONS
    assert runtime.ledger().get_incident(out["incident_id"]).status.value == "escalated"


def test_dry_run_plans_and_records_but_changes_nothing(prefect_server, sim, remedy_env):
    runtime = remedy_env(sim=sim)
    adopt(runtime)
    before = {n.name: (n.unschedulable, sorted(n.taints), n.labels.get("remedy.io/pool"))
              for n in runtime.cluster().list_gpu_nodes()}
    out = replace(dry_run=True)
    assert out["status"] == "planned", out
    assert out["preemption"]["plan"] and out["preemption"]["approval"]["decision"] == "planned"
    assert out["preemption"]["victims"][0]["name"] in {f"sessions/{p}" for p in SESSIONS}
    assert sim.cluster.sessions() == SESSIONS
    after = {n.name: (n.unschedulable, sorted(n.taints), n.labels.get("remedy.io/pool"))
             for n in runtime.cluster().list_gpu_nodes()}
    assert after == before
    assert all(runtime.cluster().node_events(n) == [] for n in (FAILED, *SESSIONS.values()))
    actions = runtime.ledger().actions(incident_id=out["incident_id"])
    assert actions and all(a.dry_run for a in actions)
    assert {"plan_preemption", "preempt_workload"} <= {a.kind for a in actions}
    assert preemptions(runtime, outcome="planned") and not preemptions(runtime)
    assert not runtime.ledger().approvals()
    assert runtime.cluster().workload_size("training", "llm-pretrain") == (14, 14)


def test_approval_not_required_preempts_without_asking(prefect_server, sim, remedy_env):
    from remedy.approvals.auto import AutoApprover
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim, SPARES__PREEMPTION_REQUIRES_APPROVAL="false")
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    with AutoApprover(decision=False, by="demo-operator"):
        out = replace()
    assert out["status"] == "preempted", out
    assert out["preemption"]["approval"]["decision"] == "not-required"
    assert runtime.ledger().approvals() == [] and len(sim.cluster.sessions()) == 1


def test_preemption_off_keeps_the_old_no_spare_path(prefect_server, sim, remedy_env):
    from remedy.approvals.auto import AutoApprover
    from remedy.sim.faults import inject

    runtime = remedy_env(sim=sim, SPARES__PREEMPT_WHEN_NO_SPARE="false")
    adopt(runtime)
    inject(sim.cluster, "xid", FAILED, gpu=0, code=79)
    with AutoApprover(decision=False, by="demo-operator"):
        out = replace()
    assert out["status"] == "no-spare" and "preemption" not in out
    assert not runtime.ledger().actions(kind="plan_preemption") and sim.cluster.sessions() == SESSIONS
