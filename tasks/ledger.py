"""Ledger side of every action: the ledger is the timeline and the audit trail.

`act()` wraps one side effect: it writes the action row before acting and its outcome right after, and replays
a succeeded action of the same incident instead of acting twice (a retried task, a duplicate trigger, a flow
re-run after a crash all land here). Ledger tasks proper (incidents, state changes) are below it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, NodeState, Topology
from remedy.errors import Conflict
from remedy.ledger.errors import LeaseLost, LedgerConflict
from remedy.ledger.leases import ABANDONED
from remedy.ledger.records import Claim
from remedy.ledger.results import FleetSynced, IncidentOpened, NodeMoved
from remedy.remediate.results import RemediationClaim
from tasks.retry import transient_only
from tasks.story import say

DONE = (ActionOutcome.SUCCEEDED, ActionOutcome.PLANNED)


def requester() -> str:
    """Who asks: the flow run's name and id when inside Prefect, else the process."""
    try:
        from prefect.runtime import flow_run

        if flow_run.id:
            return f"flow-run:{flow_run.name}:{flow_run.id}"
    except Exception:  # outside a flow run
        pass
    return "cli"


def act(kind: str, node: str, fn: Callable[[], dict[str, Any]], *, incident_id: int | None, dry_run: bool,
        key: str | None = None) -> dict[str, Any]:
    from tasks.leases import ensure_held, fence

    ensure_held()  # a run that lost its lease (another run has its incident now) must not act
    led = runtime.ledger()
    base = key or (f"incident-{incident_id}:{kind}:{node}" if incident_id is not None else None)
    if base and dry_run:
        base += ":dry-run"
    attempt_key = base
    if base:
        earlier = [a for a in led.actions(key_prefix=base) if (a.idempotency_key or "").split("#")[0] == base]
        done = [a for a in earlier if a.outcome in DONE]
        if done:
            return dict(done[-1].detail) | {"replayed": True}
        if earlier:  # an attempt failed or crashed half-way: act again (every action is idempotent on the cluster)
            attempt_key = f"{base}#{len(earlier) + 1}"
    record, new = led.start_action(
        Action(kind=kind, node=node, requested_by=requester(), dry_run=dry_run, incident_id=incident_id,
               idempotency_key=attempt_key),
        fence=fence(incident_id),  # checked again inside the write: the ledger's word, not this process's view
    )
    if not new:
        raise Conflict(f"{node}: {kind} for incident {incident_id} is being done by another run right now")
    try:
        result = fn()
    except Exception as exc:
        try:
            led.finish_action(record.id, ActionOutcome.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
        except LedgerConflict:  # a takeover settled the row meanwhile (abandoned): the ledger keeps its first word,
            pass  # and the run hears what stopped it (a fenced call refused is LeaseLost: the flows stop on it)
        raise
    try:
        led.finish_action(record.id, ActionOutcome.PLANNED if dry_run else ActionOutcome.SUCCEEDED, detail=result)
    except LedgerConflict:
        settled = led.get_action(record.id)
        if settled.error.startswith(ABANDONED):  # this run was found gone while it acted: its incident is not its own
            raise LeaseLost(f"{kind} on {node} finished, but this run had been found gone meanwhile "
                            f"({settled.error}); it stops here") from None
        raise
    return result


def begin_action(kind: str, node: str, *, incident_id: int | None, dry_run: bool,
                 detail: dict[str, Any] | None = None) -> int:
    """A long step's row (a ladder rung, an off-path fix), written `running` before it starts and ended by
    `end_action`; fenced: a run taken over while it stalled starts nothing. Returns the row's id. (`act` is the
    one-call form for a single side effect; both write through the same ledger calls.)"""
    from tasks.leases import fence

    rec, _ = runtime.ledger().start_action(
        Action(kind=kind, node=node, requested_by=requester(), dry_run=dry_run, incident_id=incident_id,
               detail=_jsonable(detail or {})),
        fence=fence(incident_id))
    return rec.id


def end_action(action_id: int, outcome: ActionOutcome, *, error: str = "", detail: dict[str, Any] | None = None
               ) -> None:
    """End a `begin_action` row. Marked abandoned meanwhile (this run was found gone): the ledger keeps the first
    word, and the run is told in its log."""
    try:
        runtime.ledger().finish_action(action_id, outcome, error=error, detail=_jsonable(detail or {}))
    except LedgerConflict as exc:
        from prefect import get_run_logger

        get_run_logger().warning("action %s: %s", action_id, exc)


def note_action(kind: str, node: str, why: str, *, incident_id: int | None, dry_run: bool,
                outcome: ActionOutcome = ActionOutcome.SKIPPED) -> None:
    """A step not taken, and why (ignored, stood down for the operator): one finished row, fenced."""
    from tasks.leases import fence

    runtime.ledger().start_action(Action(kind=kind, node=node, requested_by=requester(), dry_run=dry_run,
                                         incident_id=incident_id, outcome=outcome, error=why[:500]),
                                  fence=fence(incident_id))


def _jsonable(d: dict) -> dict:
    import json

    out: dict = json.loads(json.dumps(d, default=str))
    return out


@task(name="open_incident", task_run_name="open-incident-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1)
def open_incident(node: str, signal: str, gpu: int | None = None, xid: int | None = None, detail: str = "",
                  severity: str = "critical") -> IncidentOpened:
    """Open (or attach to) the incident for this fault; the receiver usually did this already."""
    settings = runtime.settings()
    led = runtime.ledger()
    topo = _topology(node)
    record, created = led.open_incident(
        Incident(node=node, signal=signal, gpu=gpu, xid=xid, detail=detail),
        window_seconds=settings.receiver.dedup_window_seconds, severity=severity, topology=topo,
    )
    return IncidentOpened(record, created)


@task(name="set_node_state", task_run_name="{node}-to-{state}", cache_policy=NO_CACHE, retries=3,
      retry_delay_seconds=[1, 2, 4], retry_condition_fn=transient_only)
def set_node_state(node: str, state: str, reason: str, dry_run: bool, incident_id: int | None = None,
                   replaces: str | None = None) -> NodeMoved:
    """Move the node in the lifecycle (ledger, checked by the state machine) and mirror it on the pool label."""
    target = NodeState(state)
    settings = runtime.settings()

    def change() -> dict[str, Any]:
        led = runtime.ledger()
        if dry_run:
            current = led.get_node(node).state
            return {"node": node, "from": current.value if current else None, "to": target.value, "dry_run": True,
                    "replaces": replaces}
        from tasks.leases import fence, node_fence

        # fenced like the action row around it: a run taken over between the two moves nothing
        rec = led.transition(node, target, reason=reason, requested_by=requester(), incident_id=incident_id,
                             fence=fence(incident_id))
        runtime.cluster(dry_run).set_labels(node, {settings.labels.pool: target.value}, node_fence(incident_id))
        return {"node": node, "from": rec.from_state.value if rec.from_state else None, "to": target.value,
                "replaces": replaces}

    moved = NodeMoved.from_record(act(f"set_state_{target.value}", node, change, incident_id=incident_id,
                                      dry_run=dry_run))
    say("%s%s: %s → %s%s", "would move " if dry_run else "", node, moved.from_state or "new", moved.to,
        f" (replaces {replaces})" if replaces else "")
    return moved


@task(name="set_incident_status", task_run_name="incident-{incident_id}-{status}", cache_policy=NO_CACHE,
      retries=2, retry_delay_seconds=1, retry_condition_fn=transient_only)
def set_incident_status(incident_id: int, status: str, detail: str = "") -> None:
    from tasks.leases import ensure_held, fence

    ensure_held()  # a run that lost its lease does not speak for the incident any more
    # fenced in the ledger too: refused if another run holds the incident now; a subflow keeps its parent's claim
    runtime.ledger().set_incident_status(incident_id, IncidentStatus(status), detail=detail,
                                         fence=fence(incident_id))
    say("incident %d: %s%s", incident_id, status, f" ({detail})" if detail else "")


@task(name="sync_fleet", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2,
      retry_condition_fn=transient_only)
def sync_fleet() -> FleetSynced:
    """Make sure every GPU node the cluster has is known to the ledger (topology facts only)."""
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    known = {r.name: r for r in led.nodes()}
    adopted = 0
    for n in nodes:
        old = known.get(n.name)
        if old is not None and old.topology == n.topology and old.gpu_model == n.gpu_model and old.state is not None:
            continue  # one read for the fleet, writes only for what is new or changed
        rec = led.upsert_node(n)
        if rec.state is None and n.state is not None:  # first sight: the pool label says where it is
            led.transition(n.name, n.state, reason="adopted from pool label", requested_by=requester())
            adopted += 1
    return FleetSynced(nodes=len(nodes), adopted=adopted)


def _topology(node: str) -> Topology | None:
    try:
        return runtime.ledger().get_node(node).topology
    except Exception:
        try:
            return runtime.cluster().get_node(node).topology
        except Exception:
            return None


def _is_us_or_ancestor(holder: str, me: str) -> bool:
    """The holder is this run or one that started it (triage, the usual holder, is our parent): the lineage the
    fence uses (tasks.leases), known without an API read for a subflow started inline."""
    from tasks.leases import ancestors, current_run_id

    return holder == me or (current_run_id() == me and holder in ancestors(me))


FINAL_STATES = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
# incidents no automation acts on again (only a person re-opens one)
SETTLED = frozenset({IncidentStatus.RESOLVED, IncidentStatus.IGNORED, IncidentStatus.ESCALATED})


def _run_state(flow_run_id: str) -> str | None:
    """State type of a flow run (None if Prefect does not know it)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(UUID(flow_run_id)).state_type
            return state.value if state is not None else None
    except Exception:  # unknown id (e.g. "event:<id>" placeholders) or API hiccup
        return None


def took_over(claim: Claim, incident_id: int) -> None:
    """After a takeover: say so in the log and the UI."""
    from prefect import get_run_logger

    why = f"its process is gone; incident {incident_id} was taken over by run {claim.holder}"
    get_run_logger().warning("incident %s: taken over from run %s (%s); %d unfinished action(s) recorded abandoned, "
                             "finished steps replay", incident_id, claim.took_over_from,
                             "lease expired" if claim.holder_lease else "its run is over", len(claim.abandoned))
    from remedy.receiver.watchdog import show_gone_in_prefect

    show_gone_in_prefect(list(claim.reaped), why)


@task(name="claim_remediation", task_run_name="claim-incident-{incident_id}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def claim_remediation(incident_id: int, by_person: bool = False) -> RemediationClaim:
    """One incident, one remediation at a time: claim it for this run (or its triage parent).

    A holder that is this run, its parent or root (triage starts us as a subflow) is us. An incident already
    settled (resolved, ignored, or escalated to a person) is not acted on again: a late duplicate trigger (an event
    re-delivered, a re-announce after a Prefect API blip) stands down. A person's go-ahead re-opens the incident for
    the run that asked (flows/escalate.py), and so does a run a person started by hand (`by_person`: no incident id
    was given, e.g. from the Prefect UI after an escalation timed out). A holder whose lease expired (its process
    was killed, or `remedy up` stopped) is gone: its incident is taken over (remedy.ledger.leases) and the new run
    replays the finished steps from the ledger. A holder with a live lease is at work: this run stands down. A
    holder without a lease (a hand-written claim, a run from before leases) is judged by Prefect's view of it.
    """
    from prefect.runtime import flow_run

    from tasks.leases import hold_incident_node

    led = runtime.ledger()
    me = str(flow_run.id) if flow_run.id else requester()
    # the flow's own dry_run parameter (None: the configured default): a dry run writes no fence either
    dry = (flow_run.parameters or {}).get("dry_run") if flow_run.id else None
    dry = runtime.settings().dry_run if dry is None else bool(dry)
    claim = led.claim(incident_id, me)
    if claim.claimed:
        hold_incident_node(incident_id, dry)  # this run's fence on the node at once (remedy.safety.fence)
        if claim.took_over_from:
            took_over(claim, incident_id)
        return RemediationClaim(True, me, took_over_from=claim.took_over_from, abandoned=tuple(claim.abandoned))
    holder = claim.holder
    if holder and _is_us_or_ancestor(holder, me):
        hold_incident_node(incident_id, dry)
        return RemediationClaim(True, holder)
    if claim.status in SETTLED and not by_person:
        return RemediationClaim(False, holder, settled=claim.status)
    if claim.status is IncidentStatus.ACTING and claim.holder_lease is not None:  # alive: it renews its lease
        return RemediationClaim(False, holder, holder_lease_expires_at=claim.holder_lease.expires_at)
    state = _run_state(holder) if holder else None
    if claim.status is IncidentStatus.ACTING and state is not None and state not in FINAL_STATES:
        return RemediationClaim(False, holder, holder_state=state)
    why = f"its run is {state.lower()}" if state else ("re-opened by a person" if claim.status in SETTLED
                                                       else "nobody holds it")
    taken = led.take_over_incident(incident_id, me, expected_holder=holder or None, reason=why,
                                   holder_over=state in FINAL_STATES or not holder)
    if not taken.claimed:  # another run took it between our reads: it is at work now
        return RemediationClaim(False, taken.holder, holder_state="just claimed")
    hold_incident_node(incident_id, dry)
    return RemediationClaim(True, me, took_over_from=holder, holder_state=state, abandoned=tuple(taken.abandoned))
