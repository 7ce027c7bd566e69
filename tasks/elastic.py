"""Elastic-job tasks: the job saves from its survivors, swaps a hot spare or runs one node short, then grows back.

Decisions are remedy.elastic's (and remedy.spares.hot's); these gather the facts and do one change each, recorded
in the ledger under their own keys (a shrink and the grow-back are two actions of one incident, never replayed one
for the other).
"""

from __future__ import annotations

from dataclasses import dataclass

from prefect import task

from remedy import runtime
from remedy.domain.model import Node, NodeState
from remedy.elastic import (
    FULL_SIZE,
    HOT,
    SPARE_ROLE,
    Continuation,
    ContinuationChoice,
    Elasticity,
    checkpoint_on_failure,
    choose_continuation,
    full_size_to_note,
    grow_back_to,
    restart_minutes,
)
from remedy.errors import ObjectNotFound
from remedy.remediate.choice import Durations
from remedy.spares.hot import HotPoolSizing, size_hot_pool
from tasks.ledger import act
from tasks.retry import retrying
from tasks.story import say

RETRY = retrying(1, 2, 4)


def hot_spares(nodes: list[Node], failed: str) -> tuple[str, ...]:
    """Hot spares that can take the job now: labelled hot, Ready, schedulable, not the failed node."""
    return tuple(sorted(n.name for n in nodes if n.labels.get(SPARE_ROLE) == HOT and n.name != failed
                        and n.ready and not n.unschedulable))


def _elasticity(failed: str) -> tuple[Elasticity, list[Node]]:
    settings = runtime.settings()
    work = settings.workload
    workload = runtime.cluster().workload(work.namespace, work.job)
    state, notes = workload.state(), workload.annotations()
    nodes = runtime.cluster().list_gpu_nodes()
    warm = [n for n in nodes if n.state is NodeState.SPARE and n.ready and n.name != failed]
    return Elasticity(desired=state.desired, elastic=state.elastic, hot_spares=hot_spares(nodes, failed),
                      spare_ready=bool(warm), join_minutes=Durations().join,
                      lead_minutes=settings.spares.replacement_lead_time_hours * 60.0,
                      reload_minutes=work.reload_minutes, restart_minutes=restart_minutes(notes, work.reload_minutes),
                      ), nodes


@task(name="weigh_continuation", task_run_name="weigh-continuation-{node}", timeout_seconds=120, **RETRY)
def weigh_continuation(node: str) -> ContinuationChoice:
    """Hot swap, shrink to the survivors, or stop and replace (remedy.elastic.choose_continuation). A workload that
    is not there (yet) has nothing to continue: stop and replace, as for any gang."""
    try:
        facts = _elasticity(node)[0]
    except ObjectNotFound as exc:
        return ContinuationChoice(Continuation.STOP_AND_REPLACE, {}, f"stop and replace: {exc}")
    choice = choose_continuation(facts)
    say("%s failed: %s", node, choice.why)
    return choice


@dataclass(frozen=True)
class CheckpointAnswer:
    """Did the job save from its surviving replicas before the node was drained?"""

    asked: bool
    saved: bool = False
    why: str = ""


def checkpoint_before_teardown(namespace: str, job: str, node: str, dry_run: bool,
                               incident_id: int | None, *, before: str = "") -> CheckpointAnswer:
    """A job that declares remedy.io/checkpoint-on-failure is asked to save now (the checkpoint handshake,
    tasks.cluster.wait_for_checkpoint) and waited for, at most its declared bound; the drain goes on either way."""
    from tasks.cluster import wait_for_checkpoint

    try:
        declared = checkpoint_on_failure(runtime.cluster().workload(namespace, job).annotations())
    except ObjectNotFound as exc:
        return CheckpointAnswer(False, why=str(exc))
    if not declared.asked:
        return CheckpointAnswer(False, why=declared.why)
    got = wait_for_checkpoint(namespace, job, node, ask=True, timeout_seconds=declared.wait_seconds,
                              dry_run=dry_run, incident_id=incident_id)
    say("checkpoint %s: %s", before or f"on failure of {node}", got["why"])
    return CheckpointAnswer(True, saved=bool(got["reached"]), why=got["why"])


def _annotate(namespace: str, job: str, values: dict[str, str | None], why: str, dry_run: bool) -> dict:
    return runtime.cluster(dry_run).workload(namespace, job).annotate(values, why).as_dict()


@task(name="shrink_workload", task_run_name="shrink-{job}-to-{nodes}", timeout_seconds=120, **RETRY)
def shrink_workload(namespace: str, job: str, nodes: int, full: int, dry_run: bool,
                    incident_id: int | None = None) -> dict:
    """Note the full size on the workload (a re-run or another process grows it back from there), then resize it
    to the survivors through its controller; a size the controller refuses is reported under "refused"."""
    def shrink() -> dict:
        noted = full_size_to_note(runtime.cluster().workload(namespace, job).annotations(), full)
        _annotate(namespace, job, {FULL_SIZE: str(noted)}, f"shrunk from {full} nodes; grows back to {noted} as "
                  "spares join", dry_run)
        return runtime.cluster(dry_run).resize_workload(namespace, job, nodes)

    out = act("shrink_workload", f"{namespace}/{job}", shrink, incident_id=incident_id, dry_run=dry_run)
    say("%s %s/%s to %d nodes (from %d) while the spare joins", "would shrink" if dry_run else "shrunk", namespace,
        job, nodes, full)
    return out


@task(name="grow_workload", task_run_name="grow-{job}", timeout_seconds=120, **RETRY)
def grow_workload(namespace: str, job: str, dry_run: bool, incident_id: int | None = None) -> dict:
    """Back to the size noted at the shrink (remedy.io/full-size), then the note goes."""
    def grow() -> dict:
        workload = runtime.cluster(dry_run).workload(namespace, job)
        state = workload.state()
        to = grow_back_to(workload.annotations(), state.desired, state.elastic)
        if to is None:
            return {"job": f"{namespace}/{job}", "nodes": state.desired, "changed": False,
                    "why": "not shrunk (no remedy.io/full-size above its size)"}
        out = runtime.cluster(dry_run).resize_workload(namespace, job, to)
        if not out.get("refused") and grow_back_to(workload.annotations(), to, state.elastic) is None:
            _annotate(namespace, job, {FULL_SIZE: None}, f"grown back to {to} nodes", dry_run)
        return out

    out = act("grow_workload", f"{namespace}/{job}", grow, incident_id=incident_id, dry_run=dry_run)
    say("%s %s/%s to %s nodes", "would grow" if dry_run else "grew", namespace, job, out.get("nodes"))
    return out


def promote_hot_spare(hot: str, replaces: str, incident_id: int | None, dry_run: bool) -> dict:
    """The job already moved onto the hot spare at the drain: it stops being a spare (its hot label goes) and must
    really carry the job (verify_joined)."""
    from tasks.cluster import label_node, verify_joined

    label_node(hot, {SPARE_ROLE: None}, dry_run=dry_run, incident_id=incident_id)
    say("hot spare %s replaces %s", hot, replaces)
    joined: dict = verify_joined(hot, timeout_seconds=runtime.settings().workload.resume_timeout_seconds,
                                 dry_run=dry_run)
    return joined


@task(name="size_hot_spares", task_run_name="size-hot-spares", timeout_seconds=120, **RETRY)
def size_hot_spares(failed: str = "") -> HotPoolSizing:
    """How many hot spares the job should hold (remedy.spares.hot), from the cluster as it is now."""
    settings = runtime.settings()
    e, nodes = _elasticity(failed)
    warm = sum(1 for n in nodes if n.state is NodeState.SPARE and n.ready and n.name != failed)
    return size_hot_pool(e, settings.spares.node_mtbf_hours, settings.spares.hot_spares, warm)


def refill_hot_spares(failed: str, incident_id: int | None, dry_run: bool, *, reason: str = "") -> dict:
    """A swap used a hot spare: make one warm spare hot again if the sizing says it pays (one per incident: each
    failure uses at most one). Untaint, label into the job's pool as hot, state active; the job runs nothing on it
    until the next failure. `failed` is the node the spare stands in for (its GPU model and place are matched)."""
    from tasks.cluster import label_node, taint_node
    from tasks.ledger import set_node_state
    from tasks.spares import select_spare

    sizing = size_hot_spares(failed)
    held = len(hot_spares(runtime.cluster().list_gpu_nodes(), failed))
    out: dict = {"target": sizing.target, "held": held, "made_hot": None, "why": sizing.explain()}
    if held >= sizing.target:
        return out
    chosen = select_spare(failed, incident_id=incident_id, dry_run=dry_run)
    if not chosen["spare"] or chosen["needs_validation"]:  # a stale spare is validated by spare-cycle first
        return out | {"why": f"{sizing.explain()}\nno warm spare to make hot: {chosen['why'].splitlines()[0]}"}
    spare = chosen["spare"]
    settings = runtime.settings()
    taint_node(spare, dry_run=dry_run, remove=[settings.taints.spare], incident_id=incident_id)
    label_node(spare, {settings.labels.pool: settings.labels.job_pool_value, SPARE_ROLE: HOT}, dry_run=dry_run,
               incident_id=incident_id)
    set_node_state(spare, NodeState.ACTIVE.value, reason=reason or f"hot spare for the job (after {failed})",
                   dry_run=dry_run, incident_id=incident_id)
    say("%s is a hot spare now (in the job's pool, idle until the next failure)", spare)
    return out | {"made_hot": spare, "held": held + 1}


@dataclass(frozen=True)
class HotFill:
    """What spare-cycle did to the hot pool: the sizing's target, the hot spares held after, the ones it made."""

    target: int
    held: int
    made_hot: tuple[str, ...] = ()
    why: str = ""


def fill_hot_spares(dry_run: bool) -> HotFill:
    """spare-cycle's step: bring the job's hot pool up to what the sizing says pays (at most `spares.hot_spares`), one
    warm spare at a time, so the first failure already finds a hot spare (until now only a swap refilled it). The
    job's first node stands in for "the failed node" of the sizing and the spare match; a job that is not there has
    no pool to fill."""
    work = runtime.settings().workload
    try:
        members = sorted(runtime.cluster().workload_nodes(work.namespace, work.job))
    except ObjectNotFound as exc:
        return HotFill(0, 0, why=f"no hot spares to hold: {exc}")
    if not members:
        return HotFill(0, 0, why=f"no hot spares to hold: {work.namespace}/{work.job} runs on no node yet")
    made: list[str] = []
    out: dict = {}
    for _ in range(runtime.settings().spares.hot_spares):
        out = refill_hot_spares(members[0], None, dry_run, reason="hot spare for the job (spare cycle fills the pool)")
        if not out["made_hot"] or out["made_hot"] in made:  # enough, none left, or a dry run planning the same one
            break
        made.append(out["made_hot"])
    held = out.get("held", 0) if not dry_run else len(made)
    return HotFill(out.get("target", 0), held, tuple(made), out.get("why", ""))


def checkpoint_before_grow(namespace: str, job: str, spare: str, dry_run: bool,
                           incident_id: int | None) -> CheckpointAnswer:
    """Growing back restarts the job (one re-rendezvous): a job that declares remedy.io/checkpoint-on-failure is asked
    to save first, under the same contract and bound as before a drain, so the restart loses nothing it trained
    short. The request is keyed by the joining spare, so it is its own action beside the failure's."""
    return checkpoint_before_teardown(namespace, job, spare, dry_run, incident_id,
                                      before=f"before growing back onto {spare}")


__all__ = ["CheckpointAnswer", "HotFill", "checkpoint_before_grow", "checkpoint_before_teardown", "fill_hot_spares",
           "grow_workload", "hot_spares", "promote_hot_spare", "refill_hot_spares", "shrink_workload",
           "size_hot_spares", "weigh_continuation"]
