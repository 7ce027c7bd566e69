"""Replace a failed GPU node with a warm spare — the operator's runbook as a Prefect flow.

    incident → breaker gate → cordon + quarantine → drain (grace period) → select spare → promote spare
             → validate it if stale → verify it joined → job back to full size → failed node to repair → report
    early warning → claim a spare first (none: the node keeps working, watched) → gate (held: watched, nobody paged)
             → the same steps from the cordon on
    no spare → plan a preemption of lower-priority work → a person approves → preempt → the freed node joins
             the job's pool → job back to full size → failed node to repair; else shrink an elastic job or escalate

Each step is one task that writes the ledger as it acts, so a re-run (duplicate trigger, crash) replays finished
steps instead of repeating them: one incident gets at most one replacement. Before touching the failed node again
the flow re-reads it; an operator's manual uncordon wins and is recorded, never undone. A held gate (breaker open,
budget or spare reserve) asks a person; no answer in time means the safe default: nothing is done.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.approvals.open_loop import is_open_loop, node_pool
from remedy.domain.durations import human_duration
from remedy.domain.model import IncidentStatus, NodeState
from remedy.domain.outcome import Outcome, decision_sentence, hold_cause
from remedy.domain.timeline import Timeline
from remedy.safety.scopes import NOT_A_NEW_FAILURE
from tasks.approvals import propose_open_loop
from tasks.cluster import (
    check_drift, cordon_node, drain_node, label_node, resize_workload, taint_node, uncordon_node, verify_joined, wait_for_workload,
)
from tasks.gate import (
    check_breaker, close_breaker, find_open_question, held_on, record_remediation_outcome, wait_for_decision,
)
from tasks.ledger import claim_remediation, open_incident, set_incident_status, set_node_state, sync_fleet
from tasks.preemption import plan_preemption, preempt
from tasks.health import reconfirm_fault
from tasks.spares import select_spare, validate_spare
from tasks.notify import post_notice
from tasks.states import final_state
from tasks.tags import tag_this_run
from tasks.leases import keeps_lease


def _run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    return f"replace {p['node']} ({p.get('cause') or p.get('signal') or 'fault'})"


@flow(name="replace-node", flow_run_name=_run_name)
@keeps_lease  # alive while it runs; a killed run's incident is taken over (tasks.leases)
def replace_node(
    node: str,
    cause: str = "",
    signal: str = "xid",
    xid: int | None = None,
    gpu: int | None = None,
    incident_id: int | None = None,
    detected_at: str | None = None,
    dry_run: bool | None = None,
    early_warning: bool = False,
):
    """The run ends Completed when the node was replaced (or nothing was needed), and Failed/Cancelled, named for
    what happened, when it was held, escalated, had no spare or was stopped by the operator (remedy.domain.outcome);
    the result dict is the state's data either way.

    `early_warning`: the node has not failed yet (a warned swap at a checkpoint boundary). The spare is claimed
    before the node is touched, and a held gate asks nobody: without a spare or a clear gate the node keeps working
    and is watched (Outcome.WATCHED) — never drained without a spare, never a preemption for a node that works."""
    return final_state(_replace(node, cause, signal, xid, gpu, incident_id, detected_at, dry_run, early_warning),
                       node=node)


def _replace(node: str, cause: str, signal: str, xid: int | None, gpu: int | None, incident_id: int | None,
             detected_at: str | None, dry_run: bool | None, early_warning: bool = False) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="replace", xid=xid, dry_run=dry_run)
    work = settings.workload
    timeline = Timeline.starting(detected_at)
    outcome: dict[str, Any] = {"node": node, "dry_run": dry_run, "replacement": None}

    # 1. Incident: attach to the one the receiver opened, or open it now (CLI / demo runs).
    sync_fleet()
    by_person = incident_id is None  # automation always passes the incident; a run without one was started by hand
    if by_person:
        incident_id = open_incident(node, signal, gpu=gpu, xid=xid, detail=cause)["id"]
    outcome["incident_id"] = incident_id
    claim = claim_remediation(incident_id, by_person=by_person)
    if not claim["claimed"]:  # a duplicate trigger: another run works on this incident, or it is already settled
        why = (f"incident {incident_id} is already {claim['settled']}" if claim.get("settled")
               else f"run {claim['holder']} is handling it")
        return _report(outcome | {"status": "duplicate", "why": why}, timeline)

    # 2. Open-loop pools: gpu-remedy only proposes; an external break-fix system says when to act (seed 000).
    live = runtime.cluster().get_node(node)
    if not dry_run and is_open_loop(live, settings.ladder.open_loop_pools):
        go = propose_open_loop(node=node, incident_id=incident_id, action="replace with a warm spare",
                               reason=cause or signal, pool=node_pool(live),
                               timeout_seconds=settings.approvals.timeout_seconds)
        outcome["open_loop"] = {"decision": go.decision, "by": go.by}
        if not go.approved:
            return _report(outcome | {"status": "proposed-not-executed",
                                      "why": f"open-loop pool {node_pool(live)}: {go.decision}"}, timeline)

    # 3. A warned node still works: it is only taken out when a spare is ready to take its place, so the spare is
    #    claimed (and checked) first. No spare means no gate decision either: nothing enters the breaker board.
    chosen = None
    if early_warning:
        chosen = select_spare(node, incident_id=incident_id, dry_run=dry_run)
        if chosen["spare"] and chosen["needs_validation"]:
            check = validate_spare(chosen["spare"], dry_run=dry_run, incident_id=incident_id)
            chosen = chosen | {"needs_validation": False} if check["passed"] else \
                {"spare": None, "why": f"{chosen['spare']} failed validation: {check['summary']}"}
        if not chosen["spare"]:
            first = (chosen["why"] or "none in the pool").splitlines()[0].removeprefix("no spare: ")
            return _watched(node, f"no spare was ready at the checkpoint boundary — {first}", outcome, timeline)

    # 4. Gate: circuit breakers per rack/switch/PDU/cluster, capacity budget, spare reserve. An approval answers
    #    one question; the whole gate then runs again.
    passed = pass_gate(node, incident_id, cause or signal, timeline.detected_at.isoformat(), dry_run,
                       ask=not early_warning)
    outcome |= {k: v for k, v in passed.items() if k in ("gate", "approval", "approvals", "hold")}
    if early_warning and passed["status"] is Outcome.HELD:  # a node that still works is not worth a person's page
        return _watched(node, f"the gate held the swap: {hold_cause(passed.get('hold'), warned=True)}", outcome, timeline)
    if passed["status"] is not None:
        if passed["status"] == Outcome.HELD:
            set_incident_status(incident_id, IncidentStatus.ESCALATED.value, detail=passed["gate"])
        return _report(outcome | {"status": passed["status"].value, "why": passed["gate"]}, timeline)
    if passed.get("approvals"):
        timeline.mark("approved")

    # 5. Cordon and quarantine: nothing new lands on the node.
    cordon_node(node, reason=cause or signal, dry_run=dry_run, incident_id=incident_id)
    taint_node(node, dry_run=dry_run, add=[settings.taints.quarantine], incident_id=incident_id)
    set_node_state(node, NodeState.QUARANTINED.value, reason=cause or signal, dry_run=dry_run, incident_id=incident_id)
    timeline.mark("cordoned")

    # 6. Drain with a grace period so the job can checkpoint. A person who uncordoned the node meanwhile wins,
    #    here and before every later step that touches the node or spends a spare.
    if (stood_down := _operator_wins(node, incident_id, dry_run, outcome, timeline, "before the drain")):
        return stood_down
    #    The drain stops the job: first make sure the fault still holds and is not a monitor that failed.
    if (not_needed := recheck_fault(node, incident_id, signal, dry_run, outcome, timeline)):
        return not_needed
    drained = drain_node(node, grace_period_seconds=settings.drain.grace_period_seconds,
                         deadline_seconds=settings.drain.eviction_deadline_seconds, dry_run=dry_run,
                         incident_id=incident_id)
    outcome["drain"] = {k: drained[k] for k in ("evicted", "skipped", "not_evicted", "complete")}
    timeline.mark("drained")
    if drained.get("refused"):  # e.g. a pod under two PodDisruptionBudgets: no retry helps, a person must fix it
        why = "the API refused to evict " + "; ".join(f"{pod}: {w}" for pod, w in drained["refused"].items())
        set_incident_status(incident_id, IncidentStatus.ESCALATED.value, detail=why[:500])
        record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
        return _report(outcome | {"status": Outcome.ESCALATED.value, "escalated": True, "why": why}, timeline)

    # 7. Select a spare: same GPU model, validated, not a lemon, away from a correlated failure.
    if (stood_down := _operator_wins(node, incident_id, dry_run, outcome, timeline, "after the drain")):
        return stood_down
    choice = chosen or select_spare(node, incident_id=incident_id, dry_run=dry_run)
    if not choice["spare"]:
        return _no_spare(node, choice["why"], incident_id, dry_run, outcome, timeline)
    spare = choice["spare"]
    outcome |= {"replacement": spare, "spare_choice": choice["why"]}

    # 8. Validate the spare first if its last check is older than the freshness window.
    if choice["needs_validation"]:
        check = validate_spare(spare, dry_run=dry_run, incident_id=incident_id)
        if not check["passed"]:
            return _no_spare(node, f"{spare} failed validation: {check['summary']}", incident_id, dry_run,
                             outcome, timeline)

    # 9. Promote the spare: untaint, label into the job's pool, and check it really joined. Not if the operator
    #    took the failed node back meanwhile: the claim lapses with the incident and the spare stays in the pool.
    if (stood_down := _operator_wins(node, incident_id, dry_run, outcome, timeline, "before promoting the spare")):
        return stood_down | {"spare_released": spare}
    joined = promote_spare(spare, node, f"replaces {node}", incident_id, dry_run)
    outcome["joined"] = joined
    timeline.mark("spare ready")

    # 10. Resume the workload: the job runs on the new node, back at full size unless more nodes are missing.
    size = wait_for_workload(work.namespace, work.job, spare, work.resume_timeout_seconds, dry_run=dry_run)
    outcome["workload"] = size
    timeline.mark("job resumed" if size["full"] else "spare working")

    # 11. Hand the failed node to repair; the remediation is over for the breaker. A node the operator put back
    #     in service is not recorded as in repair.
    if (stood_down := _operator_wins(node, incident_id, dry_run, outcome | {"replacement": spare}, timeline,
                                     "before sending the node to repair")):
        return stood_down
    set_node_state(node, NodeState.REPAIR.value, reason=f"replaced by {spare}", dry_run=dry_run,
                   incident_id=incident_id)
    ok = joined["joined"] and size["on_node"]
    record_remediation_outcome(node, succeeded=ok, incident_id=incident_id, dry_run=dry_run)
    set_incident_status(incident_id, (IncidentStatus.RESOLVED if ok else IncidentStatus.ESCALATED).value,
                        detail=f"replaced by {spare}" if ok else f"replaced by {spare}: {joined['why']}")
    timeline.mark("to repair")
    status = "planned" if dry_run else ("replaced" if ok else "replaced-not-joined")
    return _report(outcome | {"status": status}, timeline)


def promote_spare(spare: str, replaces: str, reason: str, incident_id: int | None, dry_run: bool) -> dict[str, Any]:
    """The spare takes `replaces`' place: untaint, label into the job's pool, ledger state active; then wait until it
    has really joined (Ready, schedulable, every GPU allocatable). Returns verify_joined's answer."""
    settings = runtime.settings()
    taint_node(spare, dry_run=dry_run, remove=[settings.taints.spare], incident_id=incident_id)
    label_node(spare, {settings.labels.pool: settings.labels.job_pool_value}, dry_run=dry_run,
               incident_id=incident_id)
    set_node_state(spare, NodeState.ACTIVE.value, reason=reason, dry_run=dry_run, incident_id=incident_id,
                   replaces=replaces)
    return verify_joined(spare, timeout_seconds=settings.workload.resume_timeout_seconds, dry_run=dry_run)


def recheck_fault(node: str, incident_id: int, signal: str, dry_run: bool, outcome: dict[str, Any],
                  timeline: Timeline) -> dict[str, Any] | None:
    """Re-check just before acting (remedy.detect.reconfirm). A fault that no longer holds, or a monitor failure,
    puts the cordoned node back in service and ends the run, with the evidence; None: go on."""
    if not runtime.settings().reconfirm.enabled:
        return None
    check = reconfirm_fault(node, incident_id, signal, dry_run)
    outcome["recheck"] = check
    if check["act"]:
        return None
    settings = runtime.settings()
    get_run_logger().warning("%s: %s — not acting; the node goes back in service", node, check["why"])
    taint_node(node, dry_run=dry_run, remove=[settings.taints.quarantine], incident_id=incident_id)
    uncordon_node(node, reason=check["why"], dry_run=dry_run, incident_id=incident_id)
    set_node_state(node, NodeState.ACTIVE.value, reason=check["why"], dry_run=dry_run, incident_id=incident_id)
    status = Outcome.CLEARED if check["verdict"] == "cleared" else Outcome.MONITOR_FAILURE
    set_incident_status(incident_id, status.incident_status.value, detail=f"{status.label.lower()}: {check['why']}")
    # the gate let this node through: it leaves the breaker board (else it would hold capacity budget for good);
    # a node found healthy is a probe that succeeded — its scope's feared cause is not on it
    record_remediation_outcome(node, succeeded=True, incident_id=incident_id, dry_run=dry_run)
    timeline.mark(status.label.lower())
    return _report(outcome | {"status": status.value, "why": check["why"]}, timeline)


def _operator_wins(node: str, incident_id: int, dry_run: bool, outcome: dict[str, Any], timeline: Timeline,
                   when: str) -> dict[str, Any] | None:
    """The operator's manual change (e.g. an uncordon) stops the run here; it is recorded, never undone."""
    drift = check_drift(node)
    if not drift or dry_run:
        return None
    get_run_logger().warning("%s: %s %s — stopping, the operator's change stands", node, drift["what"], when)
    set_incident_status(incident_id, IncidentStatus.ESCALATED.value, detail=f"operator ({when}): {drift['detail']}")
    record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
    timeline.mark("stopped by operator")
    return _report(outcome | {"status": Outcome.STOPPED_BY_OPERATOR.value, "drift": drift,
                              "why": f"{drift['what']} {when}: the operator's change stands"}, timeline)


def pass_gate(node: str, incident_id: int, signal: str, detected_at: str, dry_run: bool, *,
              needs_spare: bool = True, takes_node_out: bool = True, ask: bool = True) -> dict[str, Any]:
    """Run the gate until it acts, stands down or is held. Each hold asks its one question; an approval answers
    only that one (a scope, the budget or the reserve) and the gate runs again, so every other open scope, the
    node's other incidents, the budget and the reserve still apply. `status` is None when the node may be acted on,
    else the Outcome (DUPLICATE: another incident has the node; HELD: a question was denied or not answered, or
    `ask` is off and the gate held)."""
    approved: list[str] = []
    approvals: list[dict[str, Any]] = []
    while True:
        gate = check_breaker(node, incident_id, signal=signal, detected_at=detected_at, dry_run=dry_run,
                             needs_spare=needs_spare, takes_node_out=takes_node_out, approved=tuple(approved))
        out: dict[str, Any] = {"gate": gate["explain"], "approvals": approvals,
                               "approval": approvals[-1] if approvals else None}
        if gate["act"]:
            return out | {"status": None}
        if gate["skip"] in NOT_A_NEW_FAILURE:  # another incident on this node is (or was) dealt with it
            return out | {"status": Outcome.DUPLICATE}
        if not ask:
            return out | {"status": Outcome.HELD, "hold": {"skip": gate["skip"], "scope": gate["scope"]}}
        token = gate["scope"] or gate["skip"]
        decision = ask_to_proceed(gate, node, incident_id, dry_run)
        approvals.append(decision | {"answers": token})
        out["approval"] = decision
        if decision["decision"] != "approve" or token in approved:
            return out | {"status": Outcome.HELD, "hold": {"skip": gate["skip"], "scope": gate["scope"]}}
        approved.append(token)


def ask_to_proceed(gate: dict[str, Any], node: str, incident_id: int, dry_run: bool) -> dict[str, Any]:
    """One approval per tripped scope: the failure that tripped it asks, the others held there wait on its answer."""
    if dry_run:
        return {"decision": "planned", "by": "", "reason": "dry-run: a person would be asked"}
    settings = runtime.settings()
    scope = gate.get("scope")
    kind = f"breaker:{scope}" if scope else f"hold:{gate['skip']}"
    if scope and gate["skip"] in ("breaker-open", "probe-in-flight"):
        # the failure that tripped this breaker asks; wait for its question rather than asking again
        asked = find_open_question(kind, within_seconds=30.0)
        if asked is not None:
            get_run_logger().info("%s waits on approval %s (%s): %s", node, asked, kind, gate["explain"])
            return wait_for_decision(asked, settings.approvals.timeout_seconds)
    from tasks.approvals import request_approval

    answer = request_approval(
        kind=kind,
        title=f"gpu-remedy paused automation: {gate['explain']}",
        summary_markdown=_hold_summary(gate, node),
        incident_id=incident_id,
        node=node,
        timeout_seconds=settings.approvals.timeout_seconds,
        default_on_timeout="deny",
    )
    decision = {"decision": answer.decision, "by": answer.by, "reason": answer.reason,
                "approval_id": answer.approval_id}
    if scope and answer.decision == "approve":
        close_breaker(scope, by=answer.by or "approver", incident_id=incident_id)
    return decision


def _hold_summary(gate: dict[str, Any], node: str) -> str:
    token = gate.get("scope") or gate.get("skip") or ""
    waiting = held_on(token) or [node]
    lines = [f"**{node}**: {gate['explain']}", ""]
    for t in gate.get("transitions", []):
        lines.append(f"- breaker {t['scope_kind']} {t['scope']}: {t['from']} → {t['to']} — {t['reason']}")
    lines.append(f"- waiting on this answer: {', '.join(waiting)}")
    others = [s for s in gate.get("open_scopes", []) if s != token]
    lines.append(f"- other scopes not closed: {', '.join(others) if others else 'none'}")
    lines += ["", "Approve answers this question only: the held failures then go through the rest of the gate "
              "(other scopes, capacity budget, spare reserve) and may ask again. Deny or no answer leaves the nodes "
              "as they are for a person to investigate."]
    return "\n".join(lines)


def _watched(node: str, why: str, outcome: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    """A warned swap that did not happen: the node was not touched and keeps working; its warning is watched and
    the next warning (or the failure) is weighed again. No repair, no preemption, no page."""
    get_run_logger().warning("%s: not swapped on the early warning: %s; it keeps working and is watched", node, why)
    timeline.mark("watched")
    return _report(outcome | {"status": Outcome.WATCHED.value, "why": why}, timeline)


def _no_spare(node: str, why: str, incident_id: int, dry_run: bool, outcome: dict[str, Any],
              timeline: Timeline) -> dict[str, Any]:
    """No spare: never a half-replacement. A gang job that cannot start without all its nodes may get one back by
    preempting lower-priority work (a person approves by default); else elastic jobs may shrink inside min:max;
    otherwise escalate."""
    settings = runtime.settings()
    work = settings.workload
    log = get_run_logger()
    log.error("no spare for %s: %s", node, why)

    # a. Preempt lower-priority work on a healthy node rather than retry into a job that cannot start (seed 002).
    if settings.spares.preempt_when_no_spare:
        plan = plan_preemption(node, incident_id, dry_run)
        outcome["preemption"] = {k: plan[k] for k in ("plan", "victims", "freed_nodes", "explain")}
        if plan["plan"]:
            decision = ask_to_preempt(plan, node, incident_id, dry_run)
            outcome["preemption"]["approval"] = decision
            if decision["decision"] in ("approve", "planned", "not-required"):
                done = _preempt_and_resume(node, plan, incident_id, dry_run, outcome, timeline)
                if done is not None:
                    return done
                why = f"{why}\npreemption did not free a node: {outcome['preemption']['result']['blocked']}"
            else:
                why = f"{why}\npreemption not approved ({decision['decision']}" + \
                      (f" by {decision['by']}" if decision.get("by") else "") + f"): {plan['explain'].splitlines()[0]}"
        else:
            why = f"{why}\n{plan['explain']}"

    # b. Shrink an elastic job inside its min:max, else escalate to a person.
    if work.min_nodes and work.when_no_spare == "shrink":
        ready, desired = runtime.cluster().workload_size(work.namespace, work.job)
        if desired - 1 >= work.min_nodes:
            resized = resize_workload(work.namespace, work.job, desired - 1, dry_run=dry_run, incident_id=incident_id)
            if not resized.get("refused"):
                timeline.mark("job shrunk")
                set_incident_status(incident_id, IncidentStatus.ESCALATED.value,
                                    detail=f"no spare; job continues with {desired - 1} nodes (min {work.min_nodes})")
                return _report(outcome | {"status": "shrunk", "why": why, "job_nodes": desired - 1}, timeline)
            why = f"{why}\ncannot shrink the job: {resized['refused']}"  # its controller says no: a person decides
    set_incident_status(incident_id, IncidentStatus.ESCALATED.value, detail=f"no spare: {why}")
    record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
    post_notice(f":rotating_light: gpu-remedy: {node} is quarantined and drained but no spare can replace it.\n{why}")
    return _report(outcome | {"status": "no-spare", "why": why}, timeline)


PREEMPT_APPROVAL = "preempt"


def ask_to_preempt(plan: dict[str, Any], node: str, incident_id: int, dry_run: bool) -> dict[str, Any]:
    """A person approves a preemption plan unless spares.preemption_requires_approval is off; no answer = deny.
    A re-run of the incident reuses an approval already given instead of asking twice."""
    if dry_run:
        return {"decision": "planned", "by": "", "reason": "dry-run: a person would be asked"}
    if not plan["approval_required"]:
        return {"decision": "not-required", "by": "", "reason": "spares.preemption_requires_approval is off"}
    from tasks.approvals import request_approval

    given = [a for a in runtime.ledger().approvals(incident_id=incident_id)
             if a.kind == PREEMPT_APPROVAL and a.decision == "approve"]
    if given:
        a = given[-1]
        return {"decision": a.decision, "by": a.decided_by or "", "reason": a.reason, "approval_id": a.id,
                "replayed": True}
    victims = ", ".join(v["name"] for v in plan["victims"])
    answer = request_approval(
        kind=PREEMPT_APPROVAL,
        title=f"No spare for {node}: preempt {victims} so {plan['job']} can run again?",
        summary_markdown=_preempt_summary(plan, node),
        incident_id=incident_id,
        node=node,
        timeout_seconds=runtime.settings().approvals.timeout_seconds,
        default_on_timeout="deny",
        consequence="nothing was preempted; the incident is escalated",
    )
    return {"decision": answer.decision, "by": answer.by, "reason": answer.reason, "approval_id": answer.approval_id}


def _preempt_summary(plan: dict[str, Any], node: str) -> str:
    lines = [f"**{node}** failed and no spare is ready; `{plan['job']}` (priority {plan['job_priority']}) is "
             f"gang-scheduled and cannot run short of a node.", ""]
    for v in plan["victims"]:
        lines.append(f"- preempt `{v['name']}` (priority {v['priority']}) on {', '.join(v['nodes'])}")
    lines += [f"- frees {', '.join(plan['freed_nodes'])} for `{plan['job']}`", "", "```", plan["explain"], "```", "",
              "Approve to suspend/evict the listed work (grace period for a checkpoint) and give its node to the "
              "job; deny or no answer preempts nothing and escalates the incident."]
    return "\n".join(lines)


def _preempt_and_resume(node: str, plan: dict[str, Any], incident_id: int, dry_run: bool, outcome: dict[str, Any],
                        timeline: Timeline) -> dict[str, Any] | None:
    """Preempt the plan's victims, bring the freed node into the job's pool and the job back to full size.
    None when no node came free (e.g. a PodDisruptionBudget held the eviction): the caller escalates."""
    settings = runtime.settings()
    work = settings.workload
    done = preempt(plan, node, dry_run, incident_id=incident_id)
    outcome["preemption"]["result"] = {k: done[k] for k in ("preempted", "freed", "blocked")}
    if not done["freed"]:
        return None
    freed = done["freed"][0]
    timeline.mark("preempted")

    # The freed node joins the job's pool (it usually is in it already) and must really take work.
    label_node(freed, {settings.labels.pool: settings.labels.job_pool_value}, dry_run=dry_run,
               incident_id=incident_id)
    joined = verify_joined(freed, timeout_seconds=work.resume_timeout_seconds, dry_run=dry_run)
    size = wait_for_workload(work.namespace, work.job, freed, work.resume_timeout_seconds, dry_run=dry_run)
    outcome |= {"replacement": freed, "joined": joined, "workload": size,
                "spare_choice": f"preempted {', '.join(done['preempted'])} to free {freed}"}
    timeline.mark("job resumed" if size["full"] else "freed node working")

    victims = ", ".join(done["preempted"])
    set_node_state(node, NodeState.REPAIR.value, reason=f"replaced by {freed} (preempted {victims})",
                   dry_run=dry_run, incident_id=incident_id)
    ok = joined["joined"] and size["on_node"]
    record_remediation_outcome(node, succeeded=ok, incident_id=incident_id, dry_run=dry_run)
    set_incident_status(incident_id, (IncidentStatus.RESOLVED if ok else IncidentStatus.ESCALATED).value,
                        detail=f"no spare; preempted {victims}, {freed} took its place"
                        if ok else f"preempted for {freed} but the job is not on it: {joined['why']}")
    timeline.mark("to repair")
    status = "planned" if dry_run else ("preempted" if ok else "preempted-not-joined")
    return _report(outcome | {"status": status}, timeline)


def _report(outcome: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    """The story of the run: a timeline table artifact and a markdown summary."""
    rows = timeline.rows()
    node = outcome["node"]
    create_table_artifact(key=f"replace-{node}-timeline", table=rows, description=f"Replacement timeline for {node}")
    story = [f"### {node}: {outcome.get('status')}", "", decision_sentence(outcome), ""]
    if outcome.get("gate"):
        story.append(f"- gate: {outcome['gate']}")
    if outcome.get("approval"):
        a = outcome["approval"]
        story.append(f"- approval: {a['decision']}" + (f" by {a['by']}" if a.get("by") else ""))
    if outcome.get("replacement"):
        story.append(f"- replacement: **{outcome['replacement']}** — {outcome.get('spare_choice', '').splitlines()[0]}")
    if outcome.get("preemption"):
        p = outcome["preemption"]
        story.append(f"- preemption: {p['explain'].splitlines()[0]}")
        if p.get("approval"):
            a = p["approval"]
            story.append(f"- preemption approval: {a['decision']}" + (f" by {a['by']}" if a.get("by") else ""))
        if p.get("result"):
            r = p["result"]
            story.append(f"- preempted: {', '.join(r['preempted']) or 'nothing'}; "
                         f"freed: {', '.join(r['freed']) or 'nothing'}"
                         + (f"; blocked: {', '.join(r['blocked'])}" if r["blocked"] else ""))
    if outcome.get("why"):
        story.append(f"- why not replaced: {outcome['why']}")
    if outcome.get("dry_run"):
        story.append("- dry-run: every step planned and recorded, nothing changed")
    story += ["", "| step | at | since detection |", "|---|---|---|"]
    story += [f"| {r['step']} | {r['at']} | {human_duration(r['since_detection_s'])} |" for r in rows]
    create_markdown_artifact(key=f"replace-{node}-story", markdown="\n".join(story), description="What happened")
    outcome["timeline"] = rows
    outcome["finished_at"] = datetime.now(timezone.utc).isoformat()
    return outcome
