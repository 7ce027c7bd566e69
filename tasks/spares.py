"""Spare-pool tasks: choose the replacement (pure choice in remedy.spares.selection, facts gathered here)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.model import Action, ActionOutcome, NodeState, is_fault
from remedy.health.results import Validation
from remedy.remediate.results import Joined
from remedy.spares.results import SpareChoice
from remedy.spares.selection import NoSpare, SpareCandidate
from remedy.spares.selection import select_spare as choose_spare
from tasks.ledger import requester
from tasks.retry import transient_only
from tasks.story import say

CLAIM_KIND = "claim_spare"


def _claim_key(incident_id: int, node: str) -> str:
    return f"incident-{incident_id}:{CLAIM_KIND}"


def _claimed_by_others(led, incident_id: int | None) -> set[str]:
    """Spares promised to other remediations still in progress: never hand one spare to two failed nodes."""
    from remedy.ledger.recent import live_claims

    return live_claims(led, CLAIM_KIND, except_incident=incident_id)


def correlated_failure(node: str, now: datetime) -> bool:
    """Another recent incident in the same rack, switch or PDU: the failure may share a cause."""
    settings = runtime.settings()
    led = runtime.ledger()
    me = led.get_node(node)
    window = timedelta(seconds=settings.breaker.rack.window_seconds * 10)
    for inc in led.incidents(since=now - window):
        if inc.node != node and is_fault(inc) and ((me.rack and inc.rack == me.rack) or (me.switch and inc.switch == me.switch)
                                 or (me.pdu and inc.pdu == me.pdu)):
            return True
    return False


def last_fixed(led) -> dict[str, datetime]:
    """Node → when a reset or reboot last cleared a fault on it (fix-in-place's rungs and recover-node's off-path
    fixes are both `fix_<step>` rows): select_spare uses such a node after the spares with a clean record."""
    from remedy.remediate.choice import ATTEMPT_OPTIONS, Option

    out: dict[str, datetime] = {}
    for kind, option in ATTEMPT_OPTIONS.items():
        if option is Option.RESTART:  # a restart fixes the application, not the node
            continue
        for a in led.actions(kind=kind):
            if a.outcome is ActionOutcome.SUCCEEDED and not a.dry_run:
                when = a.finished_at or a.started_at
                out[a.node] = max(out.get(a.node, when), when)
    return out


@task(name="select_spare", task_run_name="select-spare-for-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def select_spare(node: str, incident_id: int | None = None, lemons: list[str] | None = None,
                 dry_run: bool = False) -> SpareChoice:
    """Pick the warm spare that replaces `node`; the answer explains itself (chosen and rejected, with reasons).
    `lemons=None` reads the lemon review's candidates from the ledger, so every caller keeps them out."""
    from tasks.gate import breaker_lock  # one lock for every decision that spends the shared pool
    from tasks.leases import ensure_held, fence

    ensure_held()  # a run that lost its lease must not claim a spare: its incident may be another run's now
    cluster, led, settings = runtime.cluster(), runtime.ledger(), runtime.settings()
    with breaker_lock():
        key = _claim_key(incident_id, node) if incident_id is not None else None
        earlier = led.actions(key_prefix=key) if key is not None else []
        done = [a for a in earlier if a.outcome is ActionOutcome.SUCCEEDED and "spare" in a.detail]
        if done:  # a re-run of this incident: the spare was chosen once
            return SpareChoice.from_record(done[-1].detail | {"replayed": True})
        now = datetime.now(UTC)
        failed = cluster.get_node(node)
        taken = _claimed_by_others(led, incident_id)
        fixed = last_fixed(led)
        if lemons is None:  # the lemon review's deferred and not-yet-retired candidates (remedy.spares.lemons)
            from remedy.spares.lemons import lemon_candidates

            lemons = list(lemon_candidates(led))
        ready = [n for n in cluster.list_gpu_nodes()
                 if n.name != node and n.state is NodeState.SPARE and n.ready and n.name not in taken]
        # each ready spare's failures in the lemon lookback window: the cleanest record goes first
        history = led.fault_counts((n.name for n in ready), now - timedelta(days=settings.lemon.lookback_days))
        candidates = []
        for n in ready:
            try:
                validated_at = led.get_node(n.name).validated_at
            except Exception:
                validated_at = None
            candidates.append(SpareCandidate(n, validated_at, fixed.get(n.name), history.get(n.name, 0)))
        choice = choose_spare(failed, candidates, now, settings.spares, correlated=correlated_failure(node, now),
                              lemons=lemons)
        if isinstance(choice, NoSpare):
            if not candidates and taken:  # the pool is not empty: every ready spare is spoken for
                choice = NoSpare(f"all {len(taken)} ready spare(s) are claimed by other remediations "
                                 f"({', '.join(sorted(taken))})", choice.rejected)
            why = choice.explain() + (f"\n(promised to other remediations: {', '.join(sorted(taken))})"
                                      if taken and candidates else "")
            return SpareChoice(None, False, why)
        chosen = SpareChoice(choice.name, choice.needs_validation, choice.explain())
        say("%s (replaces %s)", choice.explain().splitlines()[0], node)
        if dry_run or incident_id is None:  # a claim binds a spare to an incident; without one, only advise
            return chosen
        # One row, written whole: a run killed mid-way leaves either a claim with its spare or none. A key already
        # taken by an unfinished claim from before (its run died) gets the next attempt number.
        attempt = _claim_key(incident_id, node) + (f"#{len(earlier) + 1}" if earlier else "")
        led.start_action(Action(kind=CLAIM_KIND, node=choice.name, requested_by=requester(), incident_id=incident_id,
                                outcome=ActionOutcome.SUCCEEDED, detail=chosen.record(), idempotency_key=attempt),
                         fence=fence(incident_id))  # a run taken over while it stalled claims nothing
        return chosen


def validate_spare(spare: str, dry_run: bool, incident_id: int | None = None) -> Validation:
    """A stale spare is validated (quick suite) before it takes work."""
    from tasks.health import validate_node

    return validate_node(spare, level="quick", dry_run=dry_run, incident_id=incident_id)


def promote_spare(spare: str, replaces: str, reason: str, incident_id: int | None, dry_run: bool) -> Joined:
    """The spare takes `replaces`' place: untaint, label into the job's pool, ledger state active; then wait until it
    has really joined (Ready, schedulable, every GPU allocatable). Returns verify_joined's answer. Steps, not one
    task: each is its own recorded action (replace-node and retire-node both promote this way)."""
    from tasks.cluster import label_node, taint_node, verify_joined
    from tasks.ledger import set_node_state

    settings = runtime.settings()
    taint_node(spare, dry_run=dry_run, remove=[settings.taints.spare], incident_id=incident_id)
    label_node(spare, {settings.labels.pool: settings.labels.job_pool_value}, dry_run=dry_run,
               incident_id=incident_id)
    set_node_state(spare, NodeState.ACTIVE.value, reason=reason, dry_run=dry_run, incident_id=incident_id,
                   replaces=replaces)
    return verify_joined(spare, timeout_seconds=settings.workload.resume_timeout_seconds, dry_run=dry_run)
