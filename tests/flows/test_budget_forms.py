"""Every PodDisruptionBudget form over the training Job, through replace-node on the simulator (issue 31, item 2).

A `maxUnavailable` or percentage budget over a bare Job never syncs (the Job has no scale subresource: SyncFailed,
pkg/controller/disruption/disruption.go), an integer `minAvailable` as large as the gang never allows, two budgets
over one pod are refused by the API: each is found before the drain, the run escalates with one sentence (also a
Warning Event on the Node), the job stays where it is and no spare is promoted. A budget that allows an eviction
is drained through and the node is replaced."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import run_to_state
from tests.flows.test_outcomes import remedy_notes
from tests.flows.test_replace_node import prevalidate_spares, promotions

pytestmark = pytest.mark.prefect

NODE = "gpu010"


def _budgets(specs: list[tuple[str, dict, dict]]) -> None:
    from kubernetes import client as k8s

    from remedy import runtime

    policy = k8s.PolicyV1Api(runtime.cluster().api)
    for name, labels, spec in specs:
        policy.create_namespaced_pod_disruption_budget("training", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, **spec}})


def _job_pods_on(sim, node: str) -> list[str]:
    with sim.cluster.lock:
        return sorted(p["metadata"]["name"] for p in sim.cluster.pods_on(node)
                      if p["metadata"]["namespace"] == "training" and not p["metadata"].get("deletionTimestamp"))


def _gang() -> int:
    from remedy import runtime

    return runtime.cluster().read_job("training", "llm-pretrain")["spec"]["parallelism"]


JOB = {"job-name": "llm-pretrain"}
APP = {"app": "llm-pretrain"}


@pytest.mark.parametrize(("form", "specs", "words"), [
    ("maxUnavailable", [("train", JOB, {"maxUnavailable": 1})],
     "PodDisruptionBudget training/train (maxUnavailable 1) over Job training/llm-pretrain can never allow an "
     "eviction (SyncFailed: jobs.batch does not implement the scale subresource)"),
    ("percentage", [("train", JOB, {"minAvailable": "50%"})],
     "PodDisruptionBudget training/train (minAvailable 50%) over Job training/llm-pretrain can never allow"),
    ("whole gang", [("train", JOB, {"minAvailable": "GANG"})], "pods healthy, so it never allows an eviction"),
    ("two budgets", [("train-a", APP, {"minAvailable": 1}), ("train-b", JOB, {"maxUnavailable": "10%"})],
     "is covered by more than one PodDisruptionBudget (train-a, train-b)"),
])
def test_a_budget_that_cannot_allow_an_eviction_holds_before_the_drain(prefect_server, remedy_on_sim, form, specs,
                                                                       words):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    gang = _gang()
    _budgets([(n, labels, {k: gang if v == "GANG" else v for k, v in spec.items()}) for n, labels, spec in specs])
    before = _job_pods_on(remedy_on_sim, NODE)
    assert before, "the training job runs on the node"
    state, out = run_to_state(replace_node, node=NODE, cause="XID 79", xid=79, gpu=0)
    assert state.is_failed() and state.name == "Escalated", (state, out)
    assert words in state.message, state.message
    assert state.message.startswith(f"{NODE}: escalated — {NODE} is cordoned but not drained and no spare was "
                                    "promoted"), state.message
    # found before the drain: nothing was evicted, the job is still on the node, no spare joined, not in repair
    led = runtime.ledger()
    assert not led.actions(kind="drain_node", incident_id=out["incident_id"])
    assert _job_pods_on(remedy_on_sim, NODE) == before
    assert out["replacement"] is None and not promotions(out["incident_id"])
    assert led.get_node(NODE).state.value == "quarantined" and runtime.cluster().get_node(NODE).unschedulable
    assert led.get_incident(out["incident_id"]).status.value == "escalated"
    # the on-call engineer with only kubectl reads the same sentence
    assert [(n["reason"], n["message"]) for n in remedy_notes(NODE)] == [("RemedyEscalated", state.message)]


@pytest.mark.parametrize("specs", [
    [("train", JOB, {"minAvailable": 1})],
    [("train", JOB, {"minAvailable": 1}), ("sessions", {"app": "notebook"}, {"maxUnavailable": 1})],
], ids=["one integer budget", "two budgets over different pods"])
def test_a_budget_that_allows_the_eviction_is_drained_through(prefect_server, remedy_on_sim, specs):
    from flows.replace_node import replace_node

    prevalidate_spares()
    _budgets(specs)
    state, out = run_to_state(replace_node, node=NODE, cause="XID 79", xid=79, gpu=0)
    assert state.is_completed() and out["status"] == "replaced", (state, out)
    assert not _job_pods_on(remedy_on_sim, NODE) and len(promotions(out["incident_id"])) == 1
