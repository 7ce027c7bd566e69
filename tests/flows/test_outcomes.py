"""Runs tell the truth: a replaced node is a green run; held, escalated, no-spare and stopped-by-operator runs are
not, and say why in one line (issue 16, item 2). The operator's uncordon stops the run at every step (issue 17,
item 3)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import run_to_state
from tests.flows.test_replace_node import prevalidate_spares, promotions

pytestmark = pytest.mark.prefect


def test_no_spare_is_a_failed_run_that_says_why(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node

    no_spare, out = run_to_state(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=0)
    assert no_spare.is_failed() and no_spare.name == "No spare"
    assert no_spare.message.startswith("gpu011: no spare — ") and out["status"] == "no-spare"
    # it names why: the simulator's spares were never validated (the gate's reserve did not count them either)
    assert "none of the 2 ready spare(s) is validated" in no_spare.message, no_spare.message
    # the on-call engineer with only kubectl sees why the node sits cordoned
    notes = remedy_notes("gpu011")
    assert len(notes) == 1, [(n["reason"], n["message"]) for n in notes]
    (note,) = notes
    assert (note["reason"], note["type"], note["message"]) == ("RemedyNoSpare", "Warning", no_spare.message)


def test_a_held_run_says_what_was_decided_in_one_sentence(prefect_server, remedy_on_sim, monkeypatch):
    """Two XIDs minutes apart trip the cluster breaker; nobody answers the question in time (the safe default):
    the held run's message is one sentence that says what was done, why, and what came of the question."""
    from flows.replace_node import replace_node
    from remedy import runtime

    monkeypatch.setenv("REMEDY_APPROVALS__TIMEOUT_SECONDS", "1")
    runtime.reset()
    run_to_state(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=0)
    held, out = run_to_state(replace_node, node="gpu005", cause="XID 79", xid=79, gpu=1)
    assert held.is_failed() and held.name == "Held" and out["hold"]["skip"] == "breaker-tripped"
    assert held.message == ("gpu005 was held and left as it is: this failure tripped the cluster breaker, and nobody "
                            "answered within 1 s."), held.message
    assert (remedy_notes("gpu005")[0]["message"]) == held.message  # kubectl describe node says the same


def remedy_notes(node: str) -> list[dict]:
    """The Warning Events gpu-remedy left on the Node about a run that stopped short (not its action events)."""
    from remedy import runtime
    from remedy.domain.outcome import Outcome, RunLook, note_reason

    reasons = {note_reason(o) for o in Outcome if o.look is not RunLook.DONE}
    return [e for e in runtime.cluster().node_events(node) if e["reason"] in reasons]


def test_a_replacement_is_a_completed_run(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node

    prevalidate_spares()
    done, out = run_to_state(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert done.is_completed() and out["status"] == "replaced"
    assert done.message.startswith(f"gpu003: replaced by {out['replacement']}")
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:  # an operator filters runs by node and rack in the UI
        tags = client.read_flow_run(done.state_details.flow_run_id).tags
    assert {"node:gpu003", "stage:replace", "xid:79"} <= set(tags) and any(t.startswith("rack:") for t in tags)
    assert "dry-run" not in tags


def test_an_escalation_says_nobody_was_notified(prefect_server, remedy_on_sim):
    from flows.escalate import escalate

    state, out = run_to_state(escalate, node="gpu012", reason="XID 58 (contact support)", quarantine=False)
    assert state.is_failed() and state.name == "Escalated"
    assert "Slack: not configured, nobody was notified" in state.message and "node left in service" in state.message
    assert out["quarantined"] is False
    assert [n["reason"] for n in remedy_notes("gpu012")] == ["RemedyEscalated"]


@pytest.mark.parametrize(("after_kind", "when"), [
    ("cordon_node", "before the drain"),
    ("drain_node", "after the drain"),
    ("claim_spare", "before promoting the spare"),
    ("set_state_active", "before sending the node to repair"),
])
def test_the_operators_uncordon_stops_the_run_at_every_step(prefect_server, remedy_on_sim, monkeypatch, after_kind,
                                                           when):
    """The operator uncordons the failed node as soon as the flow has done `after_kind`: the run stands down at the
    next check, is not green, never re-cordons, and spends no spare it had not already handed to the job.

    The uncordon is made the moment the ledger records `after_kind` as done (a hook on the ledger, in the flow's
    own thread), not by a thread polling for it: a poller can lag past the next check on a loaded machine."""
    from kubernetes import client as k8s

    from flows.replace_node import replace_node
    from remedy import runtime
    from remedy.domain.model import ActionOutcome

    prevalidate_spares()
    api = k8s.CoreV1Api(runtime.cluster().api)
    led = runtime.ledger()
    done = []

    def operator(rec) -> None:
        if rec.kind == after_kind and rec.outcome is ActionOutcome.SUCCEEDED and not done:
            done.append(rec.id)
            api.patch_node("gpu009", {"spec": {"unschedulable": False}},
                           _content_type="application/strategic-merge-patch+json")

    start, finish = led.start_action, led.finish_action

    def start_action(*args, **kwargs):
        rec, created = start(*args, **kwargs)
        operator(rec)
        return rec, created

    def finish_action(*args, **kwargs):
        rec = finish(*args, **kwargs)
        operator(rec)
        return rec

    monkeypatch.setattr(led, "start_action", start_action)
    monkeypatch.setattr(led, "finish_action", finish_action)
    state, out = run_to_state(replace_node, node="gpu009", cause="XID 79", xid=79, gpu=0)
    assert done, f"the flow never recorded {after_kind} as done"
    assert state.is_cancelled() and state.name == "Stopped by operator", (state, out)
    assert [n["reason"] for n in remedy_notes("gpu009")] == ["RemedyStoppedByOperator"]
    assert when in out["why"] and out["drift"]["what"] == "uncordoned by hand", out["why"]
    assert not runtime.cluster().get_node("gpu009").unschedulable  # never re-cordoned
    assert runtime.ledger().get_node("gpu009").state.value != "repair"
    promoted = promotions(out["incident_id"])
    if after_kind == "set_state_active":
        assert len(promoted) == 1  # the job already runs on the spare; nothing is undone
    else:
        assert not promoted  # the claim lapsed with the incident: the spare is still a spare


def test_a_pod_under_two_budgets_escalates_with_their_names(prefect_server, remedy_on_sim):
    """The real API answers 500 "more than one PodDisruptionBudget" for such a pod on every attempt: the run
    escalates at once, naming the budgets, instead of retrying or spending a spare on a job that cannot move."""
    from kubernetes import client as k8s

    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    policy = k8s.PolicyV1Api(runtime.cluster().api)
    for name, labels in (("train-a", {"app": "llm-pretrain"}), ("train-b", {"job-name": "llm-pretrain"})):
        policy.create_namespaced_pod_disruption_budget("training", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"maxUnavailable": 5, "selector": {"matchLabels": labels}}})
    state, out = run_to_state(replace_node, node="gpu010", cause="XID 79", xid=79, gpu=0)
    assert state.is_failed() and state.name == "Escalated", (state, out)
    assert "more than one PodDisruptionBudget (train-a, train-b)" in state.message
    assert out["replacement"] is None and not promotions(out["incident_id"])
