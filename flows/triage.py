"""Triage one incident: classify it, decide the path, start that remediation as a subflow, explain why.

    load incident → gates (handled? stale? node already out?) → classify → claim → artifact → subflow → close

Started by the `remedy.incident.opened` event trigger (remedy.deployments) with parameters from the event, or by
hand. The claim makes one incident one remediation even when the event arrives twice. The remediation flows are
imported when needed (`remediation_flow`: path → flow, typed).
"""

from __future__ import annotations

from typing import Any

from prefect import Flow, flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.detect.signals import is_early_warning
from remedy.domain import names
from remedy.domain.model import IncidentStatus, Node, utcnow
from remedy.domain.outcome import Outcome
from remedy.domain.xid import RemediationPath
from remedy.receiver.triage_policy import (
    Choice,
    Decision,
    TriageAction,
    WarningVerdict,
    Weigh,
    already_handled,
    closing,
    decide,
    explain_markdown,
    foreign_ledger,
    not_ready_seconds,
    not_ready_without_duration,
    parse_incident_id,
    parse_time,
    replace_now,
    settle,
    wants_not_ready_choice,
    what_to_weigh,
    with_not_ready_duration,
)
from remedy.remediate.choice import WarningAction
from remedy.remediate.results import RemediationChoice
from remedy.settings.triage import triage_settings
from tasks.cluster import release_intake_quarantine, wait_for_checkpoint
from tasks.leases import keeps_lease
from tasks.states import final_state, run_subflow
from tasks.tags import tag_this_run
from tasks.triage import (
    choose_remediation,
    claim_incident,
    close_incident,
    read_incident,
    read_live_node,
    weigh_warning,
)


def _run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    what = f"XID {p['xid']}" if str(p.get("xid") or "").strip() else (p.get("signal") or "")
    return names.run_name(f"triage {p.get('node') or 'incident ' + str(p['incident_id'])} {what}".strip())


def artifact_key(incident: dict[str, Any]) -> str:
    """Artifact keys allow lowercase letters, digits and dashes only."""
    return names.artifact_key("triage", incident["node"], "incident", incident["id"])


@flow(name="triage", flow_run_name=_run_name, log_prints=False)
@keeps_lease  # alive while it runs; a killed run's incident is taken over (tasks.leases)
def triage(
    incident_id: int | str,
    node: str = "",
    signal: str = "",
    xid: int | str | None = "",
    detected_at: str = "",
    event_id: str = "",
    dry_run: bool | None = None,
    ledger: str = "",
):
    log = get_run_logger()
    settings = runtime.settings()
    t = triage_settings(settings)
    dry_run = settings.dry_run if dry_run is None else dry_run
    incident_id = parse_incident_id(incident_id)
    # 0. Whose incident: an event from another ledger (a second stack on this Prefect server, or this ledger before
    #    a reset) names an incident number that means something else here: touch nothing.
    foreign = foreign_ledger(ledger, runtime.ledger().identity())
    if foreign:
        log.warning("incident %s: %s", incident_id, foreign)
        return final_state({"incident_id": incident_id, "node": node, "dry_run": dry_run,
                            "status": Outcome.DUPLICATE.value, "why": foreign})

    # 1. What was seen: the incident as the ledger has it (the event only points at it).
    facts = read_incident(incident_id, t.recurrence_lookback_hours)
    incident = facts.incident
    node = incident["node"]
    tag_this_run(node, stage="triage", xid=incident.get("xid"), dry_run=dry_run)

    # 2. The live node where the incident alone cannot tell: a stale incident, a NotReady without a duration.
    now = utcnow()
    detected = parse_time(detected_at) or incident["first_seen"]
    incident, live, not_ready = _look_at_node(incident, facts.node_state, now, detected, settings)

    # 3. Decide (plain Python: remedy.receiver.triage_policy), the NotReady choice weighed in.
    decision = replace_now(decide(
        incident, recurrences=facts.recurrences, node_state=facts.node_state, now=now, detected_at=detected,
        max_age_seconds=t.max_incident_age_seconds, live_node=live, thresholds=settings.signals,
        orphaned=facts.orphaned, resumes=facts.resumes, recovering=facts.recovering),
        _choice(not_ready))
    result: dict[str, Any] = {"incident_id": incident_id, "node": node, "dry_run": dry_run, **decision.to_dict()}
    if not_ready:
        _options(result, incident, not_ready, "NotReady: waiting for the node against the spare, by expected downtime")

    # 4. Claim: only one run acts on one incident (duplicate triggers stop here).
    if already_handled(decision, incident):
        _explain(incident, decision, "nothing done")
        _release(incident, f"incident already {incident['status']}", dry_run, log)
        return result | {"status": "already-handled"}
    if not claim_incident(incident_id):
        log.info("incident %s is being handled by another run; nothing to do", incident_id)
        _explain(incident, decision, "another run holds this incident; nothing done")
        return result | {"status": "duplicate"}

    # 5. Weigh what the decision leaves open (an early warning's swap, a spare against an in-place fix), then act on
    #    the one decision the policy settles on.
    decision = _settle(decision, incident, result, dry_run, settings)
    result |= {"action": decision.action.value, "path": decision.path.value if decision.path else None,
               "plan": decision.plan, "reason": decision.reason}
    if decision.action in (TriageAction.STOP, TriageAction.RECORD):
        return _record(incident, decision, result, dry_run, log)
    if decision.action is TriageAction.RECOVER:
        return final_state(result | _recover(incident, decision, dry_run, log))

    # 6. Remediate: the path's flow as a subflow (visible under this run in the UI). It tags its own run: tags
    #    entered here as a context would land on every task run too, and Prefect asks the server for a concurrency
    #    slot per tagged task run — a round trip on each step of the replacement, four of them before the cordon.
    _explain(incident, decision)
    outcome = _dispatch(decision, incident, detected_at or incident["first_seen"].isoformat(), dry_run, log,
                        early_warning=decision.early_warning)
    close = closing(decision, outcome)
    closed = close_incident(incident_id, close.status.value, close.detail, only_if_acting=True)
    # a quarantine at intake no remediation took over (held, cleared, escalated without quarantine) ends here
    _release(incident, close.detail, dry_run, log)
    # 7. Replaced first: fix the failed node in the background (the job already runs on the spare).
    if decision.recover_after and close.replaced:
        result["recovery"] = _recover_node(incident, dry_run)
    return final_state(result | {"status": close.run_status, "incident_status": closed.status.value,
                                 "outcome": outcome, "why": close.detail})


def _look_at_node(incident: dict[str, Any], node_state: str | None, now, detected, settings
                  ) -> tuple[dict[str, Any], Node | None, RemediationChoice | None]:
    """Staleness: a run that starts long after detection re-reads the live node before acting. NotReady: with a
    spare ready, the shared choose() first weighs waiting for the node against the spare (a NotReady node rarely
    comes back by itself: RESTART_BM's odds), as the simulator's policy does; without a duration in the alert,
    measure it on the live node, waiting out the NotReady grace while it is still NotReady. Returns the incident
    (with the measured duration), the live node (None when not read: a fresh incident, the policy reads none, or
    when the cluster has no such node) and the NotReady choice (or None)."""
    t = triage_settings(settings)
    node = incident["node"]
    live = read_live_node(node) if (now - detected).total_seconds() > t.max_incident_age_seconds else None
    not_ready = None
    if wants_not_ready_choice(incident, node_state, replace_first=settings.ladder.replace_first):
        now_live = read_live_node(node)
        if now_live is not None and not now_live.ready:
            not_ready = choose_remediation(node, None, incident["id"], unreachable=True, signal=incident["signal"])
    replacing = not_ready is not None and not_ready.option == RemediationPath.REPLACE.value
    if not_ready_without_duration(incident) and incident["status"] == IncidentStatus.OPEN.value and not replacing:
        incident, live = _measure_not_ready(incident, settings.signals.node_not_ready_seconds)
    return incident, live, not_ready


def _choice(chosen: RemediationChoice | None) -> Choice | None:
    return None if chosen is None else Choice(chosen.option, chosen.reason)


def _options(result: dict[str, Any], incident: dict[str, Any], chosen: RemediationChoice, description: str) -> None:
    result["choice"] = chosen.summary()
    create_markdown_artifact(key=f"{artifact_key(incident)}-options", markdown=chosen.markdown,
                             description=description)


def _settle(decision: Decision, incident: dict[str, Any], result: dict[str, Any], dry_run: bool, settings
            ) -> Decision:
    """Gather what the policy asks to weigh (tasks), and return the policy's one decision on it."""
    weigh = what_to_weigh(decision, incident, replace_first=settings.ladder.replace_first,
                          early_warning=is_early_warning(incident["signal"], incident.get("xid")))
    if weigh is Weigh.WARNING:
        return settle(decision, warning=_weigh_warning(incident, result, dry_run))
    if weigh is Weigh.EXPECTED_COST:
        # with a spare ready, replacing first usually costs the job less, and the failed node is then fixed off
        # the critical path (recover-node)
        choice = choose_remediation(incident["node"], incident["xid"], incident["id"])
        _options(result, incident, choice, "The options compared by expected job downtime, and the choice")
        return settle(decision, cost=_choice(choice))
    return decision


def _record(incident: dict[str, Any], decision: Decision, result: dict[str, Any], dry_run: bool, log
            ) -> dict[str, Any]:
    """Nothing to remediate: the incident is closed as ignored, saying why (a gate's refusal, watch, ignore)."""
    if decision.action is TriageAction.STOP:
        close_incident(incident["id"], IncidentStatus.IGNORED.value, f"triage: {decision.reason}")
        _explain(incident, decision, "recorded, no action")
        _release(incident, decision.reason, dry_run, log)
        return result | {"status": "skipped"}
    level = log.warning if decision.path is RemediationPath.WATCH else log.info
    level("%s: %s", incident["node"], decision.reason)
    path = (decision.path or RemediationPath.IGNORE).value  # a recorded decision always names watch or ignore
    close_incident(incident["id"], IncidentStatus.IGNORED.value, f"{path}: {decision.reason}")
    _explain(incident, decision, decision.plan)
    _release(incident, f"{path}: {decision.reason}", dry_run, log)
    return result | {"status": path}


def _recover(incident: dict[str, Any], decision: Decision, dry_run: bool, log) -> dict[str, Any]:
    """A gone run's background repair, carried on: the job already runs on the spare (its replacement is done)."""
    log.warning("%s: %s", incident["node"], decision.reason)
    _explain(incident, decision)
    recovery = _recover_node(incident, dry_run)
    closed = close_incident(incident["id"], IncidentStatus.RESOLVED.value,
                            f"replaced; background repair: {recovery.get('why') or recovery.get('status')}",
                            only_if_acting=True)
    return {"status": Outcome.REPLACED.value, "recovery": recovery, "incident_status": closed.status.value,
            "why": decision.reason}


def _recover_node(incident: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    from flows.recover_node import recover_node

    return run_subflow(recover_node, incident["node"], xid=incident.get("xid"), gpu=incident.get("gpu"),
                       incident_id=incident["id"], dry_run=dry_run)


def _weigh_warning(incident: dict[str, Any], result: dict[str, Any], dry_run: bool) -> WarningVerdict:
    """The warned node's options by expected job minutes lost (artifact); acting waits for the checkpoint boundary
    (asking for one when the next is too far)."""
    work = runtime.settings().workload
    warned = weigh_warning(incident["node"], incident["id"])
    result["warning"] = warned.summary()
    if warned.markdown:
        create_markdown_artifact(key=f"{artifact_key(incident)}-options", markdown=warned.markdown,
                                 description="Early warning: a swap at a checkpoint boundary against waiting for the "
                                             "failure, by expected job minutes lost")
    if not warned.acts or warned.wait_for_checkpoint_seconds is None:
        return WarningVerdict(acts=False, why=warned.why)
    boundary = wait_for_checkpoint(work.namespace, work.job, incident["node"],
                                   ask=warned.action is WarningAction.CHECKPOINT_NOW,
                                   timeout_seconds=warned.wait_for_checkpoint_seconds, dry_run=dry_run,
                                   incident_id=incident["id"])
    result["checkpoint"] = boundary.to_dict()
    return WarningVerdict(acts=True, why=warned.why, boundary_reached=boundary.reached, boundary_why=boundary.why)


def _release(incident: dict[str, Any], why: str, dry_run: bool, log) -> None:
    """Uncordon what the receiver quarantined for this incident if no remediation took it over; a failure here
    is one warning line (the node stays cordoned, which is the safe side)."""
    try:
        release_intake_quarantine(incident["node"], incident["id"], why, dry_run)
    except Exception as exc:  # noqa: BLE001
        log.warning("%s: the quarantine at intake could not be released (%s); it stays cordoned — uncordon it "
                    "by hand if it is healthy", incident["node"], exc)


def _measure_not_ready(incident: dict[str, Any], grace_seconds: float) -> tuple[dict[str, Any], Node | None]:
    """The NotReady duration read from the live node; while it is NotReady but below the grace, wait for the rest
    of the grace (the settings' seconds, the clock every wait of the flows uses) and look again."""
    import time

    live = read_live_node(incident["node"])
    seconds = not_ready_seconds(incident, live, utcnow())
    if seconds is not None and 0 < seconds < grace_seconds:
        time.sleep(grace_seconds - seconds)
        live = read_live_node(incident["node"])
        seconds = not_ready_seconds(incident, live, utcnow())
    return (incident if seconds is None else with_not_ready_duration(incident, seconds)), live


def _explain(incident: dict[str, Any], decision: Decision, outcome: str = "") -> None:
    create_markdown_artifact(key=artifact_key(incident), markdown=explain_markdown(incident, decision, outcome),
                             description=f"Why triage chose {decision.path.value if decision.path else 'nothing'}")


FIX_IN_PLACE_PATHS = (RemediationPath.RESTART_APP, RemediationPath.RESET_GPU, RemediationPath.REBOOT)


def remediation_flow(path: RemediationPath) -> Flow[..., dict[str, Any]]:
    """The flow that carries out `path` (the one `triage_policy.PATH_FLOWS` names in the explanation; a test holds
    the two together). Imported on use, so triage's own import stays light. A path without a flow of its own
    (watch, ignore: recorded, never dispatched) goes to a person."""
    if path is RemediationPath.REPLACE:
        from flows.replace_node import replace_node
        return replace_node
    if path in FIX_IN_PLACE_PATHS:
        from flows.fix_in_place import fix_in_place
        return fix_in_place
    if path is RemediationPath.ISOLATE:
        from flows.isolate_fault import isolate_fault
        return isolate_fault
    from flows.escalate import escalate
    return escalate


def _dispatch(decision: Decision, incident: dict[str, Any], detected_at: str, dry_run: bool, log, *,
              early_warning: bool = False) -> dict[str, Any]:
    node, gpu, xid, incident_id = incident["node"], incident.get("gpu"), incident.get("xid"), incident["id"]
    path = decision.path or RemediationPath.ESCALATE  # a remediation always has a path; none is a person's call
    reason = decision.reason
    if path is RemediationPath.REPLACE:
        cause = f"XID {xid}" if xid is not None else incident["signal"]
        return run_subflow(remediation_flow(path), node=node, cause=cause, signal=incident["signal"], xid=xid,
                           gpu=gpu, incident_id=incident_id, detected_at=detected_at, dry_run=dry_run,
                           early_warning=early_warning)
    if path in FIX_IN_PLACE_PATHS:
        if xid is not None:
            return run_subflow(remediation_flow(path), node, xid, gpu, incident_id=incident_id, dry_run=dry_run,
                               detected_at=detected_at)
        # fix-in-place walks the XID's ladder; a non-XID signal (row remap pending, NVLink) has none yet
        reason = f"{path.value} for signal {incident['signal']} needs a human: fix-in-place takes an XID"
        path = RemediationPath.ESCALATE
    if path is RemediationPath.ISOLATE:
        # a NaN loss or a collective timeout names the job, not the node: every node of the job is a suspect
        work = runtime.settings().workload
        suspects = sorted(set(runtime.cluster().workload_nodes(work.namespace, work.job)) | {node})
        isolated: dict[str, Any] = remediation_flow(path)(suspects, incident_id=incident_id, dry_run=dry_run)
        return isolated
    out = run_subflow(remediation_flow(RemediationPath.ESCALATE), node, reason, incident_id=incident_id,
                      dry_run=dry_run, quarantine=decision.quarantine)
    return out | {"escalated": True, "reason": reason}
