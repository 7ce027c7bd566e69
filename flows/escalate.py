"""Escalate a node to a person: automation will not fix it on its own.

    incident escalated → node kept quarantined (if the fault takes it out) → Slack notice → artifact saying what
    to look at → optionally ask whether to replace it, and replace it if a person approves

Used by fix_in_place when the ladder has nothing left (CONTACT_SUPPORT, unknown XIDs, every rung failed).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.approvals import messages
from remedy.domain import names
from remedy.domain.model import IncidentStatus, NodeState
from remedy.remediate.runbook import keeps_quarantined
from remedy.safety.scopes import SkipReason
from tasks.approvals import request_approval
from tasks.cluster import cordon_node, taint_node
from tasks.gate import pass_gate
from tasks.leases import fence, keeps_lease
from tasks.ledger import open_incident, requester, set_node_state, sync_fleet
from tasks.states import final_state, run_subflow
from tasks.tags import tag_this_run


def _run_name() -> str:
    from prefect.runtime import flow_run

    return names.run_name(f"escalate {flow_run.parameters['node']}")


@flow(name="escalate", flow_run_name=_run_name, log_prints=False)
@keeps_lease  # alive while it runs; a killed run's incident is taken over (tasks.leases)
def escalate(node: str, reason: str, incident_id: int | None = None, dry_run: bool | None = None,
             quarantine: bool = True, ask_replace: bool = False,
             approval_timeout_seconds: float | None = None):
    """Ends Failed ("Escalated"): a person must act — unless a person approved a replacement that then succeeded.
    The message says whether anyone was told (Slack posted, failed, or not configured)."""
    out = _escalate(node, reason, incident_id, dry_run, quarantine, ask_replace, approval_timeout_seconds)
    return final_state(out, node=node)


def _escalate(node: str, reason: str, incident_id: int | None, dry_run: bool | None, quarantine: bool,
              ask_replace: bool, approval_timeout_seconds: float | None) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="escalate", dry_run=dry_run)
    out: dict[str, Any] = {"node": node, "reason": reason, "incident_id": incident_id, "dry_run": dry_run,
                           "status": "escalated", "replacement": None, "approval": None}

    # 1. The incident waits for a person (and the ledger knows the node, for CLI / standalone runs).
    sync_fleet()
    if incident_id is None:
        incident_id = open_incident(node, "escalation", detail=reason[:500]).id
        out["incident_id"] = incident_id
    if not dry_run:
        runtime.ledger().set_incident_status(incident_id, IncidentStatus.ESCALATED, detail=reason[:500],
                                             fence=fence(incident_id))

    # 2. Keep the node out of the pool while a person looks — through the breaker gate like any other removal.
    out["quarantined"] = quarantine and _quarantine(node, reason, incident_id, dry_run, out)

    # 3. Tell people (best effort: Slack down must not stop the escalation). The run says who was told.
    out["slack"] = _notify(node, reason, incident_id, out["quarantined"], dry_run)
    if out["slack"] != "posted":
        log.warning("%s: escalated, but nobody was notified (Slack %s): watch the Prefect UI", node, out["slack"])
    out["why"] = f"{reason} — Slack: {out['slack']}" + ("; node quarantined" if out["quarantined"]
                                                          else "; node left in service")

    # 4. What a human must look at, on the run.
    _what_to_look_at(node, reason, incident_id, out)

    # 5. Optionally: should it be replaced?
    if ask_replace and not dry_run:
        out |= _ask_replace(node, reason, incident_id, dry_run, approval_timeout_seconds)
    return out


def _quarantine(node: str, reason: str, incident_id: int, dry_run: bool, out: dict[str, Any]) -> bool:
    """In a storm the node is left as it is (the breaker's own approval asks about the whole scope); already
    quarantined: keep it so; already in repair or retired: it is out, nothing to quarantine."""
    settings = runtime.settings()
    gate = pass_gate(node, incident_id, f"escalated: {reason}"[:200], datetime.now(UTC).isoformat(),
                     dry_run, needs_spare=False, takes_node_out=True, ask=False)
    out["gate"] = gate.gate
    if not keeps_quarantined(gate.acts, gate.skip == SkipReason.ALREADY_IN_REMEDIATION):
        return False
    cordon_node(node, reason=f"escalated: {reason}"[:250], dry_run=dry_run, incident_id=incident_id)
    taint_node(node, dry_run=dry_run, add=[settings.taints.quarantine], incident_id=incident_id)
    set_node_state(node, NodeState.QUARANTINED.value, reason=f"escalated: {reason}"[:250], dry_run=dry_run,
                   incident_id=incident_id)
    return True


def _what_to_look_at(node: str, reason: str, incident_id: int, out: dict[str, Any]) -> None:
    create_markdown_artifact(key=names.artifact_key("escalate", node), description="Needs a human", markdown="\n".join([
        f"### {node} needs a human", "", f"**Why:** {reason}", "",
        f"- node {'kept quarantined (cordoned + tainted)' if out['quarantined'] else 'left in service'}",
        f"- incident: {incident_id}" + (f"; gate: {out['gate']}" if out.get("gate") else ""),
        f"- look at: `remedy ledger history {node}`, `kubectl describe node {node}`, the node's kernel log (XIDs)",
        "- then: fix by hand and uncordon, or approve a replacement, or retire the node",
    ]))


def _ask_replace(node: str, reason: str, incident_id: int, dry_run: bool,
                 approval_timeout_seconds: float | None) -> dict[str, Any]:
    """Ask a person whether to replace the node; replace it if they approve."""
    settings = runtime.settings()
    answer = request_approval(
        kind="replace", title=f"Replace {node}?", summary_markdown=f"{node} was escalated: {reason}",
        incident_id=incident_id, node=node,
        timeout_seconds=approval_timeout_seconds or settings.approvals.timeout_seconds,
        consequence=f"{node} stays quarantined; nothing was replaced")
    out: dict[str, Any] = {"approval": {"decision": answer.decision, "by": answer.by, "id": answer.approval_id}}
    if not answer.approved:
        get_run_logger().info("%s: replacement not approved (%s) — node stays as it is", node, answer.decision)
        return out
    from prefect.runtime import flow_run

    from flows.replace_node import replace_node

    # A person said go: the incident is acted on again, held by this run or the run that started it (replace_node,
    # our subflow, claims it as its ancestor's); without this a settled incident makes every remediation stand
    # down. Fenced: if another run has the incident by now, this one stops.
    f = fence(incident_id)
    runtime.ledger().set_incident_status(incident_id, IncidentStatus.ACTING,
                                         detail=f"replacement approved by {answer.by}",
                                         flow_run_id=None if f else str(flow_run.id or requester()), fence=f)
    res = run_subflow(replace_node, node=node, cause=f"escalated, approved by {answer.by}",
                      incident_id=incident_id, dry_run=dry_run)
    return out | {"replacement": res.get("replacement"), "status": res.get("status", "escalated")}


def _notify(node: str, reason: str, incident_id: int | None, quarantined: bool, dry_run: bool) -> str:
    from remedy.adapters.slack import SlackError

    notifier = messages.notifier(runtime.settings())
    if notifier is None:
        return "not configured, nobody was notified"
    if dry_run:
        return "dry-run: not posted"
    try:
        notifier.post(messages.fallback_text(f"Needs a human: {node}: {reason}"),
                      messages.escalation_blocks(node=node, reason=reason, incident_id=incident_id,
                                                 quarantined=quarantined))
        return "posted"
    except SlackError as exc:
        get_run_logger().warning("Slack: escalation notice for %s not posted: %s", node, exc)
        return f"failed: {exc}"
