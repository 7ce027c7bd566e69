"""Replace a failed GPU node with a warm spare — the operator's runbook as a Prefect flow.

    incident → breaker gate → cordon + quarantine → drain (grace period) → select spare → promote spare
             → validate it if stale → verify it joined → job back to full size → failed node to repair → report
    elastic job → it saves from its survivors if it asks → hot swap, or shrink to the survivors while the spare
             joins and grow back after, or stop and replace: by expected cost (remedy.elastic)
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

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.approvals.open_loop import is_open_loop, node_pool
from remedy.config import RemedySettings
from remedy.domain.durations import human_duration
from remedy.domain.model import IncidentStatus, NodeState
from remedy.domain.names import artifact_key
from remedy.domain.outcome import Outcome, decision_sentence
from remedy.domain.timeline import Timeline
from remedy.elastic import ContinuationChoice
from remedy.remediate import replace as decide
from remedy.remediate.operator import may_uncordon
from remedy.remediate.replace import Next, Verdict
from tasks.approvals import propose_open_loop
from tasks.cluster import (
    check_drain_budgets,
    check_drift,
    cordon_node,
    drain_node,
    label_node,
    read_node,
    read_workload_size,
    resize_workload,
    taint_node,
    uncordon_node,
    verify_joined,
    wait_for_workload,
)
from tasks.cordons import cordon_holder, keep_operator_cordon
from tasks.elastic import (
    checkpoint_before_grow,
    checkpoint_before_teardown,
    grow_workload,
    promote_hot_spare,
    refill_hot_spares,
    shrink_workload,
    weigh_continuation,
)
from tasks.gate import pass_gate, record_remediation_outcome
from tasks.health import reconfirm_fault
from tasks.leases import keeps_lease
from tasks.ledger import claim_remediation, open_incident, set_incident_status, set_node_state, sync_fleet
from tasks.notify import post_notice
from tasks.preemption import ask_to_preempt, plan_preemption, preempt
from tasks.spares import promote_spare, select_spare, validate_spare
from tasks.states import final_state
from tasks.tags import tag_this_run

__all__ = ["replace_node", "promote_spare", "recheck_fault"]


def _run_name() -> str:
    from prefect.runtime import flow_run

    from remedy.domain.names import run_name

    p = flow_run.parameters
    return run_name(f"replace {p['node']} ({p.get('cause') or p.get('signal') or 'fault'})")


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


class RunEnds(Exception):
    """The runbook stops at this step; `report` is what the run returns."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__(report.get("status"))
        self.report = report


@dataclass
class Run:
    """One replacement in progress: what every step reads and adds to."""

    node: str
    reason: str  # the cause, or the signal when none was given
    signal: str
    dry_run: bool
    settings: RemedySettings
    timeline: Timeline
    incident_id: int = 0
    outcome: dict[str, Any] = field(default_factory=dict)

    def end(self, **fields: Any) -> RunEnds:
        return RunEnds(_report(self.outcome | fields, self.timeline))

    def stop(self, verdict: Verdict) -> RunEnds:
        """End the run as a decision function said (remedy.remediate.replace)."""
        if verdict.escalate:
            set_incident_status(self.incident_id, IncidentStatus.ESCALATED.value, detail=verdict.why[:500])
        if verdict.failed_remediation:
            record_remediation_outcome(self.node, succeeded=False, incident_id=self.incident_id, dry_run=self.dry_run)
        assert verdict.outcome is not None
        return self.end(status=verdict.outcome.value, why=verdict.why,
                        **({"escalated": True} if verdict.outcome is Outcome.ESCALATED else {}))


def _replace(node: str, cause: str, signal: str, xid: int | None, gpu: int | None, incident_id: int | None,
             detected_at: str | None, dry_run: bool | None, early_warning: bool = False) -> dict[str, Any]:
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="replace", xid=xid, dry_run=dry_run)
    run = Run(node, cause or signal, signal, dry_run, settings, Timeline.starting(detected_at),
              outcome={"node": node, "dry_run": dry_run, "replacement": None})
    try:
        _attach(run, incident_id, gpu, xid, cause)  # 1. the incident, claimed once
        _open_loop(run)  # 2. an open-loop pool only proposes
        chosen = _warned_spare(run) if early_warning else None  # 3. a warned node: the spare first
        _gate(run, early_warning)  # 4. breakers, capacity budget, spare reserve; approvals
        _cordon(run)  # 5. nothing new lands on the node
        _operator_wins(run, "before the drain")  # 6. a person's uncordon wins, here and before every later step
        _recheck(run)  # the drain stops the job: the fault must still hold
        plan = _continue_elastic(run, early_warning)  # the job saves; hot swap, shrink or stop (remedy.elastic)
        _drain(run)  # 7. budgets first, then the drain; the job must be off the node
        _operator_wins(run, "after the drain")
        spare = _spare(run, chosen, plan)  # 8. same GPU model, validated, not a lemon, away from a correlated failure
        _operator_wins(run, "before promoting the spare", spare_released=spare)
        _promote(run, spare, plan)  # 9. the spare joins, the job runs on it (a shrunk job grows back)
        _operator_wins(run, "before sending the node to repair")
        _to_repair(run, spare)  # 10. the failed node to repair; the outcome back to the breaker
    except RunEnds as done:
        return done.report
    raise AssertionError("unreachable: _to_repair always ends the run")


def _attach(run: Run, incident_id: int | None, gpu: int | None, xid: int | None, cause: str) -> None:
    """Attach to the incident the receiver opened, or open it now (CLI / demo runs); a duplicate trigger stops."""
    sync_fleet()
    by_person = incident_id is None  # automation always passes the incident; a run without one was started by hand
    if incident_id is None:
        incident_id = open_incident(run.node, run.signal, gpu=gpu, xid=xid, detail=cause)["id"]
    run.incident_id = run.outcome["incident_id"] = incident_id
    why = decide.duplicate_why(incident_id, claim_remediation(incident_id, by_person=by_person))
    if why is not None:  # another run works on this incident, or it is already settled
        raise run.end(status="duplicate", why=why)


def _open_loop(run: Run) -> None:
    """Open-loop pools: gpu-remedy only proposes; an external break-fix system says when to act (seed 000)."""
    live = read_node(run.node)
    if run.dry_run or not is_open_loop(live, run.settings.ladder.open_loop_pools):
        return
    go = propose_open_loop(node=run.node, incident_id=run.incident_id, action="replace with a warm spare",
                           reason=run.reason, pool=node_pool(live),
                           timeout_seconds=run.settings.approvals.timeout_seconds)
    run.outcome["open_loop"] = {"decision": go.decision, "by": go.by}
    if not go.approved:
        raise run.end(status="proposed-not-executed", why=f"open-loop pool {node_pool(live)}: {go.decision}")


def _warned_spare(run: Run) -> dict[str, Any]:
    """A warned node still works: it is only taken out when a spare is ready, so the spare is claimed (and
    checked) first. No spare means no gate decision either: nothing enters the breaker board."""
    chosen = select_spare(run.node, incident_id=run.incident_id, dry_run=run.dry_run)
    check = validate_spare(chosen["spare"], dry_run=run.dry_run, incident_id=run.incident_id) \
        if chosen["spare"] and chosen["needs_validation"] else None
    chosen, why_not = decide.warned_spare(chosen, check)
    if why_not:
        raise _watched(run, why_not)
    return dict(chosen)


def _gate(run: Run, early_warning: bool) -> None:
    """Circuit breakers per rack/switch/PDU/cluster, capacity budget, spare reserve (remedy.safety.procedure).
    An approval answers one question; the whole gate then runs again."""
    passed = pass_gate(run.node, run.incident_id, run.reason, run.timeline.detected_at.isoformat(), run.dry_run,
                       ask=not early_warning)
    run.outcome |= passed.outcome_fields()
    verdict = decide.after_gate(passed, early_warning=early_warning)
    if verdict.next is Next.WATCH:
        raise _watched(run, verdict.why)
    if not verdict.go:
        if verdict.escalate:
            set_incident_status(run.incident_id, IncidentStatus.ESCALATED.value, detail=passed.gate)
        raise run.end(status=passed.status.value if passed.status else "", why=passed.gate)
    if passed.approvals:
        run.timeline.mark("approved")


def _cordon(run: Run) -> None:
    cordon_node(run.node, reason=run.reason, dry_run=run.dry_run, incident_id=run.incident_id)
    taint_node(run.node, dry_run=run.dry_run, add=[run.settings.taints.quarantine], incident_id=run.incident_id)
    set_node_state(run.node, NodeState.QUARANTINED.value, reason=run.reason, dry_run=run.dry_run,
                   incident_id=run.incident_id)
    run.timeline.mark("cordoned")


def _recheck(run: Run) -> None:
    if (not_needed := recheck_fault(run.node, run.incident_id, run.signal, run.dry_run, run.outcome,
                                    run.timeline)):
        raise RunEnds(not_needed)


def _continue_elastic(run: Run, early_warning: bool) -> ContinuationChoice | None:
    """A failed node of an elastic job, or one with a hot spare: the job need not wait for the spare. First it saves
    from its surviving replicas if it asks to (bounded); then a hot swap, a shrink to the survivors, or the usual
    stop and replace, whichever loses the least training. A warned node still works: none of this."""
    if early_warning:
        return None
    work = run.settings.workload
    run.outcome["checkpoint_on_failure"] = vars(checkpoint_before_teardown(work.namespace, work.job, run.node,
                                                                          run.dry_run, run.incident_id))
    plan = weigh_continuation(run.node)
    run.outcome["continuation"] = plan.as_dict()
    if plan.shrinks and plan.shrink_to is not None and plan.grow_to is not None:
        resized = shrink_workload(work.namespace, work.job, plan.shrink_to, plan.grow_to, dry_run=run.dry_run,
                                  incident_id=run.incident_id)
        if resized.get("refused"):  # its controller says no: the usual stop and replace
            run.outcome["continuation"]["refused"] = resized["refused"]
            return None
        run.timeline.mark("job shrunk")
    return plan


def _drain(run: Run) -> None:
    """Drain with a grace period so the job can checkpoint. First the budgets: one that can never allow an eviction
    stops the run before the drain (a person fixes the budget), and pods the drain could not move stop it after:
    a spare is never promoted while the job still runs on the failed node."""
    blocks = check_drain_budgets(run.node)
    if blocks:
        run.outcome["budgets"] = [b.why for b in blocks]
        raise run.stop(decide.before_drain(run.node, blocks))
    s = run.settings.drain
    drained = drain_node(run.node, grace_period_seconds=s.grace_period_seconds,
                         deadline_seconds=s.eviction_deadline_seconds, dry_run=run.dry_run,
                         incident_id=run.incident_id)
    run.outcome["drain"] = {k: drained[k] for k in ("evicted", "skipped", "not_evicted", "complete")}
    run.timeline.mark("drained")
    if not (verdict := decide.after_drain(run.node, drained)).go:
        raise run.stop(verdict)


def _spare(run: Run, chosen: dict[str, Any] | None, plan: ContinuationChoice | None = None) -> str:
    """The spare claimed for this incident (a warned swap claimed it first), validated if its check is stale; a hot
    spare already carries the job."""
    if plan is not None and plan.hot_spare:
        run.outcome |= {"replacement": plan.hot_spare, "spare_choice": f"hot spare {plan.hot_spare}, already in "
                        "the job's pool: the job moved onto it at the drain"}
        return plan.hot_spare
    choice = chosen or select_spare(run.node, incident_id=run.incident_id, dry_run=run.dry_run)
    if not choice["spare"] and plan is not None and plan.shrinks:
        raise _short(run, plan, choice["why"])
    if not choice["spare"]:
        raise RunEnds(_no_spare(run.node, choice["why"], run.incident_id, run.dry_run, run.outcome, run.timeline))
    spare = choice["spare"]
    run.outcome |= {"replacement": spare, "spare_choice": choice["why"]}
    if choice["needs_validation"]:
        check = validate_spare(spare, dry_run=run.dry_run, incident_id=run.incident_id)
        if (why := decide.spare_validation_failed(spare, check)):
            raise RunEnds(_no_spare(run.node, why, run.incident_id, run.dry_run, run.outcome, run.timeline))
    return spare


def _promote(run: Run, spare: str, plan: ContinuationChoice | None = None) -> None:
    """Untaint, label into the job's pool, check it really joined; then the job runs on it. A hot spare only drops
    its hot label (and a warm spare is made hot in its place); a shrunk job grows back onto the spare."""
    work = run.settings.workload
    hot = plan is not None and plan.hot_spare == spare
    run.outcome["joined"] = promote_hot_spare(spare, run.node, run.incident_id, run.dry_run) if hot else \
        promote_spare(spare, run.node, f"replaces {run.node}", run.incident_id, run.dry_run)
    run.timeline.mark("spare ready")
    if plan is not None and plan.shrinks:  # the grow-back restarts the job: it saves first if it asks to
        run.outcome["checkpoint_before_grow"] = vars(checkpoint_before_grow(work.namespace, work.job, spare,
                                                                            run.dry_run, run.incident_id))
        run.outcome["grown"] = grow_workload(work.namespace, work.job, dry_run=run.dry_run,
                                             incident_id=run.incident_id)
        run.timeline.mark("job grown back")
    size = wait_for_workload(work.namespace, work.job, spare, work.resume_timeout_seconds, dry_run=run.dry_run)
    run.outcome["workload"] = size
    run.timeline.mark("job resumed" if size["full"] else "spare working")
    if hot:
        run.outcome["hot_spares"] = refill_hot_spares(run.node, run.incident_id, run.dry_run)


def _short(run: Run, plan: ContinuationChoice, why: str) -> RunEnds:
    """Shrunk and no spare to grow back onto: the job keeps training one node short; a person finds a node (the
    grow-back is noted on the workload, remedy.io/full-size)."""
    set_incident_status(run.incident_id, IncidentStatus.ESCALATED.value,
                        detail=f"no spare; job continues with {plan.shrink_to} nodes (of {plan.grow_to})")
    post_notice(f":warning: gpu-remedy: {run.node} failed; the job continues with {plan.shrink_to} of "
                f"{plan.grow_to} nodes and no spare can join.\n{why}")
    return run.end(status=Outcome.SHRUNK.value, why=why, job_nodes=plan.shrink_to)


def _to_repair(run: Run, spare: str) -> None:
    """Hand the failed node to repair; the remediation is over for the breaker."""
    set_node_state(run.node, NodeState.REPAIR.value, reason=f"replaced by {spare}", dry_run=run.dry_run,
                   incident_id=run.incident_id)
    end = decide.replacement_ending(spare, run.outcome["joined"], run.outcome["workload"], run.dry_run)
    record_remediation_outcome(run.node, succeeded=end.succeeded, incident_id=run.incident_id, dry_run=run.dry_run)
    set_incident_status(run.incident_id, end.incident_status.value, detail=end.detail)
    run.timeline.mark("to repair")
    raise run.end(status=end.status)


def recheck_fault(node: str, incident_id: int, signal: str, dry_run: bool, outcome: dict[str, Any],
                  timeline: Timeline) -> dict[str, Any] | None:
    """Re-check just before acting (remedy.detect.reconfirm). A fault that no longer holds, or a monitor failure,
    puts the cordoned node back in service and ends the run, with the evidence; None: go on."""
    settings = runtime.settings()
    if not settings.reconfirm.enabled:
        return None
    check = reconfirm_fault(node, incident_id, signal, dry_run)
    outcome["recheck"] = check
    verdict = decide.after_recheck(check)
    if verdict.go or verdict.outcome is None:
        return None
    get_run_logger().warning("%s: %s — not acting; the node goes back in service", node, verdict.why)
    taint_node(node, dry_run=dry_run, remove=[settings.taints.quarantine], incident_id=incident_id)
    # only gpu-remedy's own cordon is lifted: a person's from before this run stays (issue 32, item 3)
    if may_uncordon(cordon_holder(node, dry_run=dry_run)):
        uncordon_node(node, reason=verdict.why, dry_run=dry_run, incident_id=incident_id)
    else:
        outcome["kept_cordon"] = keep_operator_cordon(node, because=verdict.why, dry_run=dry_run,
                                                      incident_id=incident_id)
    set_node_state(node, NodeState.ACTIVE.value, reason=verdict.why, dry_run=dry_run, incident_id=incident_id)
    status = verdict.outcome
    set_incident_status(incident_id, status.incident_status.value, detail=f"{status.label.lower()}: {verdict.why}")
    # the gate let this node through: it leaves the breaker board (else it would hold capacity budget for good);
    # a node found healthy is a probe that succeeded — its scope's feared cause is not on it
    record_remediation_outcome(node, succeeded=True, incident_id=incident_id, dry_run=dry_run)
    timeline.mark(status.label.lower())
    return _report(outcome | {"status": status.value, "why": verdict.why}, timeline)


def _operator_wins(run: Run, when: str, **extra: Any) -> None:
    """The operator's manual change (e.g. an uncordon) stops the run here; it is recorded, never undone. Not if the
    operator took the node back before the promotion: the claim lapses with the incident, the spare stays a spare."""
    drift = check_drift(run.node)
    if not drift or run.dry_run:
        return
    get_run_logger().warning("%s: %s %s — stopping, the operator's change stands", run.node, drift["what"], when)
    set_incident_status(run.incident_id, IncidentStatus.ESCALATED.value,
                        detail=f"operator ({when}): {drift['detail']}")
    record_remediation_outcome(run.node, succeeded=False, incident_id=run.incident_id, dry_run=run.dry_run)
    run.timeline.mark("stopped by operator")
    report = _report(run.outcome | {"status": Outcome.STOPPED_BY_OPERATOR.value, "drift": drift,
                                    "why": f"{drift['what']} {when}: the operator's change stands"}, run.timeline)
    raise RunEnds(report | extra)


def _watched(run: Run, why: str) -> RunEnds:
    """A warned swap that did not happen: the node was not touched and keeps working; its warning is watched and
    the next warning (or the failure) is weighed again. No repair, no preemption, no page."""
    get_run_logger().warning("%s: not swapped on the early warning: %s; it keeps working and is watched", run.node,
                             why)
    run.timeline.mark("watched")
    return run.end(status=Outcome.WATCHED.value, why=why)


def _no_spare(node: str, why: str, incident_id: int, dry_run: bool, outcome: dict[str, Any],
              timeline: Timeline) -> dict[str, Any]:
    """No spare: never a half-replacement. A gang job that cannot start without all its nodes may get one back by
    preempting lower-priority work (a person approves by default); else elastic jobs may shrink inside min:max;
    otherwise escalate."""
    settings = runtime.settings()
    get_run_logger().error("no spare for %s: %s", node, why)
    if settings.spares.preempt_when_no_spare:
        done, why = _try_preemption(node, why, incident_id, dry_run, outcome, timeline)
        if done is not None:
            return done
    shrunk, why = _try_shrink(why, incident_id, dry_run, outcome, timeline)
    if shrunk is not None:
        return shrunk
    set_incident_status(incident_id, IncidentStatus.ESCALATED.value, detail=f"no spare: {why}")
    record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
    post_notice(f":rotating_light: gpu-remedy: {node} is quarantined and drained but no spare can replace it.\n{why}")
    return _report(outcome | {"status": "no-spare", "why": why}, timeline)


def _try_preemption(node: str, why: str, incident_id: int, dry_run: bool, outcome: dict[str, Any],
                    timeline: Timeline) -> tuple[dict[str, Any] | None, str]:
    """Preempt lower-priority work on a healthy node rather than retry into a job that cannot start (seed 002).
    (the report, or None and why not)."""
    plan = plan_preemption(node, incident_id, dry_run)
    outcome["preemption"] = {k: plan[k] for k in ("plan", "victims", "freed_nodes", "explain")}
    if not plan["plan"]:
        return None, f"{why}\n{plan['explain']}"
    decision = ask_to_preempt(plan, node, incident_id, dry_run)
    outcome["preemption"]["approval"] = decision
    if not decide.preemption_goes(decision):
        return None, f"{why}\n{decide.preemption_refused(decision, plan['explain'])}"
    done = _preempt_and_resume(node, plan, incident_id, dry_run, outcome, timeline)
    if done is not None:
        return done, why
    return None, f"{why}\npreemption did not free a node: {outcome['preemption']['result']['blocked']}"


def _try_shrink(why: str, incident_id: int, dry_run: bool, outcome: dict[str, Any],
                timeline: Timeline) -> tuple[dict[str, Any] | None, str]:
    """An elastic job continues one node short inside its min:max, if its controller agrees."""
    work = runtime.settings().workload
    if not work.min_nodes or work.when_no_spare != "shrink":
        return None, why
    nodes = decide.shrink_to(read_workload_size(work.namespace, work.job).desired, work.min_nodes,
                             work.when_no_spare)
    if nodes is None:
        return None, why
    resized = resize_workload(work.namespace, work.job, nodes, dry_run=dry_run, incident_id=incident_id)
    if resized.get("refused"):
        return None, f"{why}\ncannot shrink the job: {resized['refused']}"  # its controller says no: a person decides
    timeline.mark("job shrunk")
    set_incident_status(incident_id, IncidentStatus.ESCALATED.value,
                        detail=f"no spare; job continues with {nodes} nodes (min {work.min_nodes})")
    return _report(outcome | {"status": "shrunk", "why": why, "job_nodes": nodes}, timeline), why


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
    end = decide.replacement_ending(freed, joined, size, dry_run, preempted=victims)
    record_remediation_outcome(node, succeeded=end.succeeded, incident_id=incident_id, dry_run=dry_run)
    set_incident_status(incident_id, end.incident_status.value, detail=end.detail)
    timeline.mark("to repair")
    return _report(outcome | {"status": end.status}, timeline)


def _report(outcome: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    """The story of the run: a timeline table artifact and a markdown summary."""
    rows = timeline.rows()
    node = outcome["node"]
    create_table_artifact(key=artifact_key("replace", node, "timeline"), table=rows, description=f"Replacement timeline for {node}")
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
    create_markdown_artifact(key=artifact_key("replace", node, "story"), markdown="\n".join(story), description="What happened")
    outcome["timeline"] = rows
    outcome["finished_at"] = datetime.now(UTC).isoformat()
    return outcome
