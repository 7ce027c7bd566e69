"""retire_node on the simulator, a real Prefect server, moto's S3 server and the Slack stub."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import boto3
import pytest

from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture

pytestmark = pytest.mark.prefect

NODE = "gpu003"
EVIDENCE = "gpu003: lemon candidate: 3 of 4 signals (recurrence, excess-rate, repeat-xid)\n  [x] repeat-xid: XID 79 on GPU 5 4 time(s)"


@pytest.fixture
def on_sim(sim, slack_stub, aws_endpoint, remedy_env):  # noqa: F811
    """Runtime on the 16-node simulator, Slack stub and moto S3; a few incidents and validations on NODE."""
    from remedy.domain.model import Incident, IncidentStatus

    runtime = remedy_env(sim=sim, slack=slack_stub, AWS__ENDPOINT_URL=aws_endpoint, APPROVALS__TIMEOUT_SECONDS=60)
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
        if n.state and n.state.value == "spare":  # as burn-in leaves them: ready to take a place in the job
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")
    now = datetime.now(UTC)
    for days in (20, 12, 5):
        t = now - timedelta(days=days)
        led.open_incident(Incident(node=NODE, signal="xid", gpu=5, xid=79, first_seen=t, last_seen=t,
                                   status=IncidentStatus.RESOLVED, detail="GPU has fallen off the bus."),
                          window_seconds=0)
        led.record_validation(NODE, level="standard", passed=True, summary={}, requested_by="test",
                              at=t + timedelta(hours=6))
    return runtime


def s3_objects(endpoint: str, prefix: str = "rma/") -> dict[str, str]:
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
    try:
        listed = s3.list_objects_v2(Bucket="gpu-remedy-archive", Prefix=prefix).get("Contents", [])
    except s3.exceptions.NoSuchBucket:
        return {}
    return {o["Key"]: s3.get_object(Bucket="gpu-remedy-archive", Key=o["Key"])["Body"].read().decode() for o in listed}


def test_approved_retirement_quarantines_for_good_and_archives_rma(prefect_server, on_sim, slack_stub, aws_endpoint):
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover

    runtime = on_sim
    with AutoApprover(decision=True, by="U0ALICE") as auto:
        out = retire_node(node=NODE, reason="lemon candidate: 3 of 4 signals", evidence=EVIDENCE)
    assert out["status"] == "retired", out
    assert auto.answered and auto.answered[0]["decision"] == "approve"
    node = runtime.cluster().get_node(NODE)
    assert node.taint_effect("remedy.io/retired") == "NoExecute"
    assert node.unschedulable
    assert node.labels["remedy.io/pool"] == "retired"
    assert runtime.ledger().get_node(NODE).state.value == "retired"
    pods = runtime.cluster().pods_on_node(NODE)
    assert pods and all(p["metadata"]["namespace"] == "kube-system" for p in pods)  # training pod drained off it
    # Slack carried the question (buttons) and the notice with the report's URL.
    posted = [c.body.get("text", "") for c in slack_stub.calls_to("chat.postMessage")]
    assert any("Retire gpu003" in t for t in posted)
    assert any("retired gpu003" in t and out["rma"]["url"] in t for t in posted)
    # The RMA report is in S3 with the node's history, incidents, validations and the evidence.
    reports = s3_objects(aws_endpoint)
    assert list(reports) == [out["rma"]["key"]] and out["rma"]["key"].startswith(f"rma/{NODE}/")
    text = reports[out["rma"]["key"]]
    assert text.startswith(f"# RMA report: {NODE}")
    assert "## Incidents (3)" in text and text.count("| xid | 79 | 5 |") == 3
    assert "## Validations (3)" in text
    assert "repeat-xid: XID 79 on GPU 5 4 time(s)" in text
    assert "active → retired: lemon: lemon candidate" in text  # the ledger history, including this retirement
    assert "Approved by **U0ALICE**" in text


def test_retired_node_never_returns_through_burn_in(prefect_server, on_sim):
    from flows.burn_in import burn_in
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover
    from remedy.domain.model import IllegalTransition, NodeState

    runtime = on_sim
    with AutoApprover(decision=True):
        assert retire_node(node=NODE, reason="lemon")["status"] == "retired"
    out = burn_in(nodes=[NODE], level="quick")
    assert NODE not in out["spares"]
    assert "only an operator may bring it back" in out["nodes"][NODE]["why"]
    assert runtime.ledger().get_node(NODE).state is NodeState.RETIRED
    assert runtime.cluster().get_node(NODE).has_taint("remedy.io/retired")
    led = runtime.ledger()
    with pytest.raises(IllegalTransition, match="only an operator"):
        led.transition(NODE, NodeState.BURN_IN, reason="automation", requested_by="flow")
    led.transition(NODE, NodeState.BURN_IN, reason="vendor replaced GPU 5", requested_by="operator:alice", by_operator=True)
    assert led.get_node(NODE).state is NodeState.BURN_IN


@pytest.mark.parametrize("answer", ["deny", "timeout"])
def test_deny_or_no_answer_retires_nothing(prefect_server, on_sim, aws_endpoint, monkeypatch, answer):
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover
    from remedy.spares.lemons import lemon_candidates, record_review

    runtime = on_sim
    # started by hand (not by the review) for a node an earlier review flagged
    record_review(runtime.ledger(), {NODE: {"decision": "retire (asks approval)"}},
                  reviewed_at=datetime.now(UTC), requested_by="lemon-review")
    before = runtime.cluster().get_node(NODE)
    if answer == "deny":
        with AutoApprover(decision=False):
            out = retire_node(node=NODE, reason="lemon")
    else:
        monkeypatch.setenv("REMEDY_APPROVALS__TIMEOUT_SECONDS", "2")
        runtime.reset()
        out = retire_node(node=NODE, reason="lemon")
    assert out["status"] == "not-retired" and out["approval"]["decision"] == answer
    after = runtime.cluster().get_node(NODE)
    assert (after.taints, after.unschedulable, after.labels["remedy.io/pool"]) == \
        (before.taints, before.unschedulable, before.labels["remedy.io/pool"])
    assert runtime.ledger().get_node(NODE).state.value == "active"
    assert s3_objects(aws_endpoint) == {}
    # a person's no clears the candidate (spare selection may use the node again); no answer decides nothing
    assert (NODE in lemon_candidates(runtime.ledger())) is (answer == "timeout")


def test_budget_is_never_exceeded(prefect_server, on_sim, monkeypatch):
    """Budget 1 per 7 days: the first approved retirement happens, the second is deferred without asking anyone."""
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover

    monkeypatch.setenv("REMEDY_LEMON__RETIREMENT_BUDGET", "1")
    runtime = on_sim
    runtime.reset()
    with AutoApprover(decision=True):
        first = retire_node(node=NODE, reason="lemon")
        second = retire_node(node="gpu004", reason="lemon too")
    assert first["status"] == "retired"
    assert second["status"] == "deferred" and "retirement budget: 1 per 7 d, 1 used" in second["why"]
    assert [a.kind for a in runtime.ledger().approvals()] == ["retire"]  # nobody was asked about gpu004
    assert runtime.ledger().get_node("gpu004").state.value == "active"
    assert not runtime.cluster().get_node("gpu004").has_taint("remedy.io/retired")
    again = retire_node(node=NODE, reason="lemon")
    assert again["status"] == "already-retired"


def test_bad_input_is_refused(prefect_server, on_sim):
    from flows.retire_node import retire_node
    from remedy.errors import NodeNotFound

    with pytest.raises(ValueError, match="reason is empty"):
        retire_node(node=NODE, reason=" ")
    with pytest.raises(NodeNotFound, match="gpu999"):
        retire_node(node="gpu999", reason="lemon")


def test_dry_run_changes_nothing_and_writes_no_report(prefect_server, on_sim, aws_endpoint):
    from flows.retire_node import retire_node

    runtime = on_sim
    out = retire_node(node=NODE, reason="lemon", dry_run=True)
    assert out["status"] == "planned" and not out["retired"]
    assert out["rma"]["key"].startswith(f"rma/{NODE}/")
    node = runtime.cluster().get_node(NODE)
    assert not node.has_taint("remedy.io/retired") and not node.unschedulable
    assert runtime.ledger().get_node(NODE).state.value == "active"
    assert s3_objects(aws_endpoint) == {}
    assert runtime.ledger().approvals() == []


def test_retired_spare_leaves_spare_rotation(prefect_server, on_sim):
    """A retired spare is never picked to replace a failed node, even though it was validated."""
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover
    from tasks.spares import select_spare

    runtime = on_sim
    led = runtime.ledger()
    spares = sorted(n.name for n in runtime.cluster().list_gpu_nodes() if n.labels["remedy.io/pool"] == "spare")
    assert len(spares) == 2
    for s in spares:
        led.record_validation(s, level="standard", passed=True, summary={}, requested_by="test")
    picked = select_spare.fn("gpu002").spare
    assert picked in spares
    with AutoApprover(decision=True):
        assert retire_node(node=picked, reason="lemon spare")["status"] == "retired"
    assert runtime.cluster().get_node(picked).labels["remedy.io/pool"] == "retired"
    other = select_spare.fn("gpu002")
    assert other.spare == next(s for s in spares if s != picked), other.why


def _job_nodes(runtime) -> set[str]:
    from remedy import runtime as rt

    work = rt.settings().workload
    return {n.name for n in runtime.cluster().list_gpu_nodes()
            if runtime.cluster().workload_running_on(work.namespace, work.job, n.name)}


def test_lemon_in_the_job_is_swapped_for_a_spare_before_it_is_drained(prefect_server, on_sim, aws_endpoint):
    """A gang job cannot run a node short: retiring a lemon that is in the job promotes a spare first (claimed under
    an incident of its own), and the job ends back at full size on it. The simulator's policy does the same
    (remedy.goodput.gpu_remedy_policy._retire_from_job)."""
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover
    from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL

    runtime = on_sim
    led = runtime.ledger()
    assert NODE in _job_nodes(runtime)
    with AutoApprover(decision=True):
        out = retire_node(node=NODE, reason="lemon candidate: 3 of 4 signals", evidence=EVIDENCE)
    assert out["status"] == "retired", out
    spare = out["replacement"]
    assert spare in ("gpu008", "gpu016")
    assert out["workload"]["full"] and out["workload"]["on_node"], out["workload"]
    jobs = _job_nodes(runtime)
    assert spare in jobs and NODE not in jobs
    assert runtime.cluster().get_node(spare).labels["remedy.io/pool"] == "active"
    assert led.get_node(spare).state.value == "active" and led.get_node(NODE).state.value == "retired"
    # the spare joined before the lemon was drained, both under the retirement's incident
    incident = led.get_incident(out["incident_id"])
    assert (incident.signal, incident.status.value) == (PLANNED_RETIREMENT_SIGNAL, "resolved")
    acts = {a.kind: a for a in led.actions(incident_id=incident.id)}
    assert acts["set_state_active"].node == spare and acts["drain_node"].node == NODE
    assert acts["set_state_active"].finished_at <= acts["drain_node"].started_at
    claims = [a for a in led.actions(incident_id=incident.id) if a.kind == "claim_spare"]
    assert [c.node for c in claims] == [spare]
    # a planned move is no fault: the RMA report lists the node's three failures, not the retirement
    text = s3_objects(aws_endpoint)[out["rma"]["key"]]
    assert "## Incidents (3)" in text and PLANNED_RETIREMENT_SIGNAL not in text
    from tests.flows.test_burn_in import read_artifacts

    assert f"its place in the job: {spare}" in read_artifacts(f"retire-{NODE.lower()}")[0].data


def test_no_spare_ready_leaves_the_lemon_working(prefect_server, on_sim, aws_endpoint):
    """With no spare to take its place, draining the lemon would stop the job: it keeps working, is not retired, and
    the deferral counts as no failure of the node when the next review scores it."""
    from flows.retire_node import retire_node
    from remedy.approvals.auto import AutoApprover
    from remedy.settings.lemon import LemonSettings
    from tasks.lemon import node_histories

    runtime = on_sim
    led = runtime.ledger()
    for s in ("gpu008", "gpu016"):  # both spares away (in repair)
        runtime.cluster().set_labels(s, {"remedy.io/pool": "repair"})
    before = runtime.cluster().get_node(NODE)
    with AutoApprover(decision=True):
        out = retire_node(node=NODE, reason="lemon")
    assert out["status"] == "deferred", out
    assert out["why"].startswith("no spare is ready to take its place in the job")
    assert "next lemon review asks again" in out["why"]
    after = runtime.cluster().get_node(NODE)
    assert (after.taints, after.unschedulable) == (before.taints, before.unschedulable)
    assert NODE in _job_nodes(runtime) and led.get_node(NODE).state.value == "active"
    assert s3_objects(aws_endpoint) == {}
    assert led.get_incident(out["incident_id"]).status.value == "ignored"
    history = next(h for h in node_histories(led, datetime.now(UTC), LemonSettings()) if h.node == NODE)
    assert len(history.incidents) == 3
