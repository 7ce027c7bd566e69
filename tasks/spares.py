"""Spare-pool tasks: choose the replacement (pure choice in remedy.spares.selection, facts gathered here)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.model import ActionOutcome, NodeState
from remedy.spares.selection import NoSpare, SpareCandidate, select_spare as choose_spare
from tasks.retry import transient_only


def _earlier_choice(incident_id: int | None) -> str | None:
    """The spare this incident already promoted (a re-run must not consume a second one)."""
    if incident_id is None:
        return None
    for a in runtime.ledger().actions(incident_id=incident_id, kind="set_state_active"):
        if a.outcome in (ActionOutcome.SUCCEEDED, ActionOutcome.RUNNING):
            return a.node
    return None


def correlated_failure(node: str, now: datetime) -> bool:
    """Another recent incident in the same rack, switch or PDU: the failure may share a cause."""
    settings = runtime.settings()
    led = runtime.ledger()
    me = led.get_node(node)
    window = timedelta(seconds=settings.breaker.rack.window_seconds * 10)
    for inc in led.incidents(since=now - window):
        if inc.node != node and ((me.rack and inc.rack == me.rack) or (me.switch and inc.switch == me.switch)
                                 or (me.pdu and inc.pdu == me.pdu)):
            return True
    return False


@task(name="select_spare", task_run_name="select-spare-for-{node}", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def select_spare(node: str, incident_id: int | None = None, lemons: list[str] | None = None) -> dict:
    """Pick the warm spare that replaces `node`; the answer explains itself (chosen and rejected, with reasons)."""
    earlier = _earlier_choice(incident_id)
    if earlier:
        return {"spare": earlier, "needs_validation": False, "why": f"{earlier} was already promoted for this incident"}
    cluster, led, settings = runtime.cluster(), runtime.ledger(), runtime.settings()
    now = datetime.now(timezone.utc)
    failed = cluster.get_node(node)
    candidates = []
    for n in cluster.list_gpu_nodes():
        if n.name == node or n.state is not NodeState.SPARE or not n.ready:
            continue
        try:
            validated_at = led.get_node(n.name).validated_at
        except Exception:
            validated_at = None
        candidates.append(SpareCandidate(n, validated_at))
    choice = choose_spare(failed, candidates, now, settings.spares, correlated=correlated_failure(node, now),
                          lemons=lemons or ())
    if isinstance(choice, NoSpare):
        return {"spare": None, "needs_validation": False, "why": choice.explain()}
    return {"spare": choice.name, "needs_validation": choice.needs_validation, "why": choice.explain()}


def validate_spare(spare: str, dry_run: bool, incident_id: int | None = None) -> dict:
    """A stale spare is validated (quick suite) before it takes work."""
    from tasks.health import validate_node

    return validate_node(spare, level="quick", dry_run=dry_run, incident_id=incident_id)
