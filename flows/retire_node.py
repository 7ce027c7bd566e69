"""Retire a lemon node for good — the operator's runbook as a Prefect flow.

    budget gate → ask a person (Prefect UI + Slack) → [in the job: a spare takes its place first]
                → cordon → drain (grace period) → NoExecute retired taint → ledger state retired (pool label)
                → RMA report archived to S3 → notice

A lemon still in the job is swapped, not just drained: a gang-scheduled job cannot run a node short, so a spare is
chosen, promoted and seen to join before the lemon is drained, as replace-node does (and as the simulator's policy
does). The swap is an incident of its own so the spare is claimed like any other. With no spare ready the lemon is
not drained: it keeps working, stays out of spare rotation as a candidate, and the next review asks again.

A lemon passes checks when idle and fails again under load (seed 000), so a retired node must not drift back: the
ledger's state machine lets `retired → burn-in` happen only as an explicit operator action, and spare selection
only ever picks nodes in state `spare`. Never more retirements per window than `lemon.retirement_budget` (checked
before asking and again after the answer, since a person may take hours). No answer in time → nothing is retired.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.domain import names
from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL, IncidentStatus, NodeState
from remedy.domain.outcome import decision_sentence
from remedy.lemon.retirement import (
    RetireStatus,
    Stop,
    already_retired,
    approval_for_rma,
    approval_summary,
    approved,
    budget_spent,
    budget_used_while_waiting,
    check_request,
    claim_taken_why,
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
from tasks.cluster import cordon_node, drain_node, taint_node, wait_for_workload
from tasks.leases import keeps_lease
from tasks.ledger import claim_remediation, open_incident, set_incident_status, set_node_state, sync_fleet
from tasks.lemon import archive_rma_report, retirement_budget
from tasks.notify import post_notice
from tasks.spares import promote_spare, select_spare, validate_spare


def _run_name() -> str:
    from prefect.runtime import flow_run

    return names.run_name(f"retire {flow_run.parameters['node']}")


@flow(name="retire-node", flow_run_name=_run_name)
@keeps_lease  # the swap's incident is held like any remediation's
def retire_node(node: str, reason: str, evidence: str = "", dry_run: bool | None = None) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    check_request(node, reason)
    outcome: dict[str, Any] = {"node": node, "reason": reason, "dry_run": dry_run, "retired": False}

    # 1. Know the node; a retired node stays retired (re-runs are no-ops).
    sync_fleet()
    current = runtime.ledger().get_node(node)  # NodeNotFound names it
    outcome["from_state"] = current.state.value if current.state else None
    if stop := already_retired(node, current.state):
        return _report(outcome | stop.fields())

    # 2. Budget gate: retiring too fast drains the spare pool (seed 000).
    budget = retirement_budget()
    outcome["budget"] = budget.text
    if stop := budget_spent(budget.allowed, budget.text):
        log.warning("%s not retired: %s", node, budget.text)
        return _report(outcome | stop.fields())

    # 3. Ask a person. No answer in time is a no.
    approval = _ask(node, reason, evidence, budget.text, dry_run)
    outcome["approval"] = approval
    if not approved(approval["decision"]):
        log.info("%s not retired: %s", node, approval["decision"])
        if clear := clear_after_deny(approval):
            from remedy.spares.lemons import clear_candidate

            clear_candidate(runtime.ledger(), node, by=clear.by, why=clear.why, dry_run=dry_run)
        return _report(outcome | declined(approval).fields())
    if not dry_run and (stop := budget_used_while_waiting(retirement_budget().allowed)):
        return _report(outcome | stop.fields())

    # 4. In the job: a spare takes its place first, or the lemon keeps working until one is ready.
    incident_id = None
    if needs_swap(current.state):
        swap = _swap_in_spare(node, reason, dry_run)
        outcome |= swap_fields(swap)
        if swap.get("why_not"):
            log.warning("%s not retired: %s", node, swap["why_not"])
            return _report(outcome | Stop(RetireStatus.DEFERRED, swap["why_not"]).fields())
        incident_id = swap["incident_id"]

    # 5. Out for good: cordon, let the job checkpoint and leave, then NoExecute so nothing can ever run there.
    _out_for_good(node, reason, incident_id, outcome, dry_run)

    # 6. RMA report: its history, incidents, validations and the lemon evidence, archived to S3.
    rma = archive_rma_report(node, reason, evidence, approval_for_rma(approval), dry_run)
    outcome["rma"] = {"key": rma.key, "url": rma.url, "bytes": rma.bytes}
    create_markdown_artifact(key=f"rma-{slug(node)}", markdown=rma.markdown, description=f"RMA report for {node}")
    if not dry_run:
        post_notice(f":wastebasket: gpu-remedy retired {node} (lemon): {reason}\nRMA report: {rma.url}")
    return _report(outcome | {"status": final_status(dry_run).value, "retired": not dry_run})


def _out_for_good(node: str, reason: str, incident_id: int | None, outcome: dict[str, Any], dry_run: bool) -> None:
    """Cordon, drain (the job's pod moves to the spare), NoExecute retired taint, ledger state retired."""
    settings = runtime.settings()
    cordon_node(node, reason=f"retired: {reason}"[:250], dry_run=dry_run, incident_id=incident_id)
    drain = drain_node(node, grace_period_seconds=settings.drain.grace_period_seconds,
                       deadline_seconds=settings.drain.eviction_deadline_seconds, dry_run=dry_run,
                       incident_id=incident_id)
    outcome["drain"] = drain.summary("evicted", "not_evicted", "complete")
    if outcome.get("replacement"):  # the job's pod left the lemon for the spare: the job is back at full size
        work = settings.workload
        outcome["workload"] = wait_for_workload(work.namespace, work.job, outcome["replacement"],
                                                work.resume_timeout_seconds, dry_run=dry_run).to_dict()
    taint_node(node, dry_run=dry_run, add=[settings.taints.retired], effect="NoExecute", incident_id=incident_id)
    set_node_state(node, NodeState.RETIRED.value, reason=f"lemon: {reason}"[:500], dry_run=dry_run,
                   incident_id=incident_id)
    if incident_id is not None and not dry_run:
        set_incident_status(incident_id, IncidentStatus.RESOLVED.value,
                            detail=f"retired as a lemon, replaced by {outcome['replacement']}")


def _swap_in_spare(node: str, reason: str, dry_run: bool) -> dict[str, Any]:
    """Promote a spare into the job's pool in place of `node`, joined when this returns (the job's pod moves to it
    when the lemon is drained). `why_not` says why nothing was done (no spare ready, the spare failed validation, the
    incident is another run's): the lemon stays in service."""
    incident_id = None
    if not dry_run:  # a dry run writes nothing: it only says which spare it would take
        incident_id = open_incident(node, PLANNED_RETIREMENT_SIGNAL, detail=f"lemon retirement: {reason}"[:500],
                                    severity="warning").id
        claim = claim_remediation(incident_id)
        if not claim.claimed:
            return {"incident_id": incident_id, "why_not": claim_taken_why(node, claim.holder)}
    out: dict[str, Any] = {"incident_id": incident_id}
    choice = select_spare(node, incident_id=incident_id, dry_run=dry_run)
    if not choice.spare:
        why = no_spare_why(choice.why)
        if incident_id is not None:  # a dry run opened none
            set_incident_status(incident_id, IncidentStatus.IGNORED.value, detail=why[:500])
        return out | {"why_not": why}
    spare = choice.spare
    out |= {"replacement": spare, "spare_choice": choice.why}
    if choice.needs_validation:
        check = validate_spare(spare, dry_run=dry_run, incident_id=incident_id)
        if not check.passed:
            why = spare_failed_why(spare, check.summary)
            if incident_id is not None:  # a dry run opened none
                set_incident_status(incident_id, IncidentStatus.IGNORED.value, detail=why[:500])
            return out | {"why_not": why}
    out["joined"] = promote_spare(spare, node, f"replaces {node} (lemon)", incident_id, dry_run).to_dict()
    return out


def _ask(node: str, reason: str, evidence: str, budget: str, dry_run: bool) -> dict[str, Any]:
    if dry_run:
        return {"decision": "planned", "by": "", "reason": "dry-run: a person would be asked"}
    from tasks.approvals import request_approval

    settings = runtime.settings()
    answer = request_approval(
        kind="retire", title=f"Retire {node} as a lemon?",
        summary_markdown=approval_summary(node, reason, evidence, budget), incident_id=None,
        node=node, timeout_seconds=settings.approvals.timeout_seconds, default_on_timeout="deny",
        consequence=f"{node} was not retired",
    )
    decision = "approve" if answer.approved else answer.decision
    return {"decision": decision, "by": answer.by, "reason": answer.reason, "approval_id": answer.approval_id}


def _report(outcome: dict[str, Any]) -> dict[str, Any]:
    create_markdown_artifact(key=f"retire-{slug(outcome['node'])}",
                             markdown="\n".join(report_lines(outcome, decision_sentence(outcome))),
                             description="Retirement outcome")
    outcome["finished_at"] = datetime.now(UTC).isoformat()
    return outcome
