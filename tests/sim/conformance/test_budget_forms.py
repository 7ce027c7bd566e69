"""Conformance: what the adapter reads of a node's PodDisruptionBudgets before a drain (`pod_budgets`), for every
budget form over the training Job, on the simulator and the real control plane alike.

pkg/controller/disruption/disruption.go (v1.36.2): `getExpectedPodCount` computes an integer minAvailable from the
pods themselves, but maxUnavailable and a percentage need the pods' controller's scale (`getExpectedScale` →
`getScaleController`); a batch/v1 Job has no scale subresource, so `failSafe` writes disruptionsAllowed 0 with
condition DisruptionAllowed=False reason SyncFailed and leaves observedGeneration behind — for good. The budgets
are judged by remedy.safety.disruption; replace-node holds before the drain (tests/flows/test_budget_forms.py)."""

from __future__ import annotations

import json

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.safety.disruption import Blocker, drain_blockers
from tests.fixtures.sim import settings_for
from tests.sim.conformance.wire import raw, wait_for

NODE = "gpu007"
JOB = {"app": "llm-pretrain"}


def _budget(sim, name: str, **spec) -> None:
    code, _, body = raw(sim, "POST", "/apis/policy/v1/namespaces/training/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": JOB}, **spec}})
    assert code == 201, body


def _read(sim, name: str) -> dict:
    return json.loads(raw(sim, "GET", f"/apis/policy/v1/namespaces/training/poddisruptionbudgets/{name}")[2])


def _training(sim):
    with KubernetesCluster(settings_for(sim)) as cluster:
        return [p for p in cluster.pod_budgets(NODE) if p.pod.startswith("training/")]


@pytest.mark.parametrize("spec", [{"maxUnavailable": 1}, {"maxUnavailable": "10%"}, {"minAvailable": "50%"}],
                         ids=["maxUnavailable", "maxUnavailable %", "minAvailable %"])
def test_a_scale_form_over_a_job_reads_as_sync_failed(sim, spec):
    _budget(sim, "train", **spec)
    wait_for(lambda: ((_read(sim, "train").get("status") or {}).get("conditions") or [{}])[0].get("reason")
             == "SyncFailed")
    (pod,) = _training(sim)
    assert pod.owner == "Job training/llm-pretrain" and len(pod.budgets) == 1
    (budget,) = pod.budgets
    assert budget.sync_failed == "jobs.batch does not implement the scale subresource"
    assert budget.disruptions_allowed == 0 and budget.observed_generation < budget.generation
    (block,) = drain_blockers([pod])
    assert block.blocker is Blocker.SYNC_FAILED and not block.transient


def test_an_integer_budget_syncs_and_blocks_only_when_it_keeps_the_whole_gang(sim):
    _budget(sim, "one", minAvailable=1)
    wait_for(lambda: (_read(sim, "one").get("status") or {}).get("observedGeneration"))
    (pod,) = _training(sim)
    (budget,) = pod.budgets
    assert (budget.expected_pods, budget.desired_healthy, budget.sync_failed) == (14, 1, "")
    assert drain_blockers([pod]) == []
    raw(sim, "DELETE", "/apis/policy/v1/namespaces/training/poddisruptionbudgets/one")
    _budget(sim, "all", minAvailable=14)
    wait_for(lambda: (_read(sim, "all").get("status") or {}).get("observedGeneration"))
    (pod,) = wait_for(lambda: (got := _training(sim)) and got[0].budgets[0].name == "all" and got)
    (block,) = drain_blockers([pod])
    assert block.blocker is Blocker.WHOLE_GANG


def test_two_budgets_over_one_pod_are_both_read(sim):
    _budget(sim, "train-a", minAvailable=1)
    _budget(sim, "train-b", maxUnavailable=1)
    (pod,) = _training(sim)
    assert sorted(b.name for b in pod.budgets) == ["train-a", "train-b"]
    (block,) = drain_blockers([pod])
    assert block.blocker is Blocker.TWO_BUDGETS
