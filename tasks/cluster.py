"""Cluster side effects as Prefect tasks: one API action each, named verb_object so UI names grep to code.

Every task takes `dry_run` and passes it down to the adapter (remedy.runtime.cluster); none branches on it.
Mutations go through `tasks.ledger.act`, so each is written to the ledger as it happens and never done twice for
one incident. Only transient failures retry (tasks.retry.transient_only).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.adapters.cluster import Drift, Taint
from remedy.domain.model import Node
from remedy.remediate.results import (
    CheckpointBoundary,
    Drained,
    IntakeReleased,
    Joined,
    NodeChange,
    Resized,
    WorkloadBack,
)
from remedy.safety.disruption import BudgetBlock, drain_blockers
from tasks.leases import node_fence
from tasks.ledger import act
from tasks.retry import retrying
from tasks.story import say

# Side effects are never cached; only transient failures are retried.
RETRY = retrying(1, 2, 4)


@task(name="read_node", task_run_name="read-{node}", timeout_seconds=60, **RETRY)
def read_node(node: str) -> Node:
    """The node as the cluster shows it now (labels, taints, readiness)."""
    return runtime.cluster().get_node(node)


@dataclass(frozen=True)
class WorkloadSize:
    ready: int  # pods running and ready
    desired: int  # pods the gang needs


@task(name="read_workload_size", task_run_name="size-{job}", timeout_seconds=60, **RETRY)
def read_workload_size(namespace: str, job: str) -> WorkloadSize:
    """How many pods of the training workload run, and how many it needs (through its controller's port)."""
    return WorkloadSize(*runtime.cluster().workload_size(namespace, job))


@task(name="cordon_node", task_run_name="cordon-{node}", timeout_seconds=60, **RETRY)
def cordon_node(node: str, reason: str, dry_run: bool, incident_id: int | None = None) -> NodeChange:
    from remedy.safety.intake import intake_owner
    from tasks.ledger import requester

    # the receiver may have cordoned this node for the same incident already: this run takes that cordon over
    adopt = intake_owner(incident_id) if incident_id is not None else None
    out = act("cordon_node", node,
              lambda: asdict(runtime.cluster(dry_run).cordon(node, reason=reason, by=requester(), adopt=adopt,
                                                             fence=node_fence(incident_id))),
              incident_id=incident_id, dry_run=dry_run)
    say("%s %s: %s", "would cordon" if dry_run else "cordoned", node, reason)
    return NodeChange.from_record(out)


@task(name="uncordon_node", task_run_name="uncordon-{node}", timeout_seconds=60, **RETRY)
def uncordon_node(node: str, reason: str, dry_run: bool, incident_id: int | None = None) -> NodeChange:
    from tasks.ledger import requester

    out = act("uncordon_node", node,
              lambda: asdict(runtime.cluster(dry_run).uncordon(node, reason=reason, by=requester(),
                                                               fence=node_fence(incident_id))),
              incident_id=incident_id, dry_run=dry_run)
    say("%s %s: %s", "would uncordon" if dry_run else "uncordoned", node, reason)
    return NodeChange.from_record(out)


def release_intake_quarantine(node: str, incident_id: int, why: str, dry_run: bool) -> IntakeReleased | None:
    """End of triage: uncordon a node the receiver quarantined for this incident that no remediation took over
    (triage chose to watch, the gate held, the fault cleared): nobody else would. None when the receiver did not
    quarantine it (one ledger read, no task run)."""
    from remedy.receiver.quarantine import action_key

    if incident_id is None or runtime.ledger().find_action(action_key(incident_id)) is None:
        return None
    return _release_intake_quarantine(node, incident_id, why, dry_run)


@task(name="release_intake_quarantine", task_run_name="release-quarantine-{node}", timeout_seconds=60, **RETRY)
def _release_intake_quarantine(node: str, incident_id: int, why: str, dry_run: bool) -> IntakeReleased:
    from remedy.adapters.kubernetes import ANN_CORDONED_BY
    from remedy.safety.intake import intake_owner
    from tasks.ledger import requester

    cluster = runtime.cluster(dry_run)
    live = cluster.get_node(node)
    if not live.unschedulable or live.annotations.get(ANN_CORDONED_BY) != intake_owner(incident_id):
        return IntakeReleased(False, why="taken over by a remediation, or uncordoned already")
    change = act("uncordon_node", node,
                 lambda: asdict(cluster.uncordon(node, reason=f"quarantine at intake released: {why}"[:250],
                                                 by=requester(), fence=node_fence(incident_id))),
                 incident_id=incident_id, dry_run=dry_run, key=f"incident-{incident_id}:release_quarantine:{node}")
    return IntakeReleased(True, change=NodeChange.from_record(change))


@task(name="taint_node", task_run_name="taint-{node}", timeout_seconds=60, **RETRY)
def taint_node(node: str, dry_run: bool, add: list[str] | None = None, remove: list[str] | None = None,
               effect: str = "NoSchedule", incident_id: int | None = None) -> NodeChange:
    """`add` and `remove` are taint keys; added taints get value "true" and `effect`."""
    taints = [Taint(key=k, effect=effect) for k in add or []]
    kind = "taint_node" if add else "untaint_node"
    out = act(kind, node,
              lambda: asdict(runtime.cluster(dry_run).set_taints(node, add=taints, remove=list(remove or []),
                                                                 fence=node_fence(incident_id))),
              incident_id=incident_id, dry_run=dry_run)
    change = ", ".join([f"+{k}" for k in add or []] + [f"-{k}" for k in remove or []])
    say("%s %s: %s", ("would taint" if add else "would untaint") if dry_run else ("tainted" if add else "untainted"),
        node, change)
    return NodeChange.from_record(out)


@task(name="label_node", task_run_name="label-{node}", timeout_seconds=60, **RETRY)
def label_node(node: str, labels: dict[str, str | None], dry_run: bool,
               incident_id: int | None = None) -> NodeChange:
    out = act("label_node", node, lambda: asdict(runtime.cluster(dry_run).set_labels(node, labels,
                                                                                     node_fence(incident_id))),
              incident_id=incident_id, dry_run=dry_run)
    change = ", ".join(f"{k}={v}" if v is not None else f"{k} removed" for k, v in labels.items())
    say("%s %s: %s", "would label" if dry_run else "labelled", node, change)
    return NodeChange.from_record(out)


@task(name="drain_node", task_run_name="drain-{node}", timeout_seconds=1800, **RETRY)
def drain_node(node: str, grace_period_seconds: int, deadline_seconds: float, dry_run: bool,
               incident_id: int | None = None) -> Drained:
    def drain() -> dict[str, Any]:
        report = runtime.cluster(dry_run).drain(
            node, grace_period_seconds=grace_period_seconds, deadline_seconds=deadline_seconds,
            fence=node_fence(incident_id))
        return asdict(report) | {"complete": report.complete}

    out = Drained.from_record(act("drain_node", node, drain, incident_id=incident_id, dry_run=dry_run))
    evicted = len(out.evicted)
    say("%s %s: evicted %d pod%s (grace %d s)%s", "would drain" if dry_run else "drained", node, evicted,
        "" if evicted == 1 else "s", grace_period_seconds,
        f", {len(out.not_evicted)} not evicted" if out.not_evicted else "")
    return out


@task(name="check_drift", task_run_name="check-drift-{node}", timeout_seconds=60, **RETRY)
def check_drift(node: str) -> Drift | None:
    """What an operator changed on the node by hand since gpu-remedy last acted on it, if anything."""
    return runtime.cluster().detect_drift(node)


@task(name="list_gpu_nodes", timeout_seconds=120, **RETRY)
def list_gpu_nodes() -> list[Node]:
    return runtime.cluster().list_gpu_nodes()


@task(name="wait_for_workload", task_run_name="wait-{job}-on-{node}", timeout_seconds=3600, **RETRY)
def wait_for_workload(namespace: str, job: str, node: str, timeout_seconds: float,
                      dry_run: bool) -> WorkloadBack:
    """Wait until the gang-scheduled job runs on the promoted node; report whether it is back at full size.

    The replacement is done when its node carries the job's pod. The job may still be short of nodes for other
    reasons (more failures than spares): that is reported, not waited for.
    """
    cluster = runtime.cluster()
    start = time.monotonic()
    on_node = cluster.workload_running_on(namespace, job, node)
    while not dry_run and not on_node and time.monotonic() - start < timeout_seconds:
        time.sleep(0.2)
        on_node = cluster.workload_running_on(namespace, job, node)
    ready, desired = cluster.workload_size(namespace, job)
    deadline = time.monotonic() + 5.0  # the last pods of a gang start together: give them a moment
    while not dry_run and on_node and ready < desired and time.monotonic() < deadline:
        time.sleep(0.2)
        ready, desired = cluster.workload_size(namespace, job)
    say("job %s/%s back at %d/%d%s", namespace, job, ready, desired, f" (on {node})" if on_node else f" (not yet on {node})")
    return WorkloadBack(ready, desired, on_node=on_node or dry_run, seconds=round(time.monotonic() - start, 2))


BUDGET_SETTLE_SECONDS = 12.0  # the Eviction API's own "still being processed" answer says retry after 10 s


@task(name="check_drain_budgets", task_run_name="budgets-{node}", timeout_seconds=120, **RETRY)
def check_drain_budgets(node: str, settle_seconds: float = BUDGET_SETTLE_SECONDS) -> tuple[BudgetBlock, ...]:
    """The pods on `node` that no eviction can move, read before draining (remedy.safety.disruption): a budget
    the disruption controller cannot compute (SyncFailed), one that expects no pods, one that keeps the whole gang,
    two budgets over one pod. A budget not yet processed by the controller gets a few seconds to catch up."""
    deadline = time.monotonic() + settle_seconds
    while True:
        blocks = tuple(drain_blockers(runtime.cluster().pod_budgets(node)))
        if not any(b.transient for b in blocks) or time.monotonic() >= deadline:
            return blocks
        time.sleep(1.0)


@task(name="verify_joined", task_run_name="verify-{node}-joined", timeout_seconds=900, **RETRY)
def verify_joined(node: str, timeout_seconds: float, dry_run: bool) -> Joined:
    """Wait until the promoted node is Ready, schedulable and has every GPU allocatable."""
    cluster = runtime.cluster()
    start = time.monotonic()
    ok, why = cluster.joined(node)
    while not ok and not dry_run and time.monotonic() - start < timeout_seconds:
        time.sleep(0.5)
        ok, why = cluster.joined(node)
    return Joined(node, ok or dry_run, why, round(time.monotonic() - start, 2))


@task(name="resize_workload", task_run_name="resize-{job}-to-{nodes}", timeout_seconds=120, **RETRY)
def resize_workload(namespace: str, job: str, nodes: int, dry_run: bool,
                    incident_id: int | None = None) -> Resized:
    out = act("resize_workload", f"{namespace}/{job}",
              lambda: runtime.cluster(dry_run).resize_workload(namespace, job, nodes),
              incident_id=incident_id, dry_run=dry_run)
    say("%s %s/%s to %d nodes", "would resize" if dry_run else "resized", namespace, job, nodes)
    return Resized.from_record(out)


@task(name="note_on_node", task_run_name="note-{node}", timeout_seconds=60, cache_policy=NO_CACHE)
def note_on_node(node: str, reason: str, message: str, dry_run: bool) -> None:
    """A Warning Event on the Node saying why automation stopped, for the on-call engineer who has only kubectl.
    Best effort (the adapter logs a failure); the same note twice is one Event with a higher count."""
    runtime.cluster(dry_run).record_event(node, reason=reason, message=message, type="Warning")


@task(name="wait_for_checkpoint", task_run_name="checkpoint-boundary-for-{node}", timeout_seconds=24 * 3600,
      cache_policy=NO_CACHE)
def wait_for_checkpoint(namespace: str, job: str, node: str, ask: bool, timeout_seconds: float, dry_run: bool,
                        incident_id: int | None = None) -> CheckpointBoundary:
    """Ask the job for a checkpoint now (`ask`) or wait for its next scheduled one; True once a checkpoint has
    completed after this call began — the boundary where a swap loses no work. A dry run asks nothing and waits
    for nothing."""
    import time
    from datetime import datetime

    from remedy.domain.durations import human_duration

    workload = runtime.cluster(dry_run).workload(namespace, job)
    start = datetime.now(UTC)
    asked = None
    if ask:
        asked = str(act("request_checkpoint", node, lambda: workload.request_checkpoint(start).as_dict(),
                        incident_id=incident_id, dry_run=dry_run).get("detail", ""))
    if dry_run:
        return CheckpointBoundary(True, bool(ask), "dry-run: no checkpoint waited for", dry_run=True)
    deadline = time.monotonic() + timeout_seconds
    while True:
        seen = workload.checkpoints()
        if seen.since(start) and seen.last is not None:
            return CheckpointBoundary(True, bool(ask), f"the job checkpointed at {seen.last.isoformat()}",
                                      at=seen.last.isoformat(), request_detail=asked)
        if time.monotonic() >= deadline:
            return CheckpointBoundary(False, bool(ask), f"the job reported no checkpoint within "
                                      f"{human_duration(timeout_seconds)}" + (" of the request" if ask else ""),
                                      request_detail=asked)
        time.sleep(min(2.0, max(0.1, timeout_seconds / 50)))
