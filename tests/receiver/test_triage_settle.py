"""Triage's overrides live in the policy (issue 29, item 1): the flow gathers facts and carries out the one decision
`settle` returns. Plain Python, no Prefect: NotReady replace-now, replace-first by expected cost, an early warning's
swap at a checkpoint boundary, a gone run's background repair carried on, and what a path flow's result means."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import IncidentStatus
from remedy.domain.xid import RemediationPath as P
from remedy.receiver.triage_policy import (
    Choice,
    TriageAction,
    WarningVerdict,
    Weigh,
    already_handled,
    closing,
    decide,
    replace_now,
    settle,
    wants_not_ready_choice,
    what_to_weigh,
)
from remedy.remediate.runbook import own_incident_closing, repair_closing, repair_steps

NOW = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


def incident(signal="xid", xid=79, status="open", **kw) -> dict:
    return {"id": 7, "node": "gpu071", "signal": signal, "xid": xid, "gpu": 3, "status": status, "count": 1,
            "severity": "critical", "fingerprint": "f", "first_seen": NOW - timedelta(seconds=5), "detail": "", **kw}


def run(inc: dict, **kw):
    return decide(inc, recurrences=1, node_state=kw.pop("node_state", "active"), now=NOW, detected_at=None,
                  max_age_seconds=300.0, **kw)


def test_an_in_place_fix_is_weighed_against_a_spare_and_replaced_first_when_cheaper():
    base = run(incident(xid=79))
    assert base.action is TriageAction.REMEDIATE and base.path is P.REBOOT
    assert what_to_weigh(base, incident(xid=79), replace_first=True, early_warning=False) is Weigh.EXPECTED_COST
    assert what_to_weigh(base, incident(xid=79), replace_first=False, early_warning=False) is Weigh.NOTHING
    plan = settle(base, cost=Choice("replace", "a spare joins in 4 min"))
    assert plan.path is P.REPLACE and plan.recover_after and plan.entrypoint == "flows.replace_node:replace_node"
    assert "reboot off the critical path" in plan.plan and "a spare joins in 4 min" in plan.reason
    kept = settle(base, cost=Choice("reboot", "no spare"))
    assert kept == base and not kept.recover_after


def test_a_not_ready_node_watched_by_the_rules_is_replaced_when_a_spare_costs_less():
    inc = incident(signal="node-not-ready", xid=None, evidence={"value": 10.0, "unit": "s"})
    base = run(inc)
    assert base.action is TriageAction.RECORD and base.path is P.WATCH
    assert wants_not_ready_choice(inc, "active", replace_first=True)
    assert not wants_not_ready_choice(inc, "repair", replace_first=True)
    now = replace_now(base, Choice("replace", "waiting costs more"))
    assert now.action is TriageAction.REMEDIATE and now.path is P.REPLACE and not now.recover_after
    assert replace_now(base, Choice("restart", "it comes back")) == base
    assert replace_now(base, None) == base


def test_an_early_warning_swaps_only_at_a_checkpoint_boundary():
    inc = incident(signal="early-warning", xid=None)
    base = run(inc)
    assert base.action is TriageAction.RECORD and base.path is P.WATCH
    assert what_to_weigh(base, inc, replace_first=True, early_warning=True) is Weigh.WARNING
    watched = settle(base, warning=WarningVerdict(acts=False, why="no spare above the reserve"))
    assert watched.action is TriageAction.RECORD and "no spare above the reserve" in watched.reason
    missed = settle(base, warning=WarningVerdict(acts=True, why="pays", boundary_reached=False,
                                                 boundary_why="no checkpoint within 10 min"))
    assert missed.action is TriageAction.RECORD and "roll back the job's work" in missed.reason
    swap = settle(base, warning=WarningVerdict(acts=True, why="pays", boundary_reached=True,
                                               boundary_why="checkpoint at 01:02"))
    assert swap.path is P.REPLACE and swap.early_warning and swap.recover_after


def test_a_gone_runs_background_repair_is_carried_on_not_remediated_again():
    reannounced = run(incident(xid=79), node_state="repair", resumes=True, recovering=True)
    assert reannounced.action is TriageAction.RECOVER and reannounced.recover_after
    orphaned = run(incident(xid=79, status="acting"), node_state="repair", orphaned=True, recovering=True)
    assert orphaned.action is TriageAction.RECOVER
    # a marker alone (no gone run) is no reason: a settled incident stays settled
    assert run(incident(xid=79, status="resolved"), recovering=True).action is TriageAction.STOP


def test_only_a_refused_incident_that_is_not_open_is_already_handled():
    assert already_handled(run(incident(status="resolved")), incident(status="resolved"))
    assert not already_handled(run(incident()), incident())


@pytest.mark.parametrize(("result", "status", "words"), [
    ({"status": "replaced", "why": "spare gpu099 joined"}, IncidentStatus.RESOLVED, "replace: spare gpu099 joined"),
    ({"status": "held", "why": "rack breaker open"}, IncidentStatus.ESCALATED, "a person decides (rack breaker open)"),
    ({"status": "stopped-by-operator"}, IncidentStatus.IGNORED, "the operator's change stands"),
    ({"status": "escalated", "escalated": True, "reason": "XID 48"}, IncidentStatus.ESCALATED, "escalated: XID 48"),
    ({"status": "isolated"}, IncidentStatus.RESOLVED, "replace: isolated"),
    ({"status": "code"}, IncidentStatus.IGNORED, "user code or data"),
    ({}, IncidentStatus.ESCALATED, "ended without a status"),
])
def test_what_a_path_flows_result_means_for_the_incident(result, status, words):
    decision = settle(run(incident(xid=79)), cost=Choice("replace", "cheaper"))
    close = closing(decision, result)
    assert close.status is status and words in close.detail, close
    assert close.run_status == (result.get("status") or "done")
    assert close.replaced is (result.get("status") == "replaced")


def test_a_run_started_by_hand_closes_its_own_incident_as_it_ended():
    stood = own_incident_closing("stopped-by-operator", False, "uncordoned by hand")
    assert stood.status is IncidentStatus.IGNORED and "stopped by operator: uncordoned by hand" in stood.detail
    assert own_incident_closing("fixed", False).status is IncidentStatus.RESOLVED
    assert own_incident_closing("held", False).status is IncidentStatus.ESCALATED
    assert own_incident_closing("duplicate", False) is None  # it never held the incident
    assert own_incident_closing("stopped-by-operator", True) is None  # a dry run changes no incident
    assert own_incident_closing("no-such-status", False) is None


def test_the_background_repair_tries_a_reset_only_when_it_may_clear_the_fault():
    assert repair_steps(None) == ("reset-gpu", "reboot")
    assert repair_steps(0.6) == ("reset-gpu", "reboot")
    assert repair_steps(0.1) == ("reboot",)
    done = repair_closing("returned-to-spares", "reboot cleared it")
    assert done.status is IncidentStatus.RESOLVED and "returned to spares (reboot cleared it)" in done.detail
    assert repair_closing("sent-to-repair").status is IncidentStatus.RESOLVED
