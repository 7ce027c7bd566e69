"""The retire-node flow's decisions without Prefect, a ledger or a cluster."""

from __future__ import annotations

import pytest

from remedy.domain.model import NodeState
from remedy.lemon.retirement import (
    RetireStatus,
    already_retired,
    approval_for_rma,
    approval_summary,
    approved,
    budget_spent,
    budget_used_while_waiting,
    check_request,
    clear_after_deny,
    declined,
    final_status,
    needs_swap,
    no_spare_why,
    report_lines,
    slug,
    spare_failed_why,
    swap_fields,
)


@pytest.mark.parametrize("node, reason, words", [
    ("", "xid 79 three times", "node must be a node name"), (None, "r", "node must be a node name"),
    ("gpu-01", "  ", "say why gpu-01 is retired"), ("gpu-01", None, "reason is empty"),
])
def test_bad_request_refused(node, reason, words):
    with pytest.raises(ValueError, match=words):
        check_request(node, reason)


def test_retired_node_stays_retired_and_others_go_on():
    stop = already_retired("gpu-01", NodeState.RETIRED)
    assert stop is not None and stop.fields() == {"status": "already-retired", "why": "gpu-01 is already retired"}
    assert already_retired("gpu-01", NodeState.ACTIVE) is None and already_retired("gpu-01", None) is None


def test_budget_gate_defers_when_nothing_is_left():
    stop = budget_spent(0, "retirement budget: 0 of 2 left this window")
    assert stop is not None and stop.status is RetireStatus.DEFERRED
    assert stop.why == "retirement budget: 0 of 2 left this window: nothing left, deferred"
    assert budget_spent(1, "1 of 2 left") is None
    assert budget_used_while_waiting(0).fields()["status"] == "deferred"
    assert budget_used_while_waiting(2) is None


@pytest.mark.parametrize("decision, goes_on", [("approve", True), ("planned", True), ("deny", False),
                                               ("timeout", False), ("withdrawn", False)])
def test_only_a_yes_or_a_plan_goes_on(decision, goes_on):
    assert approved(decision) is goes_on


def test_deny_clears_the_lemon_mark_but_silence_does_not():
    clear = clear_after_deny({"decision": "deny", "by": "alice", "reason": "it was the cable"})
    assert clear is not None and clear.by == "operator:alice" and clear.why == "retirement declined: it was the cable"
    anonymous = clear_after_deny({"decision": "deny", "by": "", "reason": ""})
    assert anonymous.by == "operator:unknown" and anonymous.why == "retirement declined: no reason given"
    assert clear_after_deny({"decision": "timeout", "by": ""}) is None
    assert declined({"decision": "deny", "by": "alice"}).fields() == {"status": "not-retired",
                                                                      "why": "approval deny by alice"}
    assert declined({"decision": "timeout", "by": ""}).why == "approval timeout"


def test_only_a_node_in_the_job_is_swapped():
    assert needs_swap(NodeState.ACTIVE)
    assert not needs_swap(NodeState.SPARE) and not needs_swap(NodeState.QUARANTINED) and not needs_swap(None)
    swap = {"incident_id": 4, "replacement": "gpu-09", "why_not": "x", "joined": True, "other": 1}
    assert swap_fields(swap) == {"incident_id": 4, "replacement": "gpu-09", "joined": True}


def test_why_no_swap_is_said_in_one_operator_line():
    why = no_spare_why("no spare: pool empty (0 of 2 ready)\nmore detail")
    assert why.startswith("no spare is ready to take its place in the job (pool empty (0 of 2 ready)): ")
    assert "next lemon review asks again" in why and "\n" not in why
    assert spare_failed_why("gpu-09", "dcgm r2 failed").startswith(
        "gpu-09, the spare chosen to take its place, failed validation (dcgm r2 failed)")


def test_final_status_and_rma_approval():
    assert final_status(True) is RetireStatus.PLANNED and final_status(False) is RetireStatus.RETIRED
    yes = {"decision": "approve", "by": "alice"}
    assert approval_for_rma(yes) is yes and approval_for_rma({"decision": "planned"}) is None


def test_approval_summary_and_report():
    text = approval_summary("gpu-01", "xid 79 x3", "E" * 3000, "1 of 2 left")
    assert text.startswith("**gpu-01** is a lemon candidate: xid 79 x3") and "_1 of 2 left_" in text
    assert "E" * 2500 in text and "E" * 2501 not in text and text.endswith("Deny or no answer leaves it as it is.")
    assert "```" not in approval_summary("gpu-01", "r", "", "b")
    lines = report_lines({"node": "gpu-01", "status": "retired", "reason": "r", "budget": "1 of 2 left",
                          "approval": {"decision": "approve", "by": "alice"}, "replacement": "gpu-09",
                          "rma": {"url": "s3://rma/gpu-01.md"}}, "gpu-01 was retired.")
    assert lines[:3] == ["### gpu-01: retired", "", "gpu-01 was retired."]
    assert "- approval: approve by alice" in lines and "- its place in the job: gpu-09" in lines
    assert "- RMA report: s3://rma/gpu-01.md" in lines and not any(x.startswith("- why not") for x in lines)
    # one sanitiser (remedy.domain.names): a fitting name is kept, a changed one gets a digest so two cannot collide
    assert slug("gpu-01") == "gpu-01"
    assert slug("GPU_Node.01").startswith("gpu-node-01-") and slug("GPU_Node.01") != slug("gpu-node-01")
