"""Triage's ledger and cluster reads as Prefect tasks (one read or one write each, named verb_object)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from prefect import task

from remedy import runtime
from remedy.domain.model import ActionOutcome, IncidentStatus, Node, utcnow
from remedy.errors import NodeNotFound
from remedy.ledger.errors import LeaseLost
from remedy.ledger.leases import REANNOUNCE_KIND
from remedy.remediate.results import ClosedIncident, IncidentFacts, RemediationChoice, WarningWeighed
from remedy.remediate.runbook import BACKGROUND_REPAIR_KIND
from tasks.ledger import requester, took_over
from tasks.retry import retrying

if TYPE_CHECKING:  # remedy.warn imports pandas; triage's import stays light
    from remedy.warn.record import DetectorRecord

READ = retrying(0.5, 1)


@task(name="read_incident", task_run_name="read-incident-{incident_id}", **READ)
def read_incident(incident_id: int, lookback_hours: float) -> IncidentFacts:
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
    return IncidentFacts(incident=incident, recurrences=max(1, recurrences),
                         node_state=state.value if state else None, **resumption(led, incident))


def resumption(led, incident: dict[str, Any]) -> dict[str, bool]:
    """Is this incident's remediation to be continued rather than started? `orphaned`: it is acting under a run
    that is gone (its lease expired: the process was killed); `resumes`: a gone run of this very incident already
    cordoned its node (re-announced by the watchdog, or orphaned), so the node being out of service or cordoned is
    its own doing, not a sign that someone else dealt with it."""
    holder = incident.get("flow_run_id") or ""
    orphaned = incident["status"] == IncidentStatus.ACTING.value and bool(holder) and led.run_gone(holder) is not None
    reannounced = incident["status"] == IncidentStatus.OPEN.value and any(
        True for _ in led.actions(incident_id=incident["id"], kind=REANNOUNCE_KIND))
    cordoned = any(not a.dry_run and a.outcome is ActionOutcome.SUCCEEDED
                   for a in led.actions(incident_id=incident["id"], kind="cordon_node"))
    # the gone run had replaced the node and was repairing it off the critical path (recover-node's marker)
    recovering = (orphaned or reannounced) and any(
        not a.dry_run for a in led.actions(incident_id=incident["id"], kind=BACKGROUND_REPAIR_KIND))
    return {"orphaned": orphaned, "resumes": (orphaned or reannounced) and cordoned, "recovering": recovering}


@task(name="read_live_node", task_run_name="read-live-{node}", **READ)
def read_live_node(node: str) -> Node | None:
    """The node as the cluster shows it right now; None if the cluster has no such node."""
    try:
        return runtime.cluster().get_node(node)
    except NodeNotFound:
        return None


@task(name="claim_incident", task_run_name="claim-incident-{incident_id}", **READ)
def claim_incident(incident_id: int) -> bool:
    """open → acting for this run, or taken over from a run that is gone (its lease expired); False if another live
    run (or an operator) has it. One incident, one remediation."""
    from prefect.runtime import flow_run

    from tasks.leases import hold_incident_node

    claim = runtime.ledger().claim(incident_id, str(flow_run.id or requester()))
    if claim.claimed:
        # this run's fence on the node at once (remedy.safety.fence), as claim_remediation does: a run that held the
        # incident before is refused by the API server from now on, whatever triage then decides (watch, escalate)
        hold_incident_node(incident_id, _dry_run_of_this_run())
        if claim.took_over_from:
            took_over(claim, incident_id)
    return claim.claimed


def _dry_run_of_this_run() -> bool:
    """The flow's own dry_run parameter (None: the configured default): a dry run writes no fence either."""
    from prefect.runtime import flow_run

    dry = (flow_run.parameters or {}).get("dry_run") if flow_run.id else None
    return runtime.settings().dry_run if dry is None else bool(dry)


@task(name="close_incident", task_run_name="close-incident-{incident_id}-{status}", **READ)
def close_incident(incident_id: int, status: str, detail: str, only_if_acting: bool = False) -> ClosedIncident:
    """Set the incident's final status. `only_if_acting`: leave it alone if the remediation flow already closed it
    (replace-node, fix-in-place and escalate record their own outcome), or if another live run holds it now (this
    run's was found gone and the incident taken over)."""
    from prefect.runtime import flow_run

    from tasks.leases import ensure_held, fence

    ensure_held()
    led = runtime.ledger()
    rec = led.get_incident(incident_id)
    holder = rec.flow_run_id
    lease = led.get_lease(holder) if holder and holder != str(flow_run.id or "") else None
    # judged on the ledger's lease clock (a lease was read: there is a holder)
    taken = lease is not None and holder is not None and led.run_gone(holder) is None
    if not (only_if_acting and (rec.status is not IncidentStatus.ACTING or taken)):
        try:  # fenced: decided inside the write whether this run still speaks for the incident
            rec = led.set_incident_status(incident_id, IncidentStatus(status), detail=detail[:2000],
                                          fence=fence(incident_id))
        except LeaseLost:
            if not only_if_acting:
                raise
            rec = led.get_incident(incident_id)  # another run has it now: its word stands
    return ClosedIncident(rec.id, rec.status)


def recorded_fix_attempts(led) -> list[tuple[str, Any, bool]]:
    """The fleet's recorded in-place fixes `(action kind, fault class, cleared?)`: each fix's latest finished
    attempts (triage.odds_from_latest of them — bounded, however long the history), from fix-in-place's rungs and
    recover-node's off-path fixes alike. What `odds_for` learns the per-class fix odds from."""
    from remedy.domain.xid import lookup
    from remedy.ledger.recent import latest_outcomes
    from remedy.remediate.choice import ATTEMPT_OPTIONS
    from remedy.settings.triage import triage_settings

    latest = triage_settings(runtime.settings()).odds_from_latest
    attempts = []
    for kind in ATTEMPT_OPTIONS:
        for ok, detail in latest_outcomes(led, kind, latest):
            if detail.get("xid") is not None:
                attempts.append((kind, lookup(int(detail["xid"])).resolution, ok))
    return attempts


@task(name="choose_remediation", task_run_name="choose-for-{node}", **READ)
def choose_remediation(node: str, xid: int | None, incident_id: int, tried_depth: int = -1,
                       unreachable: bool | None = None, signal: str = "") -> RemediationChoice:
    """Compare restart / reset / reboot / replace / escalate by expected job downtime (remedy.remediate.choice),
    with the fleet's own recorded fix outcomes for this fault class and whether a validated spare is ready.
    `tried_depth`: the deepest in-place fix (index into DEPTHS) that already failed on this incident, so only
    deeper ones are offered; `unreachable`: the node is NotReady (a restart means waiting for it to come back);
    None reads it from the live node. Without an XID, `signal`'s class decides the odds (NotReady: a reboot's)."""
    from remedy.domain.model import NodeState
    from remedy.domain.xid import Resolution, lookup
    from remedy.remediate.choice import SIGNAL_RESOLUTION, Durations, Situation, choose, odds_for

    led = runtime.ledger()
    resolution = lookup(xid).resolution if xid is not None else SIGNAL_RESOLUTION.get(signal, Resolution.UNKNOWN)
    attempts = recorded_fix_attempts(led)
    spares = [n for n in led.nodes(NodeState.SPARE) if n.name != node]
    settings = runtime.settings()
    if unreachable is None:
        try:
            unreachable = not runtime.cluster().get_node(node).ready
        except NodeNotFound:
            unreachable = True
    durations = Durations(reload=settings.workload.reload_minutes,
                          not_ready_grace=settings.signals.node_not_ready_seconds / 60)
    choice = choose(Situation(resolution=resolution, odds=odds_for(resolution, attempts), spare_ready=bool(spares),
                              durations=durations, tried_depth=tried_depth, unreachable=unreachable))
    return RemediationChoice(option=choice.option.value, reason=choice.reason,
                             options=[c.to_dict() for c in choice.costs], spares_ready=len(spares),
                             tried_depth=tried_depth, unreachable=unreachable, markdown=choice.markdown())


@task(name="weigh_warning", task_run_name="weigh-warning-{node}", **READ)
def weigh_warning(node: str, incident_id: int | None = None) -> WarningWeighed:
    """An early warning on `node`: swap it at the job's next checkpoint boundary (or at one asked for now), or wait
    for the failure — whichever loses the job fewer expected minutes (remedy.remediate.choice.choose_on_warning, the
    function the simulator's policy calls). Reads the job's checkpoint cadence from its workload (the handshake in
    remedy.domain.checkpoints), whether a spare is ready above the breaker's reserve, and how often the warning's
    detector was right before (remedy.warn.record, from the ledger's incidents)."""
    import math

    from remedy.domain.model import NodeState
    from remedy.remediate.choice import Durations, WarningAction, WarningChoice, choose_on_warning
    from remedy.spares.lemons import lemon_candidates
    from remedy.spares.pool import size_pool
    from remedy.spares.warned import spare_for_warning
    from remedy.warn.record import keep_checking

    settings = runtime.settings()
    work, warn = settings.workload, settings.lemon.early_warning
    cluster, led = runtime.cluster(), runtime.ledger()
    now = utcnow()
    if not cluster.workload_running_on(work.namespace, work.job, node):
        return WarningWeighed(node, WarningAction.WAIT, acts=False,
                              why=f"{node} does not run the job {work.namespace}/{work.job}: no work to lose, nothing "
                                  "to swap; the warning is watched")
    seen = cluster.workload(work.namespace, work.job).checkpoints()
    to_next = seen.minutes_to_next(now)
    if to_next is None or seen.interval_seconds is None:  # not published
        return WarningWeighed(node, WarningAction.WAIT, acts=False,
                              why=f"not swapped: {seen.why_unpublished()}, and a swap between checkpoints would roll "
                                  "back the job's work; the warning is watched")
    held = set(lemon_candidates(led))
    spares = [n.name for n in led.nodes(NodeState.SPARE) if n.name != node and n.name not in held]
    reserve = settings.breaker.spare_reserve
    # a warning is a bet: it may take a spare only while the pool keeps what failures need (the simulator's rule)
    lend = spare_for_warning(len(spares), size_pool(len(led.nodes(NodeState.ACTIVE)), len(spares),
                                                    settings.spares).target, reserve)
    record = _detector_record(led, incident_id, now)
    choice: WarningChoice = choose_on_warning(
        precision=record.precision, lead_minutes=warn.act_lead_minutes,
        minutes_to_next_checkpoint=to_next,
        checkpoint_interval_minutes=seen.interval_seconds / 60.0,
        checkpoint_cost_minutes=work.checkpoint_cost_minutes,
        spare_ready=lend.allowed, durations=Durations(reload=work.reload_minutes),
        job_mtbf_minutes=warn.job_mtbf_hours * 60.0 if warn.job_mtbf_hours else math.inf)
    wait_minutes = (to_next if choice.action is WarningAction.AT_NEXT_CHECKPOINT
                    else work.checkpoint_cost_minutes) + warn.checkpoint_wait_margin_minutes
    weighed = WarningWeighed(
        node, choice.action, acts=choice.acts, why=choice.arithmetic if lend.allowed else lend.why,
        act_cost_minutes=choice.act_cost_minutes, wait_cost_minutes=choice.wait_cost_minutes,
        spares_ready=len(spares), spare_reserve=reserve, minutes_to_next_checkpoint=round(to_next, 2),
        detector=record.detector, precision=round(record.precision, 4),
        precision_judged=record.judged, precision_followed=record.followed,
        wait_for_checkpoint_seconds=round(wait_minutes * 60.0, 1),
        markdown=choice.markdown() + ("" if lend.allowed else f"\n\n{lend.why}.") + "\n\n" + record.sentence())
    checking = keep_checking(record, act_minutes=choice.act_cost_minutes,
                             wait_minutes=choice.wait_cost_minutes) if choice.acts else None
    # acting would pay on the prior, but the detector's own record must show it first
    return weighed.held_for_record(checking) if checking else weighed


def _detector_record(led, incident_id: int | None, now) -> DetectorRecord:
    """The warning's detector and its record: past warnings of the lemon lookback window and the failures after
    them (Ledger.warning_history). A warning closed as ignored (watched) was left to run; any other status means it
    was acted on."""
    from remedy.warn.record import PastWarning, detector_of, detector_record

    settings = runtime.settings()
    warn = settings.lemon.early_warning
    me = led.get_incident(incident_id) if incident_id is not None else None
    detector = detector_of(me.signal, me.xid, me.evidence) if me is not None else "unnamed"
    past, failures = led.warning_history(now - timedelta(days=settings.lemon.lookback_days))
    warnings = [PastWarning(i.node, i.first_seen, detector_of(i.signal, i.xid, i.evidence),
                            swapped=i.status is not IncidentStatus.IGNORED) for i in past if i.id != incident_id]
    return detector_record(detector, warnings, failures, now, timedelta(hours=warn.precision_window_hours),
                           warn.act_precision)
