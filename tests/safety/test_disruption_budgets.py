"""remedy.safety.disruption: which budgets can never allow an eviction, from the status the disruption controller
keeps (pkg/controller/disruption/disruption.go) — no cluster needed."""

from __future__ import annotations

from remedy.safety.disruption import Blocker, BudgetView, PodBudgets, blocks_eviction, drain_blockers, hold_sentence


def pdb(name="train", *, spec=None, status=None, generation=1) -> dict:
    return {"metadata": {"namespace": "training", "name": name, "generation": generation},
            "spec": {"selector": {"matchLabels": {"job-name": "llm"}}, **(spec or {})}, "status": status or {}}


SYNCED = {"observedGeneration": 1, "expectedPods": 14, "currentHealthy": 14, "desiredHealthy": 13,
          "disruptionsAllowed": 1}
SYNC_FAILED = {"disruptionsAllowed": 0, "conditions": [{"type": "DisruptionAllowed", "status": "False",
                                                        "reason": "SyncFailed", "message": "jobs.batch does not "
                                                        "implement the scale subresource"}]}


def pod(*budgets: dict, ready=True) -> PodBudgets:
    return PodBudgets("training/llm-0", "Job training/llm", ready, tuple(BudgetView.from_api(b) for b in budgets))


def test_budget_view_reads_the_forms_and_the_condition():
    v = BudgetView.from_api(pdb(spec={"maxUnavailable": 1}, status=SYNC_FAILED))
    assert (v.form, v.needs_scale, v.sync_failed) == ("maxUnavailable 1", True,
                                                      "jobs.batch does not implement the scale subresource")
    assert BudgetView.from_api(pdb(spec={"minAvailable": "50%"})).needs_scale
    assert BudgetView.from_api(pdb(spec={"minAvailable": 3})).form == "minAvailable 3"
    assert BudgetView.from_api(pdb()).form == "minAvailable 1 (default)"


def test_no_budget_or_one_that_allows_is_no_blocker():
    assert blocks_eviction(pod()) is None
    assert blocks_eviction(pod(pdb(spec={"minAvailable": 13}, status=SYNCED))) is None
    # at its limit now but not for ever (another pod may come back): the drain's back-off waits for it
    short = SYNCED | {"currentHealthy": 12, "disruptionsAllowed": 0}
    assert blocks_eviction(pod(pdb(spec={"minAvailable": 12}, status=short | {"desiredHealthy": 12}))) is None


def test_each_budget_that_never_allows_names_why():
    failed = blocks_eviction(pod(pdb(spec={"maxUnavailable": 1}, status=SYNC_FAILED)))
    assert failed and failed.blocker is Blocker.SYNC_FAILED and not failed.transient
    assert "(maxUnavailable 1) over Job training/llm can never allow an eviction" in failed.why
    unseen = blocks_eviction(pod(pdb(spec={"minAvailable": 1}, status=SYNCED, generation=2)))
    assert unseen and unseen.blocker is Blocker.NOT_OBSERVED and unseen.transient
    none = blocks_eviction(pod(pdb(status=SYNCED | {"expectedPods": 0, "desiredHealthy": 0})))
    assert none and none.blocker is Blocker.EXPECTS_NONE
    gang = blocks_eviction(pod(pdb(spec={"minAvailable": 14}, status=SYNCED | {"desiredHealthy": 14,
                                                                               "disruptionsAllowed": 0})))
    assert gang and gang.blocker is Blocker.WHOLE_GANG and "needs all 14 pods healthy" in gang.why
    two = blocks_eviction(pod(pdb("a", status=SYNCED), pdb("b", status=SYNCED)))
    assert two and two.blocker is Blocker.TWO_BUDGETS and "more than one PodDisruptionBudget (a, b)" in two.why


def test_an_unready_pod_under_an_always_allow_budget_can_go():
    full = SYNCED | {"desiredHealthy": 14, "currentHealthy": 13, "disruptionsAllowed": 0}
    always = pdb(spec={"minAvailable": 14, "unhealthyPodEvictionPolicy": "AlwaysAllow"}, status=full)
    assert blocks_eviction(pod(always, ready=False)) is None
    assert blocks_eviction(pod(always, ready=True)) is not None


def test_one_sentence_for_the_operator():
    blocks = drain_blockers([pod(pdb(spec={"maxUnavailable": 1}, status=SYNC_FAILED))] * 2)
    text = hold_sentence("gpu010", blocks)
    assert text.startswith("gpu010 is cordoned but not drained and no spare was promoted (2 pods blocked): ")
    assert text.endswith("; use an integer minAvailable or remove it.") and "\n" not in text
