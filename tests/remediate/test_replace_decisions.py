"""The replace-node runbook's decisions (remedy.remediate.replace), without Prefect, a cluster or a ledger."""

from __future__ import annotations

from remedy.domain.model import IncidentStatus
from remedy.domain.outcome import Outcome
from remedy.remediate import replace as decide
from remedy.remediate.replace import Next
from remedy.remediate.results import RemediationClaim
from remedy.safety.disruption import Blocker, BudgetBlock
from remedy.safety.procedure import Answer, GatePass, Hold


def test_only_the_run_that_claimed_the_incident_acts():
    assert decide.duplicate_why(7, RemediationClaim(True, "run-1")) is None
    settled = RemediationClaim(False, "run-1", settled=IncidentStatus.RESOLVED)
    assert decide.duplicate_why(7, settled) == "incident 7 is already resolved"
    assert decide.duplicate_why(7, RemediationClaim(False, "run-2")) == "run run-2 is handling it"


def test_a_warned_node_is_swapped_only_with_a_checked_spare():
    from remedy.health.results import Validation
    from remedy.spares.results import SpareChoice

    stale = SpareChoice("gpu013", True, "gpu013: validated 3 d ago")
    choice, why = decide.warned_spare(stale, Validation("gpu013", "quick", True, "all checks passed"))
    assert choice.spare == "gpu013" and not choice.needs_validation and why == ""
    failed, why = decide.warned_spare(stale, Validation("gpu013", "quick", False, "xid"))
    assert why == "gpu013 failed validation: xid" and failed.spare is None
    _, why = decide.warned_spare(SpareChoice(None, False, "no spare: none of 2 is validated\nmore"), None)
    assert why == "no spare was ready at the checkpoint boundary — none of 2 is validated"


def test_the_gate_answer_goes_on_stops_or_watches():
    go = GatePass(None, "act on gpu003")
    assert decide.after_gate(go, early_warning=False).go
    held = GatePass(Outcome.HELD, "held: rack tripped", (Answer("deny", "alice"),),
                    Hold("breaker-tripped", "rack:rack-1"))
    stop = decide.after_gate(held, early_warning=False)
    assert (stop.next, stop.outcome, stop.escalate) == (Next.STOP, Outcome.HELD, True)
    watch = decide.after_gate(held, early_warning=True)  # a node that still works is not worth a page
    assert watch.next is Next.WATCH and "one more node out would trip the rack rack-1 breaker" in watch.why
    dup = decide.after_gate(GatePass(Outcome.DUPLICATE, "already in remediation"), early_warning=False)
    assert (dup.next, dup.outcome, dup.escalate) == (Next.STOP, Outcome.DUPLICATE, False)


def test_the_recheck_acts_clears_or_blames_the_monitor():
    from remedy.detect.reconfirm import Recheck, Reconfirmation

    assert decide.after_recheck(None).go and decide.after_recheck(Reconfirmation(Recheck.CONFIRMED, "still")).go
    cleared = decide.after_recheck(Reconfirmation(Recheck.CLEARED, "alert resolved"))
    assert (cleared.outcome, cleared.why) == (Outcome.CLEARED, "alert resolved")
    assert decide.after_recheck(Reconfirmation(Recheck.MONITOR, "dcgm down")).outcome is Outcome.MONITOR_FAILURE
    assert Reconfirmation(Recheck.CLEARED, "gone").to_dict() == {"verdict": "cleared", "act": False, "why": "gone",
                                                                 "evidence": {}}


def test_a_budget_that_never_allows_stops_before_the_drain():
    assert decide.before_drain("gpu003", []).go
    block = BudgetBlock("training/p-0", "Job training/llm", ("training/pdb",), Blocker.SYNC_FAILED,
                        "PodDisruptionBudget training/pdb (maxUnavailable 1) over Job training/llm can never allow "
                        "an eviction")
    v = decide.before_drain("gpu003", [block])
    assert (v.next, v.outcome, v.escalate, v.failed_remediation) == (Next.STOP, Outcome.ESCALATED, True, True)
    assert v.why.startswith("gpu003 is cordoned but not drained and no spare was promoted: PodDisruptionBudget")


def test_pods_left_on_the_node_after_the_drain_stop_the_run():
    from remedy.remediate.results import Drained

    assert decide.after_drain("gpu003", Drained("gpu003", evicted=("a/b",))).go
    refused = decide.after_drain("gpu003", Drained("gpu003", refused={"training/p-0": "two budgets"},
                                                   not_evicted={"x": "y"}))
    assert refused.outcome is Outcome.ESCALATED and "the API refused to evict training/p-0: two budgets" == refused.why
    left = decide.after_drain("gpu003", Drained("gpu003", not_evicted={"training/p-0": "429", "training/p-1": "429"}))
    assert left.outcome is Outcome.ESCALATED and "training/p-0 (and 1 more) is still there (429)" in left.why
    assert decide.after_drain("gpu003", Drained("gpu003", not_evicted={"a/b": "planned"}, dry_run=True)).go
    # a replayed drain reads back from its ledger record as the first run returned it
    again = Drained.from_record({"node": "gpu003", "evicted": ["a/b"], "not_evicted": {"c/d": "429"},
                                 "complete": False, "replayed": True})
    assert (again.evicted, again.complete, again.replayed) == (("a/b",), False, True)
    assert again.summary("evicted", "not_evicted", "complete") == {"evicted": ["a/b"], "not_evicted": {"c/d": "429"},
                                                                   "complete": False}


def test_how_a_replacement_ends():
    from remedy.remediate.results import Joined, WorkloadBack

    yes, no = Joined("gpu013", True, "Ready"), Joined("gpu013", False, "NotReady")
    on, off = WorkloadBack(4, 4, on_node=True), WorkloadBack(3, 4, on_node=False)
    ok = decide.replacement_ending("gpu013", yes, on, False)
    assert (ok.status, ok.succeeded, ok.incident_status, ok.detail) == \
        ("replaced", True, IncidentStatus.RESOLVED, "replaced by gpu013")
    bad = decide.replacement_ending("gpu013", no, off, False)
    assert (bad.status, bad.incident_status, bad.detail) == \
        ("replaced-not-joined", IncidentStatus.ESCALATED, "replaced by gpu013: NotReady")
    assert decide.replacement_ending("gpu013", yes, on, True).status == "planned"
    pre = decide.replacement_ending("gpu020", yes, on, False, preempted="team/eval")
    assert (pre.status, pre.detail) == ("preempted", "no spare; preempted team/eval, gpu020 took its place")


def test_preemption_and_shrinking():
    assert all(decide.preemption_goes({"decision": d}) for d in ("approve", "planned", "not-required"))
    assert not decide.preemption_goes({"decision": "deny"})
    assert decide.preemption_refused({"decision": "deny", "by": "bob"}, "plan\nmore") == \
        "preemption not approved (deny by bob): plan"
    assert decide.shrink_to(8, 6, "shrink") == 7
    assert decide.shrink_to(6, 6, "shrink") is None  # already at its minimum
    assert decide.shrink_to(8, 6, "escalate") is None and decide.shrink_to(8, None, "shrink") is None
