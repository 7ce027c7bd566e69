"""This process's run leases (remedy.ledger.leases) seen from inside a flow run.

    @flow(name="replace-node")
    @keeps_lease                    # this run's lease, renewed in the background until the flow returns or raises
    def replace_node(...): ...

A flow that claims an incident or waits for a person holds its lease for as long as it runs; `act()` calls
`ensure_held()` before every side effect, so a run that lost its lease (stalled past it, found gone and taken over)
stops instead of acting next to the run that took its incident. Leaving the block ends the lease: an incident the
run leaves `acting` is then taken over at once by the next trigger or the watchdog.

`ensure_held()` is this process's view and can be a moment late (a process stopped and continued between the check
and the write). The ledger's own check is `fence(incident_id)`: passed to every acting write (action rows, gate
decisions, spare claims, incident status, approval requests, node lifecycle transitions, validations, breaker
events), it is checked inside that write's transaction
(remedy.ledger.base.LedgerBase._fenced). The cluster's is `node_fence(incident_id)`: passed to every destructive
cluster call, enforced by the API server (remedy.safety.fence).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from remedy import runtime
from remedy.ledger.errors import LeaseLost
from remedy.ledger.leases import LeaseKeeper
from remedy.ledger.records import Fence
from remedy.safety.fence import NodeFence
from remedy.settings.leases import lease_settings

P = ParamSpec("P")
R = TypeVar("R")

_keepers: dict[int, LeaseKeeper] = {}
_lock = threading.Lock()
_lineage: dict[str, tuple[str, ...]] = {}  # flow run id → the runs that started it (parent first); they never change


def keeper() -> LeaseKeeper:
    """The keeper of this process's ledger (tests and the demo swap the ledger: one keeper per ledger object)."""
    led = runtime.ledger()
    with _lock:
        k = _keepers.get(id(led))
        if k is None or k.ledger is not led:
            s = lease_settings(runtime.settings())
            k = _keepers[id(led)] = LeaseKeeper(led, ttl_seconds=s.ttl_seconds, renew_seconds=s.renew_seconds)
        return k


def current_run_id() -> str:
    try:
        from prefect.runtime import flow_run

        return str(flow_run.id or "")
    except Exception:  # outside a flow run
        return ""


@contextmanager
def keep_alive(run_id: str | None = None) -> Iterator[str]:
    """Hold this flow run's lease for the block (blocks nest: the lease ends with the outermost)."""
    run_id = run_id or current_run_id()
    if not run_id:  # not a flow run (a task called with .fn in a test): nothing to keep
        yield ""
        return
    k = keeper()
    k.hold(run_id)
    reason = "finished"
    try:
        yield run_id
    except BaseException as exc:
        reason = f"ended with {type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        k.release(run_id, reason=reason)


def keeps_lease(fn: Callable[P, R]) -> Callable[P, R]:
    """Run the flow function inside `keep_alive()` (under @flow: the signature Prefect reads is the function's)."""

    @functools.wraps(fn)
    def with_lease(*args: P.args, **kwargs: P.kwargs) -> R:
        with keep_alive():
            return fn(*args, **kwargs)

    return with_lease


def ensure_held() -> None:
    """Raise LeaseLost if the current flow run held a lease and lost it. Cheap: no ledger round trip while the
    background renewals succeed."""
    run_id = current_run_id()
    if not run_id:
        return
    led = runtime.ledger()
    with _lock:
        k = _keepers.get(id(led))
    if k is not None and k.ledger is led:
        k.check(run_id)


def ancestors(run_id: str) -> tuple[str, ...]:
    """Parent, grandparent, … of this flow run (a subflow acts under the claim of the run that started it). Read once
    per run from the API and kept: Prefect's runtime reads two records per level on every call."""
    with _lock:
        known = _lineage.get(run_id)
    if known is not None:
        return known
    inline = _inline_ancestors(run_id)
    if inline is not None:
        with _lock:
            _lineage[run_id] = inline
        return inline
    from uuid import UUID

    from prefect.client.orchestration import get_client

    chain: list[str] = []
    with get_client(sync_client=True) as client:
        parent_task = client.read_flow_run(UUID(run_id)).parent_task_run_id
        while parent_task is not None and len(chain) < 20:
            parent = client.read_task_run(parent_task).flow_run_id
            if parent is None:
                break
            chain.append(str(parent))
            parent_task = client.read_flow_run(parent).parent_task_run_id
    with _lock:
        _lineage[run_id] = tuple(chain)
    return tuple(chain)


def _inline_ancestors(run_id: str) -> tuple[str, ...] | None:
    """The ancestors known in this process, parent first, without an API read: none for a top-level run; for a
    subflow called inline, the flow-run contexts it was entered from (each Prefect context keeps the one it
    replaced). None when that does not account for the parent (a run started by `run_deployment` in another
    process or thread): then the API is asked."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None or str(ctx.flow_run.id) != run_id:
        return None
    if ctx.flow_run.parent_task_run_id is None:
        return ()
    chain: list[str] = []
    current = ctx
    while len(chain) < 20:
        replaced = getattr(getattr(current, "_token", None), "old_value", None)
        if not isinstance(replaced, FlowRunContext) or replaced.flow_run is None:
            break
        chain.append(str(replaced.flow_run.id))
        current = replaced
    if not chain or current.flow_run is None or current.flow_run.parent_task_run_id is not None:  # the lineage goes on outside this process
        return None
    return tuple(chain)


def fence(incident_id: int | None) -> Fence | None:
    """The fence for this flow run's writes about `incident_id` (None outside a flow run or without an incident:
    nothing to hold)."""
    run_id = current_run_id()
    if not run_id or incident_id is None:
        return None
    return Fence.of(run_id, *ancestors(run_id))


def node_fence(incident_id: int | None) -> NodeFence | None:
    """The incident's fence at the cluster for this flow run's calls (remedy.safety.fence): the API server refuses
    them once another run holds the incident; confirmed with the ledger exactly as this run's acting writes are.
    None outside a flow run or without an incident."""
    ledger_fence = fence(incident_id)
    if ledger_fence is None or incident_id is None:
        return None
    led = runtime.ledger()
    iid = incident_id
    return NodeFence(iid, ledger_fence.run, confirm=lambda: led.check_fence(iid, ledger_fence))


def hold_incident_node(incident_id: int | None, dry_run: bool) -> None:
    """On claiming an incident: put this run's fence on the incident's node at once, so a run that held it before
    (stopped, taken over) is refused by the API server from now on, even if this run never changes the node itself
    (it escalates, or stands down for the operator). Best effort: every fenced call writes the fence again first."""
    import logging

    from remedy.errors import RemedyError

    nf = node_fence(incident_id)
    if nf is None or dry_run:
        return
    try:
        node = runtime.ledger().get_incident(nf.incident_id).node
        runtime.cluster(dry_run).fence_node(node, nf)
    except LeaseLost:
        raise
    except RemedyError as exc:  # the API server is away: the next fenced call writes it
        logging.getLogger(__name__).warning("incident %s: could not put this run's fence on its node: %s",
                                            incident_id, exc)
