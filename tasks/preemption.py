"""No spare ready: free a healthy node for the gang-scheduled job by preempting lower-priority work (seed 002 §4.3.5).

`plan_preemption` gathers the facts (GPU workloads from the cluster, the training job's priority, the nodes the job
may not use: unhealthy, cordoned, in another lifecycle state, another GPU model, promised to another incident) and
asks the pure choice in `remedy.spares.preemption`; the plan is recorded in the ledger, so a re-run of the incident
gets the same plan back. `preempt` carries it out, one ledger action per victim (a re-run never preempts twice).

Fencing (remedy.safety.fence): a preemption for an incident is checked right before each victim on the incident's
node, the one a takeover fences when it claims the incident; a run that lost its incident preempts nothing. The
victims' own nodes are not fenced: they belong to other work, and the check on the failed node is the one a
takeover is sure to have changed. The residual window is the one of every non-Node call (from the check to the
eviction or the suspend: one request). Without an incident (a person's run) nothing is fenced.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from prefect import task

from remedy import runtime
from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from remedy.safety.fence import NodeFence
from remedy.spares.preemption import NoPreemption, Workload, choose_preemption
from remedy.spares.results import Preempted
from tasks.leases import node_fence
from tasks.ledger import act
from tasks.retry import retrying

RETRY = retrying(1, 2, 4)  # as the cluster tasks: the API server may blink

PLAN_KIND = "plan_preemption"
PREEMPT_KIND = "preempt_workload"
NOT_FOR_THE_JOB = (NodeState.SPARE, NodeState.BURN_IN, NodeState.QUARANTINED, NodeState.REPAIR, NodeState.RETIRED)


def _promised_elsewhere(led, incident_id: int | None) -> dict[str, int]:
    """Nodes another live incident's plan already frees: never give one freed node to two failed nodes."""
    live = {IncidentStatus.OPEN, IncidentStatus.ACTING}
    out: dict[str, int] = {}
    for a in led.actions(kind=PLAN_KIND):
        if a.incident_id in (None, incident_id) or a.dry_run or a.outcome is not ActionOutcome.SUCCEEDED:
            continue
        if led.get_incident(a.incident_id).status in live:
            for n in (a.detail or {}).get("freed_nodes", []):
                out[n] = a.incident_id
    return out


def _unusable(failed: str, incident_id: int | None) -> dict[str, str]:
    """GPU nodes the training job may not be given, with why."""
    cluster, led, settings = runtime.cluster(), runtime.ledger(), runtime.settings()
    nodes = {n.name: n for n in cluster.list_gpu_nodes()}
    model = nodes[failed].gpu_model if failed in nodes else ""
    out = {failed: "the failed node"}
    for name, n in nodes.items():
        if name in out:
            continue
        try:
            state = led.get_node(name).state
        except Exception:  # not in the ledger yet: go by the pool label
            state = None
        state = state or n.state
        if not n.ready:
            out[name] = "not Ready"
        elif n.unschedulable:
            out[name] = "cordoned"
        elif state in NOT_FOR_THE_JOB:
            out[name] = f"in {state.value}"
        elif n.has_taint(settings.taints.quarantine):
            out[name] = "quarantined"
        elif model and n.gpu_model != model:
            out[name] = f"{n.gpu_model or 'unknown GPU'}, not {model}"
        elif n.gpu_count and n.allocatable_gpus < n.gpu_count:
            out[name] = f"only {n.allocatable_gpus}/{n.gpu_count} GPUs allocatable"
    for name, other in _promised_elsewhere(led, incident_id).items():
        out.setdefault(name, f"promised to incident {other}")
    return out


def _workload_json(w: Workload) -> dict[str, Any]:
    return {"name": w.name, "nodes": list(w.nodes), "priority": w.priority,
            "started_at": w.started_at.isoformat() if w.started_at else None}


@task(name="plan_preemption", task_run_name="plan-preemption-for-{node}", timeout_seconds=120, **RETRY)
def plan_preemption(node: str, incident_id: int | None, dry_run: bool) -> dict[str, Any]:
    """Which lower-priority work to preempt so the job gets a node back for `node`; jsonable, explains itself.

    `plan` is False when nothing may be preempted (`reason` says why); otherwise `victims`, `freed_nodes` and
    whether a person must approve. Recorded once per incident (a re-run gets the same plan)."""
    from tasks.gate import breaker_lock  # one lock for every decision that spends shared capacity

    settings = runtime.settings()
    work = settings.workload
    job = f"{work.namespace}/{work.job}"

    def plan() -> dict[str, Any]:
        workloads = runtime.cluster().gpu_workloads()
        mine = next((w for w in workloads if w.name == job), None)
        unusable = _unusable(node, incident_id)
        busy = {n for w in workloads if w.name != job for n in w.nodes}
        skipped = sorted(n for n in unusable if n in busy)  # only these matter to the choice; keep the record small
        base = {"job": job, "node": node, "nodes_needed": 1, "threshold": settings.spares.preempt_below_priority,
                "unusable_nodes": {n: unusable[n] for n in skipped}}
        if mine is None:
            reason = f"{job} runs no GPU pods, so its priority is unknown"
            return base | {"plan": False, "reason": reason, "victims": [], "freed_nodes": [], "passed_over": [],
                           "job_priority": None, "approval_required": False,
                           "explain": f"cannot free nodes for {job}: {reason}"}
        choice = choose_preemption(job, mine.priority, 1, workloads, settings.spares, unhealthy_nodes=unusable)
        passed = [{"name": p.name, "reason": p.reason} for p in choice.passed_over]
        notes = [f"not for {job}: " + ", ".join(f"{n} ({unusable[n]})" for n in skipped)] if skipped else []
        if isinstance(choice, NoPreemption):
            return base | {"plan": False, "reason": choice.reason, "victims": [], "freed_nodes": [],
                           "passed_over": passed, "job_priority": mine.priority, "approval_required": False,
                           "explain": "\n".join([choice.explain(), *notes])}
        return base | {"plan": True, "reason": "", "victims": [_workload_json(w) for w in choice.victims],
                       "freed_nodes": list(choice.freed_nodes), "passed_over": passed,
                       "job_priority": mine.priority, "approval_required": choice.approval_required,
                       "explain": "\n".join([choice.explain(), *notes])}

    with breaker_lock():
        return act(PLAN_KIND, node, plan, incident_id=incident_id, dry_run=dry_run)


@task(name="preempt", task_run_name="preempt-for-{node}", timeout_seconds=1800, **RETRY)
def preempt(plan: dict[str, Any], node: str, dry_run: bool, incident_id: int | None = None) -> Preempted:
    """Carry out a plan: suspend or evict each victim (one ledger action each; a re-run replays, never repeats).
    Returns what was done and which of the plan's nodes are free of its victims now."""
    settings = runtime.settings()
    grace = settings.drain.grace_period_seconds
    reason = f"no spare ready for {node}" + (f" (incident {incident_id})" if incident_id is not None else "") + \
             f": {plan['job']} needs a node"
    fence = node_fence(incident_id)
    done = []
    for victim in plan["victims"]:
        name = victim["name"]
        done.append(act(PREEMPT_KIND, name, partial(_preempt_one, node, fence, name, dry_run, grace, reason),
                        incident_id=incident_id, dry_run=dry_run))
    blocked = {k: v for d in done for k, v in (d.get("not_evicted") or {}).items()}
    stuck = {n for d in done for n in d.get("nodes", []) if n not in d.get("freed", d.get("nodes", []))}
    freed = [n for n in plan["freed_nodes"] if n not in stuck]
    return Preempted(tuple(d["workload"] for d in done), tuple(freed), blocked, tuple(done))


def _preempt_one(node: str, fence: NodeFence | None, name: str, dry_run: bool, grace: int, reason: str
                 ) -> dict[str, Any]:
    """Suspend or evict one victim, if this run still holds the incident of `node` (FenceLost if not)."""
    cluster = runtime.cluster(dry_run)
    cluster.fence_node(node, fence)
    return cluster.preempt_workload(name, grace_period_seconds=grace, reason=reason)


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
