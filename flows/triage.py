"""Triage one incident: classify it, decide the path, start that remediation as a subflow, explain why.

    load incident → gates (handled? stale? node already out?) → classify → claim → artifact → subflow → close

Started by the `remedy.incident.opened` event trigger (remedy.deployments) with parameters from the event, or by
hand. The claim makes one incident one remediation even when the event arrives twice. The remediation flows are
imported when needed, so triage works for the paths whose flow exists; a missing one escalates and says so.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.domain import names
from remedy.domain.model import IncidentStatus, utcnow
from remedy.domain.outcome import Outcome, outcome_of
from remedy.detect.signals import is_early_warning
from remedy.domain.xid import RemediationPath
from remedy.remediate.choice import WarningAction
from remedy.receiver.triage_policy import (
    PATH_FLOWS,
    Decision,
    decide,
    explain_markdown,
    not_ready_seconds,
    not_ready_without_duration,
    parse_incident_id,
    parse_time,
    with_not_ready_duration,
)
from remedy.settings.triage import triage_settings
from tasks.cluster import release_intake_quarantine, wait_for_checkpoint
from tasks.states import final_state, run_subflow
from tasks.tags import tag_this_run
from tasks.triage import (
    choose_remediation, claim_incident, close_incident, read_incident, read_live_node, weigh_warning,
)
from tasks.leases import keeps_lease

# isolate_fault ends with a verdict, not an Outcome: "infrastructure" means the bad nodes are found and held
ISOLATE_FIXED = {"isolated", "infrastructure"}


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
):
    log = get_run_logger()
    settings = runtime.settings()
    t = triage_settings(settings)
    dry_run = settings.dry_run if dry_run is None else dry_run
    incident_id = parse_incident_id(incident_id)

    # 1. What was seen: the incident as the ledger has it (the event only points at it).
    facts = read_incident(incident_id, t.recurrence_lookback_hours)
    incident, recurrences, state = facts["incident"], facts["recurrences"], facts["node_state"]
    node = incident["node"]
    tag_this_run(node, stage="triage", xid=incident.get("xid"), dry_run=dry_run)

    # 2. Staleness: a run that starts long after detection re-reads the live node before acting.
    now = utcnow()
    detected = parse_time(detected_at) or incident["first_seen"]
    live = read_live_node(node) if (now - detected).total_seconds() > t.max_incident_age_seconds else {}

    # 2b. NotReady without a duration (the alert did not say how long): measure it on the live node, waiting out
    #     the NotReady grace (signals.node_not_ready_seconds) while it is still NotReady; without this the node
    #     was only watched and the gang job stayed short.
    #     With a spare ready, the shared choose() first weighs waiting for the node against the spare (a NotReady
    #     node rarely comes back by itself: RESTART_BM's odds), as the simulator's policy does.
    not_ready = None
    if incident["signal"] == "node-not-ready" and incident["status"] == IncidentStatus.OPEN.value \
            and settings.ladder.replace_first and state not in ("repair", "retired", "quarantined"):
        now_live = read_live_node(node)
        if now_live is not None and not now_live.get("ready", True):
            not_ready = choose_remediation(node, None, incident_id, unreachable=True, signal=incident["signal"])
    replace_now = bool(not_ready) and not_ready["option"] == RemediationPath.REPLACE.value
    if not_ready_without_duration(incident) and incident["status"] == IncidentStatus.OPEN.value and not replace_now:
        incident, live = _measure_not_ready(incident, settings.signals.node_not_ready_seconds)

    # 3. Decide (plain Python: remedy.receiver.triage_policy).
    decision = decide(incident, recurrences=recurrences, node_state=state, now=now, detected_at=detected,
                      max_age_seconds=t.max_incident_age_seconds, live_node=live, thresholds=settings.signals,
                      orphaned=facts["orphaned"], resumes=facts["resumes"])
    if replace_now and decision.action == "record" and decision.path is RemediationPath.WATCH:
        entrypoint, plan = PATH_FLOWS[RemediationPath.REPLACE]
        decision = dataclasses.replace(decision, action="remediate", path=RemediationPath.REPLACE, entrypoint=entrypoint,
                                       plan=plan, reason=f"{decision.reason}; replace first: {not_ready['reason']}")
    result: dict[str, Any] = {"incident_id": incident_id, "node": node, "dry_run": dry_run, **decision.to_dict()}
    if not_ready:
        result["choice"] = {k: not_ready[k] for k in ("option", "reason", "options", "spares_ready")}
        create_markdown_artifact(key=f"{artifact_key(incident)}-options", markdown=not_ready["markdown"],
                                 description="NotReady: waiting for the node against the spare, by expected downtime")

    # 4. Claim: only one run acts on one incident (duplicate triggers stop here).
    if decision.action == "stop" and incident["status"] != IncidentStatus.OPEN.value:
        _explain(incident, decision, "nothing done")
        _release(incident, f"incident already {incident['status']}", dry_run, log)
        return result | {"status": "already-handled"}
    if not claim_incident(incident_id):
        log.info("incident %s is being handled by another run; nothing to do", incident_id)
        _explain(incident, decision, "another run holds this incident; nothing done")
        return result | {"status": "duplicate"}

    if decision.action == "stop":
        close_incident(incident_id, IncidentStatus.IGNORED.value, f"triage: {decision.reason}")
        _explain(incident, decision, "recorded, no action")
        _release(incident, decision.reason, dry_run, log)
        return result | {"status": "skipped"}
    # 4b. An early warning: swap the node at a checkpoint boundary when that loses the job less than the failure
    #     would (choose_on_warning, as the simulator's policy decides), else watch it and say why.
    recover_after = warned = False
    if is_early_warning(incident["signal"], incident.get("xid")) and decision.action == "record":
        decision, recover_after = _weigh_warning(incident, decision, result, dry_run)
        warned = decision.action == "remediate"  # a node that still works: swapped only with a spare in hand
        result |= {"action": decision.action, "path": decision.path.value, "plan": decision.plan,
                   "reason": decision.reason}
    if decision.action == "record":
        level = log.warning if decision.path is RemediationPath.WATCH else log.info
        level("%s: %s", node, decision.reason)
        close_incident(incident_id, IncidentStatus.IGNORED.value, f"{decision.path.value}: {decision.reason}")
        _explain(incident, decision, decision.plan)
        _release(incident, f"{decision.path.value}: {decision.reason}", dry_run, log)
        return result | {"status": decision.path.value}

    # 5. Choose by expected cost where the catalog allows an in-place fix: with a spare ready, replacing first
    #    usually costs the job less, and the failed node is then fixed off the critical path (recover-node).
    if decision.path in (RemediationPath.RESET_GPU, RemediationPath.REBOOT) and incident.get("xid") is not None \
            and settings.ladder.replace_first:
        choice = choose_remediation(node, incident["xid"], incident_id)
        result["choice"] = {k: choice[k] for k in ("option", "reason", "options", "spares_ready")}
        create_markdown_artifact(key=f"{artifact_key(incident)}-options", markdown=choice["markdown"],
                                 description="The options compared by expected job downtime, and the choice")
        if choice["option"] == RemediationPath.REPLACE.value:
            entrypoint, plan = PATH_FLOWS[RemediationPath.REPLACE]
            decision = dataclasses.replace(
                decision, path=RemediationPath.REPLACE, entrypoint=entrypoint,
                plan=f"{plan}; then {decision.path.value} off the critical path, burn-in, back to the spares",
                reason=f"{decision.reason}; replace first: {choice['reason']}")
            result |= {"path": decision.path.value, "plan": decision.plan, "reason": decision.reason}
            recover_after = True

    # 6. Remediate: the path's flow as a subflow (visible under this run in the UI). It tags its own run: tags
    #    entered here as a context would land on every task run too, and Prefect asks the server for a concurrency
    #    slot per tagged task run — a round trip on each step of the replacement, four of them before the cordon.
    _explain(incident, decision)
    outcome = _dispatch(decision, incident, detected_at or incident["first_seen"].isoformat(), dry_run, log,
                        early_warning=warned)
    status = str((outcome or {}).get("status", ""))
    done = outcome_of(outcome)
    if decision.path is RemediationPath.ESCALATE or (outcome or {}).get("escalated"):
        final, detail = IncidentStatus.ESCALATED, f"escalated: {(outcome or {}).get('reason', decision.reason)}"
    elif done is Outcome.WATCHED:
        final, detail = done.incident_status, f"{RemediationPath.WATCH.value}: not swapped: {outcome.get('why')}"
    elif done is not None:
        final = done.incident_status
        why = (outcome or {}).get("why") or ("the operator's change stands" if done is Outcome.STOPPED_BY_OPERATOR
                                             else done.value)
        detail = f"{decision.path.value}: {why}" if final is not IncidentStatus.ESCALATED else \
            f"{decision.path.value} ended {done.label.lower()}: a person decides ({why})"
    elif status in ISOLATE_FIXED:
        final, detail = IncidentStatus.RESOLVED, f"{decision.path.value}: {status}"
    elif status == "code":
        final, detail = IncidentStatus.IGNORED, "isolate: every batch diverges — user code or data, not the hardware"
    else:
        final, detail = IncidentStatus.ESCALATED, f"{decision.path.value} ended {status or 'without a status'}: a human decides"
    closed = close_incident(incident_id, final.value, detail, only_if_acting=True)
    # a quarantine at intake no remediation took over (held, cleared, escalated without quarantine) ends here
    _release(incident, detail, dry_run, log)
    # 7. Replaced first: fix the failed node in the background (the job already runs on the spare).
    if recover_after and done in (Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL):
        from flows.recover_node import recover_node

        result["recovery"] = run_subflow(recover_node, node, xid=incident.get("xid"), gpu=incident.get("gpu"),
                                         incident_id=incident_id, dry_run=dry_run)
    return final_state(result | {"status": status or "done", "incident_status": closed["status"], "outcome": outcome,
                                 "why": detail})


def _weigh_warning(incident: dict[str, Any], decision: Decision, result: dict[str, Any],
                   dry_run: bool) -> tuple[Decision, bool]:
    """The warned node's options by expected job minutes lost (artifact); acting waits for the checkpoint boundary
    (asking for one when the next is too far) and then replaces the node first, with the off-path fix after. Returns
    the decision to carry out and whether the node is recovered off the critical path afterwards."""
    work = runtime.settings().workload
    warned = weigh_warning(incident["node"], incident["id"])
    result["warning"] = {k: v for k, v in warned.items() if k != "markdown"}
    if warned.get("markdown"):
        create_markdown_artifact(key=f"{artifact_key(incident)}-options", markdown=warned["markdown"],
                                 description="Early warning: a swap at a checkpoint boundary against waiting for the "
                                             "failure, by expected job minutes lost")
    if not warned["acts"]:
        return dataclasses.replace(decision, reason=f"{decision.reason}; {warned['why']}"), False
    boundary = wait_for_checkpoint(work.namespace, work.job, incident["node"],
                                   ask=warned["action"] == WarningAction.CHECKPOINT_NOW.value,
                                   timeout_seconds=warned["wait_for_checkpoint_seconds"], dry_run=dry_run,
                                   incident_id=incident["id"])
    result["checkpoint"] = boundary
    if not boundary["reached"]:
        return dataclasses.replace(decision, reason=f"{decision.reason}; not swapped: {boundary['why']}, and a swap "
                                                    "between checkpoints would roll back the job's work"), False
    entrypoint, plan = PATH_FLOWS[RemediationPath.REPLACE]
    return dataclasses.replace(
        decision, action="remediate", path=RemediationPath.REPLACE, entrypoint=entrypoint,
        plan=f"{plan} at the checkpoint boundary; then reset/reboot off the critical path, burn-in, back to the spares",
        reason=f"{decision.reason}; {boundary['why']}, so the swap loses no work ({warned['why']})"), True


def _release(incident: dict[str, Any], why: str, dry_run: bool, log) -> None:
    """Uncordon what the receiver quarantined for this incident if no remediation took it over; a failure here
    is one warning line (the node stays cordoned, which is the safe side)."""
    try:
        release_intake_quarantine(incident["node"], incident["id"], why, dry_run)
    except Exception as exc:  # noqa: BLE001
        log.warning("%s: the quarantine at intake could not be released (%s); it stays cordoned — uncordon it "
                    "by hand if it is healthy", incident["node"], exc)


def _measure_not_ready(incident: dict[str, Any], grace_seconds: float) -> tuple[dict[str, Any], dict | None]:
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


def _flow(entrypoint: str):
    module, _, name = entrypoint.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ModuleNotFoundError, AttributeError):
        return None


def _dispatch(decision: Decision, incident: dict[str, Any], detected_at: str, dry_run: bool, log, *,
              early_warning: bool = False) -> dict[str, Any]:
    node, gpu, xid, incident_id = incident["node"], incident.get("gpu"), incident.get("xid"), incident["id"]
    path = decision.path
    fn = _flow(decision.entrypoint)
    if fn is None and path is not RemediationPath.ESCALATE:
        reason = f"no flow for path {path.value} yet ({decision.entrypoint} is missing): {decision.reason}"
        log.error("%s: %s", node, reason)
        path, fn = RemediationPath.ESCALATE, _flow("flows.escalate:escalate")
        decision_reason = reason
    else:
        decision_reason = decision.reason
    if path is RemediationPath.REPLACE:
        cause = f"XID {xid}" if xid is not None else incident["signal"]
        return run_subflow(fn, node=node, cause=cause, signal=incident["signal"], xid=xid, gpu=gpu,
                           incident_id=incident_id, detected_at=detected_at, dry_run=dry_run,
                           early_warning=early_warning)
    if path in (RemediationPath.RESTART_APP, RemediationPath.RESET_GPU, RemediationPath.REBOOT):
        if xid is not None:
            return run_subflow(fn, node, xid, gpu, incident_id=incident_id, dry_run=dry_run, detected_at=detected_at)
        # fix-in-place walks the XID's ladder; a non-XID signal (row remap pending, NVLink) has none yet
        decision_reason = f"{path.value} for signal {incident['signal']} needs a human: fix-in-place takes an XID"
        path, fn = RemediationPath.ESCALATE, _flow("flows.escalate:escalate")
    if path is RemediationPath.ISOLATE:
        # a NaN loss or a collective timeout names the job, not the node: every node of the job is a suspect
        work = runtime.settings().workload
        suspects = sorted(set(runtime.cluster().workload_nodes(work.namespace, work.job)) | {node})
        return fn(suspects, incident_id=incident_id, dry_run=dry_run)
    # escalate
    if fn is None:
        log.error("%s: escalating to a human (no escalate flow yet): %s", node, decision_reason)
        return {"status": "escalated", "escalated": True, "reason": decision_reason}
    out = run_subflow(fn, node, decision_reason, incident_id=incident_id, dry_run=dry_run,
                      quarantine=decision.quarantine)
    return out | {"escalated": True, "reason": decision_reason}
