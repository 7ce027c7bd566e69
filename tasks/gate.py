"""The breaker gate as Prefect tasks: the decision is `remedy.safety.breaker.decide`, the state is the ledger.

The board is never stored on its own: it is rebuilt from the ledger's append-only rows (every gate decision, every
breaker transition, every remediation outcome) under a lock, decided on, and the new rows written before the lock
is released. So concurrent failures (a rack storm) are decided one at a time, in arrival order, and the board
survives restarts. Every transition is recorded in the ledger, emitted as a Prefect event and shown on the run.
"""

from __future__ import annotations

import logging

import contextlib
import fcntl
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.durations import human_duration
from remedy.domain.model import Action, ActionOutcome, NodeState, Topology
from remedy.safety import history
from remedy.safety.board import BreakerBoard
from remedy.safety.breaker import decide
from remedy.safety.history import GATE_KIND, OUTCOME_KIND
from remedy.safety.scopes import BreakerTransition, FailureEvent, FleetView
from tasks.leases import fence
from remedy.spares.selection import validated_for_work
from tasks.ledger import requester
from tasks.retry import transient_only

_thread_lock = threading.Lock()


@contextlib.contextmanager
def breaker_lock() -> Iterator[None]:
    """Serialise gate decisions across threads and processes sharing the ledger."""
    url = runtime.settings().db_url
    with _thread_lock:
        if url.startswith("sqlite"):
            path = Path(url.split("///", 1)[-1] + ".breaker.lock")
            with open(path, "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
        else:  # PostgreSQL: a session advisory lock held on one connection for the decision
            from sqlalchemy import text

            with runtime.ledger().engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(727372)"))
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(727372)"))
                    conn.commit()


def load_board(failure_at: datetime | None = None) -> BreakerBoard:
    """The breaker board as of now, rebuilt from a bounded window of the ledger (remedy.safety.history): real
    decisions only, dry-runs never move a breaker. `failure_at`: the failure about to be decided."""
    settings = runtime.settings()
    return history.load_board(runtime.ledger(), settings.breaker, settings.budget, datetime.now(timezone.utc),
                              failure_at)


def fleet_view(board: BreakerBoard) -> FleetView:
    """Managed GPU nodes per scope, ready spares, what is already out, what the detector flags."""
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    # Scope sizes count every node that serves or is being remediated (repair included), so a storm that moves
    # nodes to repair does not shrink the denominator of the percentage limits while it is going on.
    serving = [n for n in nodes if n.state not in (NodeState.SPARE, NodeState.BURN_IN, NodeState.RETIRED)]
    # the reserve counts spares that may carry work now (validated: remedy.spares.selection.validated_for_work)
    now, spares = datetime.now(timezone.utc), runtime.settings().spares
    validated = {r.name: r.validated_at for r in led.nodes(NodeState.SPARE)}
    from remedy.spares.lemons import lemon_candidates  # never handed out, so no reserve (as in the simulator)

    lemons = lemon_candidates(led)
    ready_spares = sum(1 for n in nodes if n.state is NodeState.SPARE and n.ready and n.name not in lemons
                       and validated_for_work(validated.get(n.name), now, spares))
    in_remediation = {n.name for n in nodes if n.state is NodeState.QUARANTINED}
    out_of_service = {n.name: n.state.value for n in nodes if n.state in (NodeState.REPAIR, NodeState.RETIRED)}
    open_incidents = {i.node for i in led.incidents(status="open", severity="critical")}
    return FleetView.from_nodes(serving, ready_spares=ready_spares, in_remediation=in_remediation - set(board.active),
                                flagged=open_incidents, spare_claims=history.spare_claims(led, board),
                                out_of_service=out_of_service)


def record_transitions(transitions: list[BreakerTransition] | tuple[BreakerTransition, ...],
                       incident_id: int | None = None) -> None:
    """Write the transitions (all or none), then announce them. With an incident, fenced like the decision that
    caused them: a run that lost its incident moves no breaker (LeaseLost). A person's close (the CLI) has none."""
    if not transitions:
        return
    runtime.ledger().record_breaker_events(
        [{"scope_kind": t.scope_kind, "scope": t.scope, "from_state": t.from_state.value,
          "to_state": t.to_state.value, "reason": t.reason, "by": t.by} for t in transitions],
        incident_id=incident_id, fence=fence(incident_id))
    for t in transitions:
        _emit_breaker_event(t)


def _emit_breaker_event(t: BreakerTransition) -> None:
    try:
        from prefect.events import emit_event
        from prefect.settings import get_current_settings

        if not get_current_settings().api.url:  # no server configured: do not spin up an ephemeral one for this
            return

        emit_event(
            event=f"remedy.breaker.{t.to_state.value}",
            resource={"prefect.resource.id": f"remedy.breaker.{t.scope_kind}.{t.scope}",
                      "prefect.resource.name": f"{t.scope_kind} {t.scope}"},
            payload=t.to_dict(),
        )
    except Exception as exc:  # noqa: BLE001 - the ledger row is the record; the event is a notification
        logging.getLogger(__name__).warning("breaker %s:%s → %s recorded, but the Prefect event was not emitted: %s",
                                            t.scope_kind, t.scope, t.to_state.value, exc)


@task(name="check_breaker", task_run_name="breaker-gate-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def check_breaker(node: str, incident_id: int | None, signal: str, detected_at: str, dry_run: bool,
                  needs_spare: bool = True, takes_node_out: bool = True,
                  approved: tuple[str, ...] = ()) -> dict[str, Any]:
    """ACT or HOLD for this failure, with the reason in plain words and the breaker transitions it caused.

    `approved`: what people already said yes to for this incident (remedy.safety.breaker.approval_token); the
    whole gate runs again with only those questions answered. Each (incident, approvals) is decided once."""
    led = runtime.ledger()
    key = f"incident-{incident_id}:{GATE_KIND}" + (f":approved={','.join(sorted(approved))}" if approved else "") \
        + (":dry-run" if dry_run else "")
    with breaker_lock():
        earlier = led.find_action(key)
        if earlier is not None:  # a re-run (or a concurrent duplicate) of this incident: decided once
            return dict(earlier.detail) | {"replayed": True}
        now = datetime.now(timezone.utc)
        at = min(datetime.fromisoformat(detected_at), now)
        board = load_board(failure_at=at)
        cooled = board.cool_downs(now)
        topo: Topology = led.get_node(node).topology
        failure = FailureEvent(node, at, topo, needs_spare=needs_spare, signal=signal, takes_node_out=takes_node_out)
        decision = decide(failure, board, fleet_view(board), now, approved=frozenset(approved))
        detail = {"act": decision.acted, "explain": decision.explain(), "approved": sorted(approved),
                  "open_scopes": board.not_closed(),
                  "skip": decision.skip.reason.value if decision.skip else None,
                  "scope": decision.skip.scope if decision.skip else None,
                  "transitions": [t.to_dict() for t in (*cooled, *decision.transitions)],
                  "decision": decision.to_dict()}
        record, _ = led.start_action(Action(kind=GATE_KIND, node=node, requested_by=requester(), dry_run=dry_run,
                                            incident_id=incident_id, idempotency_key=key), fence=fence(incident_id))
        acted = ActionOutcome.PLANNED if dry_run else ActionOutcome.SUCCEEDED
        led.finish_action(record.id, acted if decision.acted else ActionOutcome.SKIPPED,
                          error="" if decision.acted else decision.explain(), detail=detail)
        if not dry_run:
            record_transitions([*cooled, *decision.transitions], incident_id)
    return detail


@task(name="record_remediation_outcome", task_run_name="outcome-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1)
def record_remediation_outcome(node: str, succeeded: bool, incident_id: int | None, dry_run: bool) -> list[dict]:
    """Tell the board a remediation ended: frees its capacity; a half-open probe closes or re-opens its scope."""
    led = runtime.ledger()
    with breaker_lock():
        board = load_board()
        now = datetime.now(timezone.utc)
        # dry-run decisions never entered the board, so their outcomes do not leave it either
        transitions = [] if dry_run or not board.is_active(node) else board.record_outcome(node, succeeded, now)
        record, new = led.start_action(Action(kind=OUTCOME_KIND, node=node, requested_by=requester(),
                                              dry_run=dry_run, incident_id=incident_id,
                                              idempotency_key=f"incident-{incident_id}:{OUTCOME_KIND}:{node}"
                                              + (":dry-run" if dry_run else "")), fence=fence(incident_id))
        if new:
            led.finish_action(record.id, ActionOutcome.PLANNED if dry_run else ActionOutcome.SUCCEEDED,
                              detail={"succeeded": succeeded})
            if not dry_run:
                record_transitions(transitions, incident_id)
    return [t.to_dict() for t in transitions]


@task(name="close_breaker", task_run_name="close-breaker-{scope}", cache_policy=NO_CACHE)
def close_breaker(scope: str, by: str, incident_id: int | None = None) -> list[dict]:
    """A person approved: re-close the scope's breaker (the failures it explained are forgotten). Written by the
    run that asked, for `incident_id`: fenced, so a run taken over while it waited closes nothing (the run that
    has the incident now asks again)."""
    with breaker_lock():
        board = load_board()
        transitions = board.approve_close(scope, by, datetime.now(timezone.utc))
        record_transitions(transitions, incident_id)
    return [t.to_dict() for t in transitions]


def held_on(scope_or_reason: str, within_hours: float = 24.0) -> list[str]:
    """Nodes whose latest gate decision holds them on this scope (or gate), newest first: who waits on the answer."""
    since = datetime.now(timezone.utc) - timedelta(hours=within_hours)
    return history.held_on(runtime.ledger(), scope_or_reason, since)


@task(name="wait_for_decision", task_run_name="wait-approval-{approval_id}", cache_policy=NO_CACHE,
      timeout_seconds=24 * 3600)
def wait_for_decision(approval_id: int, timeout_seconds: float) -> dict[str, Any]:
    """Held work whose scope already has an approval request waits for that one decision (one Slack message)."""
    led = runtime.ledger()
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        a = led.get_approval(approval_id)
        if a.decision:
            return {"decision": a.decision, "by": a.decided_by or "", "reason": a.reason, "approval_id": a.id}
        time.sleep(0.5)
    return {"decision": "timeout", "by": "", "reason": f"no decision within {human_duration(timeout_seconds)}",
            "approval_id": approval_id}


@task(name="find_open_question", task_run_name="find-approval-{kind}", cache_policy=NO_CACHE)
def find_open_question(kind: str, within_seconds: float) -> int | None:
    """The pending approval already asking about `kind` (polled briefly: the asker may be a moment behind)."""
    led = runtime.ledger()
    deadline = time.monotonic() + within_seconds
    while True:
        pending = [a for a in led.approvals(pending=True) if a.kind == kind]
        if pending:
            return pending[0].id
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.25)
