"""Circuit breakers per failure domain: stop automation from answering a shared cause with a storm of replacements.

Why this exists (seed 000, Crusoe AutoClusters): when one node fails, replacing it is right. When several nodes of
one rack fail within a minute, something upstream is broken — a switch, a PDU, a bad config or driver push — and
blindly replacing every node burns the spare pool while the real problem persists. So failures are counted in
sliding windows per scope (rack, leaf switch, PDU, and the whole cluster); a scope whose count passes its limit
(a number of nodes AND a percentage of that scope's nodes, the stricter wins) opens its breaker: automation pauses
there, and only there, until a person approves (`approve_close`) or a configured cool-down passes quietly, after
which the breaker is half-open and lets ONE remediation through as a probe (success closes it, failure re-opens it).
NVSentinel's breaker is cluster-wide and manual only; per-scope breakers keep the rest of the fleet healing while
one rack is investigated.

Around the breakers sit two more gates in the same decision: the capacity budget (`remedy.safety.budget`, at most
N nodes / P % out of service, and "hold everything" when the detector flags more than that at once) and the spare
reserve (automation never takes the ready pool below `breaker.spare_reserve`).

Everything is a pure function of its inputs: `decide(failure, board, fleet, now)` mutates only the board it is
given and returns a `Decision` with its `Skip` explanation and the `BreakerTransition`s it caused. The board
serialises to a dict (the flow stores it in the ledger) and can be rebuilt from the ledger's recorded decisions,
transitions and outcomes (the board itself lives in `remedy.safety.board`).
"""

from __future__ import annotations

from datetime import datetime

from remedy.safety.board import CLUSTER, BreakerBoard, BreakerError, InFlight, human_window, scope_label
from remedy.safety.budget import check_budget
from remedy.safety.scopes import (
    BreakerState,
    BreakerTransition,
    Decision,
    FailureEvent,
    FleetView,
    Skip,
    SkipReason,
    Verdict,
    require_aware,
    scopes_of,
    split_key,
)

__all__ = ["APPROVE_BUDGET", "APPROVE_DETECTOR", "APPROVE_RESERVE", "BreakerBoard", "BreakerError", "approval_token",
           "decide"]

_LIKELY_CAUSE = {
    "rack": "a switch, PDU or config push",
    "switch": "a switch or cabling fault",
    "pdu": "a power event",
    "cluster": "a fleet-wide cause such as a driver or config push",
}


# What a person's approval can answer: a tripped or open scope (its key, e.g. "rack:rack-01"), or one of these.
APPROVE_BUDGET = SkipReason.CAPACITY_BUDGET.value
APPROVE_DETECTOR = SkipReason.DETECTOR_SUSPECT.value
APPROVE_RESERVE = SkipReason.SPARE_RESERVE.value


def approval_token(skip: Skip) -> str:
    """What approving this hold answers: the scope it names, else the gate that held."""
    return skip.scope or skip.reason.value


def decide(failure: FailureEvent, board: BreakerBoard, fleet: FleetView, now: datetime,
           approved: frozenset[str] = frozenset()) -> Decision:
    """ACT or HOLD on one failure. Gates in order: duplicate, breakers (domains, then cluster), capacity, spares.

    `approved` lists what people already said yes to for this failure (see `approval_token`): each approval
    answers one question only, so every other gate still applies — another open scope, the node's other
    incidents, the capacity budget, the spare reserve. Mutates `board` (windows, states, in-flight set); same
    inputs in the same order give the same board.
    """
    require_aware(now, "decision time")
    if failure.at > now:
        raise ValueError(f"failure of {failure.node} at {failure.at.isoformat()} is after decision time {now.isoformat()}")
    keys = scopes_of(failure.topology)
    for key in keys:
        fleet.size(key)  # a clear error if the caller's fleet view does not cover this node's scopes
    node = failure.node
    transitions: list[BreakerTransition] = []

    def hold(reason: SkipReason, detail: str, scope: str | None = None, counted: bool = True) -> Decision:
        return Decision(Verdict.HOLD, failure, now, Skip(reason, detail, scope), tuple(transitions), (), counted)

    # 1. a node already under remediation, or already taken out by another incident, is not a new failure
    if node in board.active or node in fleet.in_remediation:
        return hold(SkipReason.ALREADY_IN_REMEDIATION, f"{node} is already under remediation", counted=False)
    if node in fleet.out_of_service:
        return hold(SkipReason.ALREADY_OUT_OF_SERVICE, f"{node} is already out of service "
                    f"({fleet.out_of_service[node]}): nothing left to take out", counted=False)

    # 2. quiet scopes whose cool-down has passed become half-open (before this failure counts against them)
    for key in keys:
        t = board._cool_down(key, now)
        if t is not None:
            transitions.append(t)

    # 3. rack / switch / PDU breakers: already paused, or tripped by this failure (narrowest scope trips)
    domains = [k for k in keys if k != CLUSTER]
    scopes = tuple(keys)
    for key in domains:
        board._record(key, failure.at, node, scopes)
    unapproved = [k for k in domains if k not in approved]  # a person answered for these: not asked again
    held = _held_by(board, unapproved, node)
    if held is None:
        held = _trip(board, unapproved, fleet, failure, now, transitions)
    if held is not None:
        return hold(held[0], held[1], held[2], counted=False)

    # 4. the cluster-wide breaker counts only failures no domain breaker already contains
    board._record(CLUSTER, failure.at, node, scopes)
    if CLUSTER not in approved:
        held = _held_by(board, [CLUSTER], node) or _trip(board, [CLUSTER], fleet, failure, now, transitions)
        if held is not None:
            return hold(*held)

    # 5. capacity budget (medik8s minimum-healthy gate); never cordon a healthy fleet
    #    (a job restart keeps its node in service: only the suspect-detector half of the gate applies to it)
    out_now = set(fleet.in_remediation) | {n for n, f in board.active.items() if f.out_of_service}
    unhealthy = out_now | set(fleet.flagged) | {node}
    budget = check_budget(fleet.total, len(out_now), min(len(unhealthy), fleet.total), board.budget)
    if budget.detector_suspect and APPROVE_DETECTOR not in approved:
        return hold(SkipReason.DETECTOR_SUSPECT, budget.detail)
    if not budget.ok and failure.takes_node_out and APPROVE_BUDGET not in approved:
        return hold(SkipReason.CAPACITY_BUDGET, budget.detail)

    # 6. spare reserve: automation never takes the ready pool below the reserve
    note = budget.detail if failure.takes_node_out else "the node stays in service (no capacity used)"
    if failure.needs_spare:
        promised = {n for n, f in board.active.items() if f.needs_spare} - set(fleet.spare_claims)
        ready = fleet.ready_spares - len(promised)
        reserve = board.settings.spare_reserve
        if ready <= 0:
            # nothing to spend, so no reserve question: the failed node is taken out (the budgets above still
            # apply) and the flow's no-spare path decides — preempt lower-priority work with approval, shrink an
            # elastic job, or escalate; never a half-replacement
            note += f"; no validated spare ready (after {len(promised)} already promised): the no-spare path decides"
        elif ready - 1 < reserve and APPROVE_RESERVE not in approved:
            left = f"only {ready} ready spare{'s' if ready != 1 else ''}"
            return hold(
                SkipReason.SPARE_RESERVE,
                f"{left} (after {len(promised)} already promised) and the reserve is {reserve}: taking one would leave "
                f"{ready - 1} — a person must decide whether to spend the reserve",
            )
        else:
            note += f"; spare pool {ready} → {ready - 1} (reserve {reserve})"

    # 7. act; half-open scopes on the way take this remediation as their single probe
    probes = tuple(k for k in keys if board.state_of(k) is BreakerState.HALF_OPEN)
    for key in probes:
        board.status[key].probe_node = node
    board.active[node] = InFlight(now, failure.needs_spare, failure.takes_node_out)
    return Decision(Verdict.ACT, failure, now, None, tuple(transitions), probes, True, note)


def _held_by(board: BreakerBoard, keys: list[str], node: str) -> tuple[SkipReason, str, str] | None:
    """First scope among `keys` that is open, or half-open with its probe still running."""
    for key in keys:
        st = board.status.get(key)
        if st is None:
            continue
        if st.state is BreakerState.OPEN:
            kind = split_key(key)[0]
            cooldown = board.settings.limit(kind).cooldown_seconds
            how = (
                "a person must approve closing it"
                if st.manual or cooldown is None
                else f"it re-tries after {human_window(cooldown)} without new failures, or a person approves"
            )
            return (
                SkipReason.BREAKER_OPEN,
                f"automation paused in {scope_label(key)} since {st.since.isoformat(timespec='seconds')}: {st.reason}; {how}",
                key,
            )
        if st.state is BreakerState.HALF_OPEN and st.probe_node is not None and st.probe_node != node:
            return (
                SkipReason.PROBE_IN_FLIGHT,
                f"{scope_label(key)} is half-open and its probe remediation of {st.probe_node} has not finished",
                key,
            )
    return None


def _trip(
    board: BreakerBoard,
    keys: list[str],
    fleet: FleetView,
    failure: FailureEvent,
    now: datetime,
    transitions: list[BreakerTransition],
) -> tuple[SkipReason, str, str] | None:
    """Open the narrowest closed scope whose window now holds more failed nodes than it allows."""
    over = []
    for order, key in enumerate(keys):
        if board.state_of(key) is not BreakerState.CLOSED:
            continue
        size = fleet.size(key)
        allowed, why = board.allowed(key, size)
        count = board.failures_in_window(key)
        if count > allowed:
            over.append((size, order, key, count, allowed, why))
    if not over:
        return None
    size, _, key, count, allowed, why = min(over)
    kind = split_key(key)[0]
    window = human_window(board.settings.limit(kind).window_seconds)
    reason = (
        f"{count} nodes failed within {window}, over the limit of {allowed} ({why}): likely {_LIKELY_CAUSE[kind]}, "
        f"not {count} bad nodes"
    )
    also = [o[2] for o in sorted(over) if o[2] != key]
    if also:
        reason += f" (also over its limit: {', '.join(also)})"
    transitions.append(board._move(key, BreakerState.OPEN, reason, now, node=failure.node))
    detail = f"{scope_label(key)}: {reason} — automation paused in {scope_label(key)}, a human must look"
    return SkipReason.BREAKER_TRIPPED, detail, key
