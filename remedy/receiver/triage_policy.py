"""Triage's decision, Prefect-free: incident → path → which flow, and the markdown that explains it.

Gates, in order (each refusal says why):
  1. the incident is already handled (not open)         → nothing to do
  2. the incident is stale and the live node says it was already handled (cordoned, gone) → stop
  3. the node is already out of service (quarantined, repair, retired) → record, no second remediation
  4. classify (XID catalog + signal kind, recurrences counted from the ledger) → RemediationPath
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from remedy.detect.signals import Signal, SignalKind, Verdict, classify
from remedy.domain.durations import human_duration
from remedy.domain.model import IncidentStatus, Node, NodeState
from remedy.domain.outcome import Outcome, outcome_of
from remedy.domain.times import parse_iso
from remedy.domain.xid import RemediationPath, unsafe_to_run
from remedy.settings.signals import SignalThresholds

# path → (flow entrypoint, what will happen). Paths absent here need no flow.
PATH_FLOWS: dict[RemediationPath, tuple[str, str]] = {
    RemediationPath.REPLACE: ("flows.replace_node:replace_node",
                              "cordon, quarantine and drain the node, promote a warm spare, send the node to repair"),
    RemediationPath.RESTART_APP: ("flows.fix_in_place:fix_in_place", "restart the job's pods; the node stays in"),
    RemediationPath.RESET_GPU: ("flows.fix_in_place:fix_in_place", "drain, reset the GPU, verify, uncordon"),
    RemediationPath.REBOOT: ("flows.fix_in_place:fix_in_place", "drain, reboot, wait Ready, verify, uncordon"),
    RemediationPath.ISOLATE: ("flows.isolate_fault:isolate_fault", "find the culprit node by bisection"),
    RemediationPath.ESCALATE: ("flows.escalate:escalate", "hand to a human with the evidence"),
}
RECOVER_PLAN = "fix the failed node off the critical path (reset / reboot), burn-in, back to the spares"
OUT_OF_SERVICE = (NodeState.QUARANTINED, NodeState.REPAIR, NodeState.RETIRED)
# A spare or a node in burn-in carries no job: there is nothing to replace, restart or bring back to full size.
# A node-level fault there takes it out of the pool and a person sends it to repair (escalate quarantines it).
IDLE_STATES = (NodeState.SPARE, NodeState.BURN_IN)
NODE_FIXES = (RemediationPath.REPLACE, RemediationPath.RESET_GPU, RemediationPath.REBOOT, RemediationPath.RESTART_APP)


class TriageAction(StrEnum):
    REMEDIATE = "remediate"  # start the path's flow
    RECORD = "record"  # watch / ignore: recorded, no action
    STOP = "stop"  # a gate refused: already handled, stale, already out of service
    RECOVER = "recover"  # the job already runs on a spare: carry on the failed node's background repair


@dataclass(frozen=True)
class Decision:
    """What triage does (`action`), on which path, and why."""

    action: TriageAction
    path: RemediationPath | None
    verdict: Verdict | None
    reason: str
    entrypoint: str = ""
    plan: str = ""
    recurrences: int = 1
    stale: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    quarantine: bool = False  # for an escalation: keep the node out of work (its fault class says it is unsafe)
    recover_after: bool = False  # replaced first: the failed node is fixed off the critical path afterwards
    early_warning: bool = False  # a warned node that still works: swapped only with a spare in hand

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", TriageAction(self.action))

    def to_dict(self) -> dict[str, Any]:
        return {
            "quarantine": self.quarantine,
            "action": self.action, "path": self.path.value if self.path else None,
            "verdict": self.verdict.to_dict() if self.verdict else None, "reason": self.reason,
            "entrypoint": self.entrypoint, "plan": self.plan, "recurrences": self.recurrences, "stale": self.stale,
            "facts": self.facts,
        }


def parse_time(text: str | None) -> datetime | None:
    """ISO-8601 text (with zone) → aware datetime; None for empty; ValueError naming the bad value."""
    return parse_iso(text, what="detected_at", naive="refuse") if text else None


def parse_incident_id(value: int | str | None) -> int:
    if isinstance(value, bool):
        raise ValueError(f"incident_id must be a positive integer, got {value!r}")
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ValueError(f"incident_id must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ValueError(f"incident_id must be a positive integer, got {value!r}")
    return number


def foreign_ledger(announced_by: str, this_ledger: str) -> str:
    """Why an incident event is not this ledger's to act on ("" when it is, or when the event names no ledger: an
    operator's run by hand): incident numbers are per ledger, so another ledger's incident 1 is not ours."""
    if not announced_by or announced_by == this_ledger:
        return ""
    return (f"announced by ledger {announced_by}, this stack's ledger is {this_ledger}: another stack's (or a reset "
            "ledger's) incident, nothing done here")


def age_seconds(detected_at: datetime, now: datetime) -> float:
    return (now - detected_at) / timedelta(seconds=1)


def signal_of(incident: dict[str, Any]) -> Signal:
    """The incident as a Signal for `classify` (an unknown signal kind becomes UNKNOWN: escalated, not dropped)."""
    try:
        kind = SignalKind(incident["signal"])
    except ValueError:
        kind = SignalKind.UNKNOWN
    xid = incident.get("xid")
    if kind is SignalKind.XID and xid is None:
        kind = SignalKind.UNKNOWN
    evidence = incident.get("evidence") or {}
    if evidence:  # the value, labels and raw text the alert carried: value rules need them
        return Signal.from_evidence(incident["node"], kind, gpu=incident.get("gpu"), xid=xid, evidence=evidence)
    return Signal(node=incident["node"], kind=kind, gpu=incident.get("gpu"), xid=xid,
                  labels={"alertname": incident.get("detail", "")[:80]})


def not_ready_without_duration(incident: dict[str, Any]) -> bool:
    """A NotReady incident whose alert did not say how long the node has been NotReady (an exporter's plain
    "NotReady" alert, or the simulator's first one): triage measures it on the live node (`not_ready_seconds`)."""
    if incident.get("signal") != SignalKind.NODE_NOT_READY.value:
        return False
    value = (incident.get("evidence") or {}).get("value")
    return not (isinstance(value, (int, float)) and not isinstance(value, bool))


def not_ready_seconds(incident: dict[str, Any], live_node: Node | None, now: datetime) -> float | None:
    """How long the node has been NotReady, as far as triage can tell: at least since the incident was first seen
    while the live node is still NotReady; 0 once it is Ready again; None when the cluster has no such node."""
    if live_node is None:
        return None
    if live_node.ready:
        return 0.0
    return age_seconds(incident["first_seen"], now)


def with_not_ready_duration(incident: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The incident with the measured NotReady duration as its evidence value (what classify's rule reads)."""
    evidence = dict(incident.get("evidence") or {})
    evidence |= {"value": float(seconds), "unit": "s", "measured_by": "triage (live node)"}
    return incident | {"evidence": evidence}


def decide(incident: dict[str, Any], *, recurrences: int, node_state: str | None, now: datetime,
           detected_at: datetime | None, max_age_seconds: float, live_node: Node | None = None,
           thresholds: SignalThresholds | None = None, orphaned: bool = False, resumes: bool = False,
           recovering: bool = False) -> Decision:
    """The whole triage decision for one incident (a dict shaped like IncidentRecord).

    `orphaned`: the incident is acting under a run that is gone (its lease expired), so it is taken over, not
    "already handled". `resumes`: that gone run of this incident cordoned the node itself, so a node that is out of
    service or cordoned is no sign that someone else acted: the remediation continues (its finished steps replay).
    `recovering`: that gone run had replaced the node and started its background repair: the repair continues."""
    facts: dict[str, Any] = {"incident": incident["id"], "node": incident["node"], "node_state": node_state}
    status = IncidentStatus(incident["status"])
    detected = detected_at or incident["first_seen"]
    age = age_seconds(detected, now)
    stale = age > max_age_seconds
    facts["age_seconds"] = round(age, 3)

    if orphaned or resumes:
        facts["resumes"] = True
    # 1. Someone already took it (another triage run, an operator); a run that is gone holds nothing.
    if status is not IncidentStatus.OPEN and not (orphaned and status is IncidentStatus.ACTING):
        return Decision(TriageAction.STOP, None, None, f"incident {incident['id']} is {status.value}, not open: already handled",
                        stale=stale, facts=facts)

    # 1b. The job already runs on a spare and the gone run was repairing the failed node off the critical path: that
    #     repair is what is left (a new remediation would spend a second spare on a node already out).
    if recovering:  # (the caller's facts: a marker of a run that is gone, remedy.remediate.runbook)
        return Decision(TriageAction.RECOVER, RemediationPath.REPLACE, None,
                        f"the job already runs on a spare; the background repair of {incident['node']} by a run that "
                        "is gone continues (its finished steps replay)", plan=RECOVER_PLAN, stale=stale, facts=facts,
                        recover_after=True)

    # 2. A late run (stack was down) acts only if the live node still needs it.
    late = _late(incident, age, max_age_seconds, live_node, resumes, facts) if stale else None
    if late is not None:
        return late

    # 3. One remediation per node at a time: a node already taken out is not remediated again.
    verdict = classify(signal_of(incident), thresholds, recurrences=max(1, recurrences))
    path = verdict.path
    if node_state in {s.value for s in OUT_OF_SERVICE} and path in PATH_FLOWS and not resumes:
        return Decision(TriageAction.STOP, path, verdict, f"{incident['node']} is already {node_state}: recorded, no second "
                        "remediation", recurrences=recurrences, stale=stale, facts=facts)

    # 4. A fault on a node that carries no work: out of the pool, to a person; no spare is spent on a spare.
    if node_state in {s.value for s in IDLE_STATES} and path in NODE_FIXES:
        entrypoint, _ = PATH_FLOWS[RemediationPath.ESCALATE]
        reason = (f"{incident['node']} is a {node_state} node and carries no work: instead of {path.value}, it is "
                  f"quarantined out of the {node_state} pool for a person to repair or re-validate "
                  f"({verdict.explanation})")
        unsafe = unsafe_to_run(incident.get("xid"), path)
        plan = ("quarantine the node (out of the pool) and hand it to a human" if unsafe
                else "hand it to a human; the node stays as it is")
        return Decision(TriageAction.REMEDIATE, RemediationPath.ESCALATE, verdict, reason, entrypoint, plan, recurrences, stale,
                        facts, quarantine=unsafe)

    # 5. The path decides the flow. An escalation quarantines only a node whose fault class says it is unsafe.
    if path in PATH_FLOWS:
        entrypoint, plan = PATH_FLOWS[path]
        unsafe = path is RemediationPath.ESCALATE and unsafe_to_run(incident.get("xid"), path)
        if path is RemediationPath.ESCALATE:
            plan = ("hand to a human with the evidence; the node is quarantined meanwhile" if unsafe
                    else "ask a human and notify; the node keeps its work (the fault does not say it is unsafe)")
        return Decision(TriageAction.REMEDIATE, path, verdict, verdict.explanation, entrypoint, plan, recurrences, stale, facts,
                        quarantine=unsafe)
    plan = "watch: recorded as a warning, no action" if path is RemediationPath.WATCH else "recorded, no action"
    return Decision(TriageAction.RECORD, path, verdict, verdict.explanation, "", plan, recurrences, stale, facts)


def _late(incident: dict[str, Any], age: float, max_age_seconds: float, live_node: Node | None,
          resumes: bool, facts: dict[str, Any]) -> Decision | None:
    """A stale incident: stop when the live node says it was already dealt with (gone, or cordoned by someone)."""
    if live_node is None:
        return Decision(TriageAction.STOP, None, None, f"stale incident ({human_duration(age)} old > {human_duration(max_age_seconds)}) and the "
                        f"node {incident['node']} is not in the cluster any more", stale=True, facts=facts)
    if live_node.unschedulable and not resumes:
        return Decision(TriageAction.STOP, None, None, f"stale incident ({human_duration(age)} old) and {incident['node']} is already "
                        "cordoned: someone acted meanwhile", stale=True, facts=facts)
    return None


def explain_markdown(incident: dict[str, Any], decision: Decision, outcome: str = "") -> str:
    """The run's artifact: what was seen, which rule matched, what will happen."""
    where = incident["node"] + ("" if incident.get("gpu") is None else f" GPU {incident['gpu']}")
    seen = incident["signal"] + (f" (XID {incident['xid']})" if incident.get("xid") is not None else "")
    lines = [
        f"### Triage of incident {incident['id']}: {seen} on {where}",
        "",
        "**What was seen**",
        f"- {seen} on {where}; first seen {incident['first_seen']:%Y-%m-%d %H:%M:%S} UTC, "
        f"{incident.get('count', 1)} alert(s), severity {incident.get('severity', '')}",
        f"- occurrences of this fault in the lookback: {decision.recurrences}",
        f"- node state in the ledger: {decision.facts.get('node_state') or 'unmanaged'}; "
        f"age when triaged: {human_duration(decision.facts.get('age_seconds'))}" + (" (stale)" if decision.stale else ""),
        "",
        "**Which rule matched**",
    ]
    if decision.verdict:
        v = decision.verdict
        lines.append(f"- `{v.rule}` → **{v.path.value}** ({v.severity.value}): {v.explanation}")
    else:
        lines.append("- none: a gate stopped triage before classification")
    lines += ["", "**What will happen**"]
    if decision.action == "remediate" and decision.path is not None:  # a remediation always has its path
        lines.append(f"- {decision.path.value}: {decision.plan} (`{decision.entrypoint}`)")
    elif decision.action == "record":
        lines.append(f"- {decision.plan}")
    else:
        lines.append(f"- nothing: {decision.reason}")
    if outcome:
        lines += ["", f"**Outcome**: {outcome}"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- after the base decision
# What triage weighs once it holds the incident, and how that changes the path. Each override lives here, not in
# the flow: the flow gathers the facts (tasks) and carries out the one plan `settle` returns.
class Weigh(StrEnum):
    NOTHING = "nothing"
    EXPECTED_COST = "expected-cost"  # an in-place fix the catalog allows: a ready spare may cost the job less
    WARNING = "warning"  # an early warning: swap at a checkpoint boundary, or watch


def already_handled(decision: Decision, incident: Mapping[str, Any]) -> bool:
    """A gate refused and the incident is not open: someone else has it (or had it); triage claims nothing."""
    return decision.action is TriageAction.STOP and incident.get("status") != IncidentStatus.OPEN.value


def what_to_weigh(decision: Decision, incident: Mapping[str, Any], *, replace_first: bool,
                  early_warning: bool) -> Weigh:
    """Which comparison triage makes before acting on `decision` (`early_warning`: the signal is one,
    remedy.detect.signals.is_early_warning)."""
    if early_warning and decision.action is TriageAction.RECORD:
        return Weigh.WARNING
    if (decision.action is TriageAction.REMEDIATE and replace_first and incident.get("xid") is not None
            and decision.path in (RemediationPath.RESET_GPU, RemediationPath.REBOOT)):
        return Weigh.EXPECTED_COST
    return Weigh.NOTHING


def wants_not_ready_choice(incident: Mapping[str, Any], node_state: str | None, *, replace_first: bool) -> bool:
    """A NotReady node, still open, in service: weigh waiting for it against a ready spare (choose())."""
    return (incident.get("signal") == SignalKind.NODE_NOT_READY.value
            and incident.get("status") == IncidentStatus.OPEN.value and replace_first
            and node_state not in ("repair", "retired", "quarantined"))


@dataclass(frozen=True)
class Choice:
    """The expected-cost comparison's answer (remedy.remediate.choice.choose), as triage uses it."""

    option: str
    reason: str


@dataclass(frozen=True)
class WarningVerdict:
    """An early warning weighed: `acts` (swap pays) and, when it does, whether the checkpoint boundary came."""

    acts: bool
    why: str
    boundary_reached: bool = False
    boundary_why: str = ""


def _replace(decision: Decision, *, plan: str, reason: str, recover_after: bool = False,
             early_warning: bool = False) -> Decision:
    entrypoint, _ = PATH_FLOWS[RemediationPath.REPLACE]
    return dataclasses.replace(decision, action=TriageAction.REMEDIATE, path=RemediationPath.REPLACE,
                               entrypoint=entrypoint, plan=plan, reason=reason, recover_after=recover_after,
                               early_warning=early_warning)


def replace_now(decision: Decision, not_ready: Choice | None) -> Decision:
    """NotReady, watched by the rules, but a ready spare costs the job less than waiting: replace now."""
    if (not_ready is None or not_ready.option != RemediationPath.REPLACE.value
            or decision.action is not TriageAction.RECORD or decision.path is not RemediationPath.WATCH):
        return decision
    return _replace(decision, plan=PATH_FLOWS[RemediationPath.REPLACE][1],
                    reason=f"{decision.reason}; replace first: {not_ready.reason}")


def settle(decision: Decision, *, cost: Choice | None = None, warning: WarningVerdict | None = None) -> Decision:
    """The one decision triage carries out, after what it weighed (`what_to_weigh`):
    - an in-place fix whose expected-cost choice is a spare: replace first, fix the node off the critical path;
    - an early warning whose swap pays and whose checkpoint boundary came: replace at the boundary (no work lost),
      then fix off the path; otherwise watched, saying why."""
    if cost is not None and cost.option == RemediationPath.REPLACE.value and decision.path in (
            RemediationPath.RESET_GPU, RemediationPath.REBOOT):
        plan = PATH_FLOWS[RemediationPath.REPLACE][1]
        return _replace(decision, plan=f"{plan}; then {decision.path.value} off the critical path, burn-in, back to "
                                       "the spares", reason=f"{decision.reason}; replace first: {cost.reason}",
                        recover_after=True)
    if warning is None:
        return decision
    if not warning.acts:
        return dataclasses.replace(decision, reason=f"{decision.reason}; {warning.why}")
    if not warning.boundary_reached:
        return dataclasses.replace(decision, reason=f"{decision.reason}; not swapped: {warning.boundary_why}, and a "
                                                    "swap between checkpoints would roll back the job's work")
    plan = PATH_FLOWS[RemediationPath.REPLACE][1]
    return _replace(decision, plan=f"{plan} at the checkpoint boundary; then reset/reboot off the critical path, "
                                   "burn-in, back to the spares",
                    reason=f"{decision.reason}; {warning.boundary_why}, so the swap loses no work ({warning.why})",
                    recover_after=True, early_warning=True)


# isolate_fault ends with a verdict, not an Outcome: "infrastructure" means the bad nodes are found and held
ISOLATE_FIXED = frozenset({"isolated", "infrastructure"})


@dataclass(frozen=True)
class Closing:
    """How triage closes the incident after the path's flow ended."""

    status: IncidentStatus
    detail: str
    outcome: Outcome | None = None
    run_status: str = "done"  # the path flow's own status word, for triage's result

    @property
    def replaced(self) -> bool:
        """The job runs on a spare: the failed node may be repaired off the critical path."""
        return self.outcome in (Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL)


def closing(decision: Decision, result: Mapping[str, Any] | None) -> Closing:
    """What the path's flow's result means for the incident (the result dict is the flow's state data)."""
    result = result or {}
    status = str(result.get("status", ""))
    c = _closing(decision, result, status)
    return dataclasses.replace(c, run_status=status or "done")


def _closing(decision: Decision, result: Mapping[str, Any], status: str) -> Closing:
    done = outcome_of(dict(result))
    path = decision.path.value if decision.path else ""
    if decision.path is RemediationPath.ESCALATE or result.get("escalated"):
        return Closing(IncidentStatus.ESCALATED, f"escalated: {result.get('reason', decision.reason)}", done)
    if done is Outcome.WATCHED:
        return Closing(done.incident_status, f"{RemediationPath.WATCH.value}: not swapped: {result.get('why')}", done)
    if done is not None:
        why = result.get("why") or ("the operator's change stands" if done is Outcome.STOPPED_BY_OPERATOR
                                    else done.value)
        if done.incident_status is IncidentStatus.ESCALATED:
            return Closing(done.incident_status, f"{path} ended {done.label.lower()}: a person decides ({why})", done)
        return Closing(done.incident_status, f"{path}: {why}", done)
    if status in ISOLATE_FIXED:
        return Closing(IncidentStatus.RESOLVED, f"{path}: {status}")
    if status == "code":
        return Closing(IncidentStatus.IGNORED, "isolate: every batch diverges — user code or data, not the hardware")
    return Closing(IncidentStatus.ESCALATED, f"{path} ended {status or 'without a status'}: a human decides")
