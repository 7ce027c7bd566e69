"""Replace a failed GPU node with a warm spare — the operator's runbook as a Prefect flow.

    incident → gate → cordon + quarantine → drain (grace period) → select spare → promote spare
             → validate spare if stale → job back to full size → failed node to repair → report

Each step is one task that writes the ledger as it acts, so a re-run (duplicate trigger, crash) replays finished
steps instead of repeating them: one incident gets at most one replacement. Before touching the failed node again
the flow re-reads it; an operator's manual uncordon wins and is recorded, never undone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.domain.model import NodeState
from remedy.domain.timeline import Timeline
from tasks.cluster import check_drift, cordon_node, drain_node, label_node, taint_node, wait_for_workload
from tasks.ledger import open_incident, set_node_state, sync_fleet
from tasks.spares import select_spare


def _run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    cause = p.get("cause") or "fault"
    return f"replace {p['node']} ({cause})"


@flow(name="replace-node", flow_run_name=_run_name, log_prints=False)
def replace_node(
    node: str,
    cause: str = "",
    signal: str = "xid",
    xid: int | None = None,
    gpu: int | None = None,
    incident_id: int | None = None,
    detected_at: str | None = None,
    dry_run: bool | None = None,
    workload_namespace: str = "training",
    workload_job: str = "llm-pretrain",
    workload_timeout_seconds: float = 600.0,
) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    timeline = Timeline.starting(detected_at)
    outcome: dict[str, Any] = {"node": node, "dry_run": dry_run, "replacement": None}

    # 1. Incident: attach to the one the receiver opened, or open it now (CLI / demo runs).
    sync_fleet()
    if incident_id is None:
        incident = open_incident(node, signal, gpu=gpu, xid=xid, detail=cause)
        incident_id = incident["id"]
    outcome["incident_id"] = incident_id

    # 2. Gate: circuit breaker and capacity budget (deepened by the remediation issue).

    # 3. Cordon and quarantine: nothing new lands on the node.
    cordon_node(node, reason=cause or signal, dry_run=dry_run, incident_id=incident_id)
    taint_node(node, dry_run=dry_run, add=[settings.taints.quarantine], incident_id=incident_id)
    set_node_state(node, NodeState.QUARANTINED.value, reason=cause or signal, dry_run=dry_run, incident_id=incident_id)
    timeline.mark("cordoned")

    # 4. Drain with a grace period so the job can checkpoint. A person who uncordoned the node meanwhile wins.
    drift = check_drift(node)
    if drift and not dry_run:
        log.warning("%s: %s — stopping, the operator's change stands", node, drift["what"])
        return _report(outcome | {"status": "stopped-by-operator", "drift": drift}, timeline)
    drained = drain_node(
        node, grace_period_seconds=settings.drain.grace_period_seconds,
        deadline_seconds=settings.drain.eviction_deadline_seconds, dry_run=dry_run, incident_id=incident_id,
    )
    outcome["drain"] = {k: drained[k] for k in ("evicted", "skipped", "not_evicted", "complete")}
    timeline.mark("drained")

    # 5. Select a spare: same GPU model, validated, not a lemon, away from a correlated failure.
    choice = select_spare(node, incident_id=incident_id)
    if not choice.get("spare"):
        log.error("no spare for %s: %s", node, choice.get("why"))
        return _report(outcome | {"status": "no-spare", "why": choice.get("why")}, timeline)
    spare = choice["spare"]
    outcome["replacement"] = spare
    outcome["spare_choice"] = choice.get("why")

    # 6. Promote the spare: untaint, label into the job's pool.
    taint_node(spare, dry_run=dry_run, remove=[settings.taints.spare], incident_id=incident_id)
    label_node(spare, {settings.labels.pool: settings.labels.job_pool_value}, dry_run=dry_run, incident_id=incident_id)
    set_node_state(spare, NodeState.ACTIVE.value, reason=f"replaces {node}", dry_run=dry_run, incident_id=incident_id)
    timeline.mark("spare ready")

    # 7. Resume the workload: the gang-scheduled job back at full size.
    size = wait_for_workload(workload_namespace, workload_job, workload_timeout_seconds, dry_run=dry_run)
    outcome["workload"] = size
    if size["full"] or dry_run:
        timeline.mark("job resumed")

    # 8. Hand the failed node to repair.
    set_node_state(node, NodeState.REPAIR.value, reason=f"replaced by {spare}", dry_run=dry_run, incident_id=incident_id)
    timeline.mark("to repair")

    status = "replaced" if size["full"] else "replaced-job-not-full"
    return _report(outcome | {"status": "planned" if dry_run else status}, timeline)


def _report(outcome: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    """Timeline to the run (table artifact) and a short story (markdown artifact)."""
    rows = timeline.rows()
    node = outcome["node"]
    create_table_artifact(key=f"replace-{node}-timeline", table=rows, description=f"Replacement timeline for {node}")
    story = [f"### {node}: {outcome.get('status')}", ""]
    if outcome.get("replacement"):
        story.append(f"- replacement: **{outcome['replacement']}** — {outcome.get('spare_choice', '')}")
    if outcome.get("why"):
        story.append(f"- why nothing was replaced: {outcome['why']}")
    if outcome.get("dry_run"):
        story.append("- dry-run: every step planned and recorded, nothing changed")
    story += ["", "| step | at | since detection |", "|---|---|---|"]
    story += [f"| {r['step']} | {r['at']} | {r['since_detection_s']} s |" for r in rows]
    create_markdown_artifact(key=f"replace-{node}-story", markdown="\n".join(story), description="What happened")
    outcome["timeline"] = rows
    outcome["finished_at"] = datetime.now(timezone.utc).isoformat()
    return outcome
