"""The breaker gate as one Prefect task: the procedure is `remedy.safety.procedure`, the state is the ledger.

The board is never stored on its own: it is rebuilt from the ledger's append-only rows (every gate decision, every
breaker transition, every remediation outcome) under a lock, decided on, and the new rows written before the lock
is released. So concurrent failures (a rack storm) are decided one at a time, in arrival order, and the board
survives restarts. Every transition is recorded in the ledger, emitted as a Prefect event and shown on the run.

This module only wires the procedure's ports for a flow run (the ledger, the cluster, the lease fence, a person
asked by pausing the run) and exposes it as tasks: `pass_gate` (the whole gate, approvals included) and
`record_remediation_outcome` (the remediation ended). `check_breaker` is one decision, for benches and tests.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.safety import procedure
from remedy.safety.board import BreakerBoard
from remedy.safety.fleet import FleetNodes
from remedy.safety.lock import ledger_lock
from remedy.safety.procedure import Answer, GateCheck, GatePass, GateRequest, Question
from remedy.safety.scopes import BreakerTransition, FleetView
from tasks.leases import fence
from tasks.ledger import requester
from tasks.retry import transient_only
from tasks.story import say


@contextlib.contextmanager
def breaker_lock() -> Iterator[None]:
    """Serialise gate decisions (and every spend of shared capacity) across threads and processes."""
    with ledger_lock(runtime.settings().db_url, runtime.ledger().engine):
        yield


class RunPorts:
    """The gate's ports inside a flow run (or a task called with .fn in a test)."""

    def __init__(self) -> None:
        self.settings = runtime.settings()
        self.ledger = runtime.ledger()

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return breaker_lock()

    def gpu_nodes(self) -> FleetNodes:
        """The GPU nodes, versioned when they come from the watch-fed cache (the gate sums them once per change)."""
        from remedy.adapters.kubernetes import KubernetesCluster  # the cluster client is imported where it is used

        cluster = runtime.cluster()
        if isinstance(cluster, KubernetesCluster):
            version, nodes = cluster.gpu_node_snapshot()
            return FleetNodes(nodes, version)
        return FleetNodes(cluster.list_gpu_nodes())

    def fence(self, incident_id: int | None):
        return fence(incident_id)

    def requester(self) -> str:
        return requester()

    def announce(self, transition: BreakerTransition) -> None:
        _emit_breaker_event(transition)

    def ask(self, question: Question) -> Answer:
        from tasks.approvals import request_approval  # pauses this flow run until a person answers

        got = request_approval(kind=question.kind, title=question.title, summary_markdown=question.summary_markdown,
                               incident_id=question.incident_id, node=question.node,
                               timeout_seconds=question.timeout_seconds, default_on_timeout="deny")
        return Answer(got.decision, got.by, got.reason, got.approval_id)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def monotonic(self) -> float:
        return time.monotonic()

    def log(self, message: str) -> None:
        say("%s", message)  # the run's log, or the module logger outside a run (tasks.story)


def load_board(failure_at: datetime | None = None) -> BreakerBoard:
    """The breaker board as of now, rebuilt from a bounded window of the ledger (remedy.safety.history)."""
    return procedure.load_board(RunPorts(), failure_at)


def fleet_view(board: BreakerBoard) -> FleetView:
    return procedure.fleet_view(RunPorts(), board)


def record_transitions(transitions: list[BreakerTransition] | tuple[BreakerTransition, ...],
                       incident_id: int | None = None) -> None:
    procedure.record_transitions(RunPorts(), transitions, incident_id)


def held_on(scope_or_reason: str, within_hours: float = 24.0) -> list[str]:
    """Nodes whose latest gate decision holds them on this scope (or gate), newest first: who waits on the answer."""
    return procedure.held_on(RunPorts(), scope_or_reason, within_hours)


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


def _request(node: str, incident_id: int | None, signal: str, detected_at: str, dry_run: bool, needs_spare: bool,
             takes_node_out: bool) -> GateRequest:
    return GateRequest(node=node, incident_id=incident_id, signal=signal,
                       detected_at=datetime.fromisoformat(detected_at), dry_run=dry_run, needs_spare=needs_spare,
                       takes_node_out=takes_node_out)


@task(name="pass_gate", task_run_name="gate-{node}", cache_policy=NO_CACHE)
def pass_gate(node: str, incident_id: int | None, signal: str, detected_at: str, dry_run: bool, *,
              needs_spare: bool = True, takes_node_out: bool = True, ask: bool = True) -> GatePass:
    """The whole gate for one remediation (remedy.safety.procedure.pass_gate): decide; on a hold ask its one
    question (pausing the run) unless `ask` is off; after an approval decide again. Not retried as a whole: each
    decision is written once per (incident, approvals) and replayed, so a re-run asks nothing twice."""
    return procedure.pass_gate(RunPorts(), _request(node, incident_id, signal, detected_at, dry_run, needs_spare,
                                                    takes_node_out), ask=ask)


@task(name="check_breaker", task_run_name="breaker-gate-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def check_breaker(node: str, incident_id: int | None, signal: str, detected_at: str, dry_run: bool,
                  needs_spare: bool = True, takes_node_out: bool = True,
                  approved: tuple[str, ...] = ()) -> GateCheck:
    """One decision (ACT or HOLD), nobody asked: what bench/sim_scale.py times and tests drive. Flows use
    `pass_gate` (with `ask=False` when nobody is to be asked)."""
    return procedure.decide_once(RunPorts(), _request(node, incident_id, signal, detected_at, dry_run, needs_spare,
                                                      takes_node_out), approved)


@task(name="record_remediation_outcome", task_run_name="outcome-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1)
def record_remediation_outcome(node: str, succeeded: bool, incident_id: int | None,
                               dry_run: bool) -> tuple[BreakerTransition, ...]:
    """Tell the board a remediation ended: frees its capacity; a half-open probe closes or re-opens its scope."""
    return procedure.record_outcome(RunPorts(), node, succeeded, incident_id, dry_run)


def close_breaker(scope: str, by: str, incident_id: int | None = None) -> tuple[BreakerTransition, ...]:
    """A person approved: re-close the scope's breaker (fenced for `incident_id`)."""
    return procedure.close_breaker(RunPorts(), scope, by, incident_id)
