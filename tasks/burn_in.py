"""Burn-in and spare re-validation, one task per node: the checks run as Jobs (tasks.health.run_check), the node
moves through the lifecycle with the plain functions of the cluster and ledger tasks (no nested task runs).

The Prefect server persists ~20–25 task runs/s (shared/notes/environment.md), so a node is one task run for its
whole single-node suite and its verdict, never one per check. While the suite runs, each check's state is kept
in `BOARD` (in-process; the flow's thread-pool workers share it) for the flow's progress artifact.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.model import NodeState
from remedy.errors import NodeNotFound
from remedy.health import suite_for
from remedy.health.jobs import check_job
from remedy.health.results import BurnInVerdict, GroupCheck, PoolMember
from tasks.cluster import cordon_node, taint_node, uncordon_node
from tasks.health import judge_job, run_check
from tasks.ledger import act, requester, set_node_state
from tasks.notify import post_notice
from tasks.retry import transient_only

# A burn-in may start from these states; an active node carries work (quarantine it first) and a retired one
# comes back only by an operator's explicit transition.
BURN_IN_FROM = frozenset({None, NodeState.REPAIR, NodeState.QUARANTINED, NodeState.SPARE, NodeState.BURN_IN})
NCCL_GROUP_NODES = 2  # seed 001's multi-node criteria were measured on 16 GPUs: 2 nodes of 8
NCCL_GROUP_LABEL = "remedy.io/nccl-group"  # names a group's Job and pods (the nodes are named by node affinity)
CHECK_STATES = ("waiting", "running", "pass", "warn", "fail", "planned", "skipped", "error")


# --- plain logic (no Prefect, no I/O) -------------------------------------------------------------------------
def burn_in_refusal(node: str, state: NodeState | None) -> str | None:
    """Why `node` may not start a burn-in from `state`, or None when it may."""
    if state in BURN_IN_FROM:
        return None
    if state is NodeState.ACTIVE:
        return f"{node} is active (carrying work): quarantine and drain it before a burn-in"
    return f"{node} is retired: only an operator may bring it back (ledger transition by operator), then burn it in"


def nccl_groups(nodes: list[str], size: int = NCCL_GROUP_NODES) -> list[list[str]]:
    """Split idle nodes into multi-node NCCL groups of `size`; a leftover node joins the last group (a group
    of one is no multi-node test). Fewer than 2 nodes: no group."""
    if size < 2:
        raise ValueError(f"a multi-node group needs at least 2 nodes, got size {size}")
    nodes = sorted(nodes)
    if len(nodes) < 2:
        return []
    groups = [nodes[i:i + size] for i in range(0, len(nodes), size)]
    if len(groups[-1]) < 2:
        last = groups.pop()
        groups[-1] += last
    return groups


def stale_spares(spares: Sequence[Mapping[str, Any]], now: datetime,
                 freshness_hours: float) -> list[Mapping[str, Any]]:
    """Spares never validated or validated longer ago than the freshness window (`validated_at` ISO or None)."""
    limit = now - timedelta(hours=freshness_hours)
    out = []
    for s in spares:
        at = s.get("validated_at")
        if at is None or datetime.fromisoformat(at) < limit:
            out.append(s)
    return out


def by_failure_domain(nodes: Sequence[Mapping[str, Any]], domain: str = "rack") -> list[tuple[str, list[str]]]:
    """Node names grouped by rack (or switch, pdu), domains in name order; unlabelled nodes form one group."""
    groups: dict[str, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.get(domain) or f"(no {domain} label)", []).append(n["name"])
    return [(d, sorted(names)) for d, names in sorted(groups.items())]


def failed_validations(node: str) -> int:
    """Failed validations on record for `node` (burn-ins and spare re-validations: hardware that failed a check)."""
    return sum(1 for v in runtime.ledger().validations(node) if not v.passed)


class ProgressBoard:
    """Each check's state per node for the running flows in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, dict[str, dict[str, str]]] = {}

    def start(self, run: str, nodes: list[str], checks: list[str]) -> None:
        with self._lock:
            self._runs[run] = {n: {c: "waiting" for c in checks} for n in nodes}

    def set(self, run: str, node: str, check: str, state: str) -> None:
        with self._lock:
            if run in self._runs and node in self._runs[run]:
                self._runs[run][node][check] = state

    def finish_node(self, run: str, node: str, state: str) -> None:
        """Mark every check of `node` still waiting or running (skipped after a failure, or never run)."""
        with self._lock:
            for check, s in self._runs.get(run, {}).get(node, {}).items():
                if s in ("waiting", "running"):
                    self._runs[run][node][check] = state

    def rows(self, run: str) -> list[dict[str, str]]:
        with self._lock:
            return [{"node": n} | dict(checks) for n, checks in sorted(self._runs.get(run, {}).items())]

    def fraction(self, run: str) -> float:
        with self._lock:
            states = [s for checks in self._runs.get(run, {}).values() for s in checks.values()]
        return sum(s not in ("waiting", "running") for s in states) / len(states) if states else 1.0

    def forget(self, run: str) -> None:
        with self._lock:
            self._runs.pop(run, None)


BOARD = ProgressBoard()


# --- node lifecycle steps (plain functions; the tasks below and the flows call them) ------------------------
def enter_burn_in(node: str, level: str, dry_run: bool, purpose: str = "burn-in") -> str | None:
    """Burn-in taint + state burn-in; returns why the node may not be burned in (nothing done), or None."""
    settings = runtime.settings()
    try:
        state = runtime.ledger().get_node(node).state
    except Exception:  # not in the ledger: the caller syncs first; a node the cluster lacks is refused below
        runtime.cluster().get_node(node)
        state = None
    refusal = burn_in_refusal(node, state)
    if refusal:
        return refusal
    taint_node.fn(node, dry_run=dry_run, add=[settings.taints.burn_in],
                  remove=[settings.taints.spare, settings.taints.quarantine])
    set_node_state.fn(node, NodeState.BURN_IN.value, reason=f"{purpose} ({level})", dry_run=dry_run)
    return None


def run_single_node_checks(node: str, level: str, dry_run: bool, board: str | None) -> list[dict[str, Any]]:
    """The level's single-node checks in order; the first failure stops the suite (no hours of stress on a node
    already known bad), the rest are reported as skipped."""
    settings = runtime.settings()
    gpu_model = settings.health.gpu_model or runtime.cluster().get_node(node).gpu_model or None
    results = []
    for spec in suite_for(level, settings.health):
        if spec.multi_node:
            continue
        if board:
            BOARD.set(board, node, spec.id, "running")
        r = run_check(node, spec, gpu_model, dry_run)
        results.append(r)
        if board:
            BOARD.set(board, node, spec.id, r["verdict"])
        if r["verdict"] == "fail":
            if board:
                BOARD.finish_node(board, node, "skipped")
            break
    return results


def conclude(node: str, level: str, checks: list[dict[str, Any]], dry_run: bool, *, purpose: str = "burn-in",
             record: bool = True) -> BurnInVerdict:
    """Pass → validated, spare taint, state spare. Fail → quarantine, repair record, state repair, Slack notice,
    and a retirement candidate after `health.max_failed_burn_ins` failures."""
    settings = runtime.settings()
    failed = [c for c in checks if c["verdict"] == "fail"]
    passed = not failed
    why = "; ".join(f"{c['id']}: {', '.join(c['reasons']) or 'fail'}" for c in failed)
    if record and not dry_run:
        runtime.ledger().record_validation(node, level=level, passed=passed, requested_by=requester(),
                                           summary={"purpose": purpose, "checks": checks})
    taints = settings.taints
    verdict = BurnInVerdict(node, "", passed, level=level, checks=tuple(checks), dry_run=dry_run)
    if passed:
        taint_node.fn(node, dry_run=dry_run, add=[taints.spare], remove=[taints.burn_in, taints.quarantine])
        if runtime.cluster().get_node(node).unschedulable:  # a repaired node comes back cordoned
            uncordon_node.fn(node, reason=f"passed {level} {purpose}", dry_run=dry_run)
        set_node_state.fn(node, NodeState.SPARE.value, reason=f"passed {level} {purpose}", dry_run=dry_run)
        return replace(verdict, status="planned-spare" if dry_run else "spare", why="all checks passed")

    # Fail: out of the pool for good until repaired.
    cordon_node.fn(node, reason=f"failed {purpose}: {why}"[:250], dry_run=dry_run)
    taint_node.fn(node, dry_run=dry_run, add=[taints.quarantine], remove=[taints.burn_in, taints.spare])
    set_node_state.fn(node, NodeState.QUARANTINED.value, reason=f"failed {level} {purpose}: {why}", dry_run=dry_run)
    repair = {"node": node, "purpose": purpose, "level": level, "why": why,
              "failed_checks": [{"id": c["id"], "check": c["check"], "reasons": c["reasons"], "job": c.get("job")}
                                for c in failed]}
    act("open_repair", node, lambda: repair, incident_id=None, dry_run=dry_run)
    set_node_state.fn(node, NodeState.REPAIR.value, reason=f"failed {level} {purpose}: {why}", dry_run=dry_run)
    failures = failed_validations(node) + (1 if dry_run else 0)  # a dry run recorded nothing: count this one
    limit = settings.health.max_failed_burn_ins
    candidate = failures >= limit
    if candidate:
        detail = {"node": node, "failed_validations": failures, "limit": limit, "last_failure": why}
        act("mark_retirement_candidate", node, lambda: detail, incident_id=None, dry_run=dry_run)
    lemon = f" (failure {failures}: a retirement candidate for the lemon review)" if candidate else ""
    post_notice(f":x: gpu-remedy: {node} failed {level} {purpose} and went to repair{lemon}.\n{why}", dry_run=dry_run)
    return replace(verdict, status="planned-repair" if dry_run else "repair", why=why, failed_validations=failures,
                   retirement_candidate=candidate)


# --- tasks -------------------------------------------------------------------------------------------------
# No task timeout: it cannot interrupt a worker thread (Prefect warns); each check Job carries its own deadline.
@task(name="burn_in_node", task_run_name="burn-in-{node}-{level}", cache_policy=NO_CACHE,
      retries=1, retry_delay_seconds=5, retry_condition_fn=transient_only)
def burn_in_node(node: str, level: str, dry_run: bool, board: str | None = None,
                 conclude_now: bool = True) -> BurnInVerdict:
    """Burn-in taint → single-node suite → (if `conclude_now`) verdict. Levels with a multi-node check conclude
    after the group runs (`conclude_burn_in`)."""
    try:
        refusal = enter_burn_in(node, level, dry_run)
    except NodeNotFound as exc:
        refusal = str(exc)
    if refusal:
        if board:
            BOARD.finish_node(board, node, "skipped")
        return BurnInVerdict(node, "skipped", False, why=refusal)
    checks = run_single_node_checks(node, level, dry_run, board)
    if not conclude_now:
        passed = all(c["verdict"] != "fail" for c in checks)
        return BurnInVerdict(node, "checked", passed, level=level, checks=tuple(checks))
    return conclude(node, level, checks, dry_run)


@task(name="conclude_burn_in", task_run_name="conclude-{node}", cache_policy=NO_CACHE,
      retries=2, retry_delay_seconds=[1, 4], retry_condition_fn=transient_only)
def conclude_burn_in(node: str, level: str, checks: list[dict], dry_run: bool, purpose: str = "burn-in",
                     record: bool = True) -> BurnInVerdict:
    return conclude(node, level, checks, dry_run, purpose=purpose, record=record)


@task(name="run_nccl_group", task_run_name="nccl-group-{group_id}", cache_policy=NO_CACHE,
      retries=1, retry_delay_seconds=5, retry_condition_fn=transient_only)
def run_nccl_group(nodes: list[str], group_id: str, level: str, dry_run: bool) -> GroupCheck:
    """The level's multi-node NCCL sweep over `nodes` as one Job (a pod per node, gathered by a temporary label);
    the slowest member sets the pace, so a failure names the group, not yet the node."""
    settings = runtime.settings()
    spec = next((s for s in suite_for(level, settings.health) if s.multi_node), None)
    if spec is None:
        raise ValueError(f"level {level!r} has no multi-node check")
    cluster = runtime.cluster(dry_run)
    gpu_model = settings.health.gpu_model or runtime.cluster().get_node(nodes[0]).gpu_model or None
    name = f"nccl-group-{group_id}-{uuid.uuid4().hex[:5]}"
    # one Indexed Job over the group: node affinity names its nodes, pod anti-affinity puts one pod on each
    job = cluster.run_node_job(check_job(spec, name=name, nodes=list(nodes), settings=settings.health,
                                         labels=((NCCL_GROUP_LABEL, group_id),)))
    judged = judge_job(spec, job, gpu_model)
    return GroupCheck(spec.id, spec.check, name, tuple(nodes), judged["verdict"], tuple(judged["reasons"]),
                      judged.get("seconds"), judged.get("measurements"))


@task(name="survey_pool", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[1, 4],
      retry_condition_fn=transient_only)
def survey_pool() -> list[PoolMember]:
    """Every managed GPU node with its state, readiness, failure domains and last validation (one fleet read)."""
    led = runtime.ledger()
    known = {r.name: r for r in led.nodes()}
    out = []
    for n in runtime.cluster().list_gpu_nodes():
        rec = known.get(n.name)
        out.append(PoolMember(n.name, n.state.value if n.state else None, n.ready, n.gpu_model, n.topology.rack,
                              n.topology.switch, n.topology.pdu,
                              rec.validated_at.isoformat() if rec and rec.validated_at else None))
    return out


@task(name="hold_spares_for_check", task_run_name="hold-spares-{domain}", cache_policy=NO_CACHE,
      retries=2, retry_delay_seconds=[1, 4], retry_condition_fn=transient_only)
def hold_spares_for_check(nodes: list[str], domain: str, dry_run: bool) -> list[str]:
    """Spares about to be re-validated leave the pool (state burn-in) so no replacement picks one mid-check."""
    held = []
    for node in nodes:
        if enter_burn_in(node, "quick", dry_run, purpose="spare cycle") is None:
            held.append(node)
    return held


__all__ = [
    "BOARD", "NCCL_GROUP_NODES", "ProgressBoard", "burn_in_node", "burn_in_refusal", "by_failure_domain",
    "conclude", "conclude_burn_in", "hold_spares_for_check", "nccl_groups", "run_nccl_group",
    "stale_spares", "survey_pool",
]
