"""What a remediation run ended with: one enum, its meaning for the incident, and how the run shows it.

Every remediation flow (replace-node, fix-in-place, escalate) ends with one `Outcome`. Triage closes the incident
from it, the demo and CLI summaries count it, and the run's final Prefect state shows it: a fixed, replaced or
ignored run is Completed (green); a held, escalated, no-spare or stopped-by-operator run is not (Failed or
Cancelled, named for what happened, with a one-line message), so a person scanning the UI sees what needs them.
Plain Python: no Prefect import (`tasks.states` turns an outcome into a state).
"""

from __future__ import annotations

from enum import StrEnum

from remedy.domain import events
from remedy.domain.model import IncidentStatus


class RunLook(StrEnum):
    """How the run's final state looks in the UI."""

    DONE = "completed"  # green: nothing left for a person
    NEEDS_A_PERSON = "failed"  # red: held, escalated, no spare, half done
    STOOD_DOWN = "cancelled"  # grey: a person's change or decision stopped automation on purpose


class Outcome(StrEnum):
    # the fault is dealt with
    REPLACED = "replaced"
    REPLACED_JOB_NOT_FULL = "replaced-job-not-full"
    PREEMPTED = "preempted"
    FIXED = "fixed"
    RESTARTED = "restarted"
    IGNORED = "ignored"
    PLANNED = "planned"  # dry-run: every step planned and recorded, nothing changed
    DUPLICATE = "duplicate"  # another run or incident has this fault in hand
    RETURNED_TO_SPARES = "returned-to-spares"  # repaired off the critical path and passed burn-in
    CLEARED = "cleared-before-acting"  # re-checked just before acting: the alert resolved, the probe sees nothing
    WATCHED = "watched"  # an early warning not acted on (no spare, gate held): the node was not touched, it works
    # a person must look
    HELD = "held"
    ESCALATED = "escalated"
    NO_SPARE = "no-spare"
    SHRUNK = "shrunk"
    REPLACED_NOT_JOINED = "replaced-not-joined"
    PREEMPTED_NOT_JOINED = "preempted-not-joined"
    SENT_TO_REPAIR = "sent-to-repair"  # the background repair did not clear it: a person looks at the hardware
    MONITOR_FAILURE = "monitor-failure"  # the monitor failed, not the GPU: node back in service, monitor needs a person
    # automation stood down on purpose
    STOPPED_BY_OPERATOR = "stopped-by-operator"
    PROPOSED_NOT_EXECUTED = "proposed-not-executed"

    @property
    def look(self) -> RunLook:
        return _LOOK[self]

    @property
    def fixed(self) -> bool:
        """The fault no longer needs anything (a rung of the ladder that ends like this succeeded)."""
        return self in _FIXED

    @property
    def label(self) -> str:
        """The run's state name, in the operator's words."""
        return _LABEL.get(self, self.value.replace("-", " ").capitalize())

    @property
    def incident_status(self) -> IncidentStatus:
        """How triage closes the incident after a remediation that ended like this."""
        if self.fixed and self is not Outcome.DUPLICATE:
            return IncidentStatus.RESOLVED
        if self in (Outcome.DUPLICATE, Outcome.STOPPED_BY_OPERATOR, Outcome.IGNORED, Outcome.MONITOR_FAILURE,
                    Outcome.WATCHED):
            return IncidentStatus.IGNORED
        return IncidentStatus.ESCALATED


_FIXED = frozenset({Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL, Outcome.PREEMPTED, Outcome.FIXED,
                    Outcome.RESTARTED, Outcome.PLANNED, Outcome.IGNORED, Outcome.DUPLICATE, Outcome.CLEARED,
                    Outcome.RETURNED_TO_SPARES})
_LOOK = {o: RunLook.DONE for o in (*_FIXED, Outcome.WATCHED)} | {
    o: RunLook.NEEDS_A_PERSON for o in (Outcome.HELD, Outcome.ESCALATED, Outcome.NO_SPARE, Outcome.SHRUNK,
                                        Outcome.REPLACED_NOT_JOINED, Outcome.PREEMPTED_NOT_JOINED,
                                        Outcome.MONITOR_FAILURE, Outcome.SENT_TO_REPAIR)
} | {Outcome.STOPPED_BY_OPERATOR: RunLook.STOOD_DOWN, Outcome.PROPOSED_NOT_EXECUTED: RunLook.STOOD_DOWN}
_LABEL = {
    Outcome.HELD: "Held", Outcome.ESCALATED: "Escalated", Outcome.NO_SPARE: "No spare",
    Outcome.SHRUNK: "Job shrunk", Outcome.REPLACED_NOT_JOINED: "Spare did not join",
    Outcome.PREEMPTED_NOT_JOINED: "Freed node did not join", Outcome.STOPPED_BY_OPERATOR: "Stopped by operator",
    Outcome.PROPOSED_NOT_EXECUTED: "Proposed, not executed", Outcome.PLANNED: "Planned (dry-run)",
    Outcome.CLEARED: "Cleared before acting", Outcome.RETURNED_TO_SPARES: "Returned to spares",
    Outcome.SENT_TO_REPAIR: "Sent to repair", Outcome.MONITOR_FAILURE: "Monitor failure",
    Outcome.WATCHED: "Watched",
}


def outcome_of(result: dict | None) -> Outcome | None:
    """The Outcome a flow's result carries (None for a result without one, e.g. isolate-fault's verdicts)."""
    try:
        return Outcome((result or {}).get("status", ""))
    except ValueError:
        return None


# Why the gate held, as the first half of a sentence ("{node} was held …: <cause>, and <answer>").
HOLD_CAUSES = {
    "breaker-tripped": "this failure tripped the {scope} breaker",
    "breaker-open": "the {scope} breaker is open",
    "probe-in-flight": "the {scope} breaker is letting one other node through first",
    "detector-suspect": "more nodes look unhealthy at once than the capacity budget allows, so the detector may be "
                        "wrong",
    "capacity-budget": "the capacity budget is spent: taking it out would leave too few nodes serving",
    "spare-reserve": "taking a spare would go below the spare reserve",
}


def hold_cause(hold: dict | None, *, warned: bool = False) -> str:
    """Why the gate held, from its typed reason and scope ({"skip": "breaker-open", "scope": "rack:rack-3"}).
    `warned`: the node was to be swapped on an early warning, not for a failure, and the sentence says so."""
    hold = hold or {}
    scope = str(hold.get("scope") or "").replace(":", " ").replace("cluster cluster", "cluster")
    cause = HOLD_CAUSES.get(str(hold.get("skip") or ""))
    if not cause:
        return "the safety gate held it"
    if warned:
        cause = cause.replace("this failure tripped", "one more node out would trip")
    return cause.format(scope=scope or "a")


def answer_clause(approval: dict | None) -> str:
    """What came of the question a person was asked: "alice denied it", "nobody answered within 1 h" …"""
    a = approval or {}
    decision, by = a.get("decision"), a.get("by") or ""
    if decision == "deny":
        return f"{by or 'a person'} denied going ahead"
    if decision == "timeout":
        reason = str(a.get("reason") or "")
        return ("nobody answered " + reason.removeprefix("no answer ").removeprefix("no decision ")).strip() \
            if reason.startswith(("no answer within", "no decision within")) else "nobody answered in time"
    if decision == "planned":
        return "a person would have been asked (dry-run)"
    if decision == "approve":
        return f"{by or 'a person'} approved, yet the same question came back"
    return "nobody was asked" if not decision else f"the answer was {decision}"


def decision_sentence(result: dict) -> str:
    """What was decided for the node, and why, in one sentence: the first line of a run's story and the held run's
    state message. Works for every remediation outcome and for retire-node's statuses."""
    node = str(result.get("node") or "the node")
    o, status = outcome_of(result), str(result.get("status") or "")
    why = _reason(result, node, o)
    if o is Outcome.HELD:
        text = f"{node} was held and left as it is: {hold_cause(result.get('hold'))}, and " \
               f"{answer_clause(result.get('approval'))}"
    elif o in (Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL):
        text = f"{node} was replaced by {result.get('replacement') or 'a spare'}" + \
            ("; the job is not back at full size" if o is Outcome.REPLACED_JOB_NOT_FULL else "")
    elif o is Outcome.NO_SPARE:
        text = f"{node} was taken out of service but not replaced: {why or 'no spare could take its place'}"
    elif o is Outcome.ESCALATED:
        text = f"{node} needs a person: {why or 'automation could not finish'}"
    elif o is Outcome.STOPPED_BY_OPERATOR:
        text = f"{node} was left to the operator: {why or 'their change stands'}"
    elif o is Outcome.WATCHED:
        text = f"{node} was not swapped on its early warning: {why or 'no spare was ready'}; it keeps working and " \
            "is watched"
    elif o is Outcome.PLANNED:
        text = f"Dry-run: every step for {node} was planned and recorded, nothing was changed"
    elif status == "retired":
        text = f"{node} was retired for good: {result.get('reason') or why}"
        if result.get("replacement"):
            text += f"; {result['replacement']} took its place in the job"
    elif status == "not-retired":
        text = f"{node} was not retired: {answer_clause(result.get('approval'))}"
    elif status == "deferred":
        text = f"{node} was not retired yet: {why}"
    elif status == "already-retired":
        text = f"{node} was already retired; nothing was done"
    else:
        label = o.label.lower() if o else status.replace("-", " ") or "done"
        text = f"{node}: {label}" + (f": {why}" if why else "")
    return text if text.endswith(".") else text + "."  # node names stay lower-case, even first


def _reason(result: dict, node: str, o: Outcome | None) -> str:
    """The first line of the result's `why`, without the label or "hold <node>:" it may repeat."""
    first = str(result.get("why") or "").strip().splitlines()
    text = first[0].strip() if first else ""
    for echo in ("no spare:", f"hold {node}:", f"held {node}:") + ((o.label.lower() + ":",) if o else ()):
        if text.lower().startswith(echo):
            text = text[len(echo):].strip()
    return text.rstrip(".")


def one_line(result: dict) -> str:
    """The state message: what happened and why, in one line."""
    o = outcome_of(result)
    if o in (Outcome.HELD, Outcome.WATCHED):  # the decision, in one sentence: why it was held / left working
        return " ".join(decision_sentence(result).split())[:300]
    done = o is not None and o.look is RunLook.DONE
    # a finished run's line says what happened; the gate's arithmetic belongs to runs the gate stopped
    why = str(result.get("why") or ("" if done else result.get("reason") or result.get("gate")) or "").splitlines()
    head = f"{result.get('node', '')}: {o.label.lower() if o else result.get('status', 'done')}"
    if result.get("replacement"):
        head += f" by {result['replacement']}"
    if result.get("dry_run"):
        head += " (dry-run: nothing changed)"
    first = why[0] if why else ""
    if o and first.lower().startswith(o.label.lower() + ":"):  # "no spare — no spare: …" says it twice
        first = first[len(o.label) + 1:].strip()
    node = str(result.get("node", ""))
    for echo in (f"hold {node}:", f"held {node}:"):  # "gpu005: held — hold gpu005: …"
        if node and first.lower().startswith(echo):
            first = first[len(echo):].strip()
    return (head + (f" — {first}" if first else ""))[:300]


def node_event(result: dict) -> tuple[str, str] | None:
    """(Event reason, message) to leave on the Node when a run stopped short of fixing it: held, escalated, no
    spare, stopped by the operator, a warned swap not made… None when the fault was dealt with (the action's own
    events say so)."""
    o = outcome_of(result)
    if o is None or (o.look is RunLook.DONE and o is not Outcome.WATCHED):
        return None
    return note_reason(o), one_line(result)


# The Event reason for each way a run can stop short (remedy.domain.events names them).
NOTE_REASONS: dict[Outcome, str] = {
    Outcome.HELD: events.HELD, Outcome.ESCALATED: events.ESCALATED, Outcome.NO_SPARE: events.NO_SPARE,
    Outcome.SHRUNK: events.JOB_SHRUNK, Outcome.REPLACED_NOT_JOINED: events.SPARE_DID_NOT_JOIN,
    Outcome.PREEMPTED_NOT_JOINED: events.FREED_NODE_DID_NOT_JOIN, Outcome.SENT_TO_REPAIR: events.SENT_TO_REPAIR,
    Outcome.MONITOR_FAILURE: events.MONITOR_FAILURE, Outcome.STOPPED_BY_OPERATOR: events.STOPPED_BY_OPERATOR,
    Outcome.PROPOSED_NOT_EXECUTED: events.PROPOSED_NOT_EXECUTED, Outcome.WATCHED: events.WATCHED,
}


def note_reason(o: Outcome) -> str:
    """The Event reason for a run that ended like this: RemedyHeld, RemedyNoSpare, RemedyStoppedByOperator…"""
    return NOTE_REASONS[o]
