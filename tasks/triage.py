"""Triage's ledger and cluster reads as Prefect tasks (one read or one write each, named verb_object)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.model import IncidentStatus, utcnow
from remedy.errors import NodeNotFound
from tasks.ledger import requester
from tasks.retry import transient_only

READ = dict(retries=2, retry_delay_seconds=[0.5, 1], retry_condition_fn=transient_only, cache_policy=NO_CACHE)


@task(name="read_incident", task_run_name="read-incident-{incident_id}", **READ)
def read_incident(incident_id: int, lookback_hours: float) -> dict[str, Any]:
    """The incident as the ledger has it now, how often this very fault was seen in the lookback (this one
    included: seed 002 §4.3.5's 'it recurs'), and the node's lifecycle state. One task: each costs a round trip."""
    led = runtime.ledger()
    incident = asdict(led.get_incident(incident_id))
    since = utcnow() - timedelta(hours=lookback_hours)
    recurrences = sum(i.fingerprint == incident["fingerprint"] for i in led.incidents(node=incident["node"], since=since))
    try:
        state = led.get_node(incident["node"]).state
    except NodeNotFound:
        state = None
    return {"incident": incident, "recurrences": max(1, recurrences), "node_state": state.value if state else None}


@task(name="read_live_node", task_run_name="read-live-{node}", **READ)
def read_live_node(node: str) -> dict[str, Any] | None:
    """The node as the cluster shows it right now; None if the cluster has no such node."""
    try:
        return asdict(runtime.cluster().get_node(node))
    except NodeNotFound:
        return None


@task(name="claim_incident", task_run_name="claim-incident-{incident_id}", **READ)
def claim_incident(incident_id: int) -> bool:
    """open → acting for this run; False if another run (or an operator) has it. One incident, one remediation."""
    from prefect.runtime import flow_run

    return runtime.ledger().claim_incident(incident_id, str(flow_run.id or requester()))


@task(name="close_incident", task_run_name="close-incident-{incident_id}-{status}", **READ)
def close_incident(incident_id: int, status: str, detail: str, only_if_acting: bool = False) -> dict[str, Any]:
    """Set the incident's final status. `only_if_acting`: leave it alone if the remediation flow already closed it
    (replace-node, fix-in-place and escalate record their own outcome)."""
    led = runtime.ledger()
    if only_if_acting and led.get_incident(incident_id).status is not IncidentStatus.ACTING:
        rec = led.get_incident(incident_id)
    else:
        rec = led.set_incident_status(incident_id, IncidentStatus(status), detail=detail[:2000])
    return {"id": rec.id, "status": rec.status.value}


@task(name="choose_remediation", task_run_name="choose-for-{node}", **READ)
def choose_remediation(node: str, xid: int, incident_id: int) -> dict[str, Any]:
    """Compare restart / reset / reboot / replace / escalate by expected job downtime (remedy.remediate.choice),
    with the fleet's own recorded fix outcomes for this fault class and whether a validated spare is ready."""
    from remedy.domain.model import NodeState
    from remedy.domain.xid import lookup
    from remedy.remediate.choice import ATTEMPT_OPTIONS, Durations, Situation, choose, odds_for

    led = runtime.ledger()
    resolution = lookup(xid).resolution
    attempts = []
    for kind in ATTEMPT_OPTIONS:
        for a in led.actions(kind=kind):
            if a.outcome.value not in ("succeeded", "failed") or a.dry_run or a.detail.get("xid") is None:
                continue
            attempts.append((kind, lookup(int(a.detail["xid"])).resolution, a.outcome.value == "succeeded"))
    spares = [n for n in led.nodes(NodeState.SPARE) if n.name != node]
    durations = Durations(reload=runtime.settings().workload.reload_minutes)
    choice = choose(Situation(resolution=resolution, odds=odds_for(resolution, attempts), spare_ready=bool(spares),
                              durations=durations))
    return choice.to_dict() | {"markdown": choice.markdown(), "spares_ready": len(spares)}
