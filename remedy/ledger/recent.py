"""Bounded reads of the ledger: what a decision needs, never the whole history.

The gate and triage run on every incident, so their reads must cost the same whether the ledger holds a thousand
actions or a million: each query here is bounded by a time range, a row count, or one row per node or scope, and
each is served by an index (migration 0004: actions by (kind, started_at) and by (kind, node, outcome, started_at);
0005: by (incident_id, kind, started_at)).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import and_, exists, func, select

from remedy.domain.model import ActionOutcome, IncidentStatus
from remedy.ledger import schema
from remedy.ledger.convert import action_record, breaker_event_record, require_aware
from remedy.ledger.engine import read_transaction
from remedy.ledger.records import ActionRecord, BreakerEventRecord

_SUCCEEDED = ActionOutcome.SUCCEEDED.value


def actions_since(led, kind: str, since: datetime, *, outcomes: Iterable[ActionOutcome] | None = None,
                  real_only: bool = True) -> list[ActionRecord]:
    """Actions of one kind started after `since`, oldest first (a time range of the (kind, started_at) index)."""
    a = schema.actions.c
    q = (select(schema.actions).where(a.kind == kind, a.started_at > require_aware(since, "since"))
         .order_by(a.started_at, a.id))
    if outcomes is not None:
        q = q.where(a.outcome.in_([ActionOutcome(o).value for o in outcomes]))
    if real_only:
        q = q.where(a.dry_run.is_(False))
    with read_transaction(led.engine) as conn:
        return [action_record(r) for r in conn.execute(q)]


def latest_actions(led, kind: str, limit: int, *, outcomes: Iterable[ActionOutcome] | None = None,
                   real_only: bool = True) -> list[ActionRecord]:
    """The newest `limit` actions of one kind, oldest first (the tail of the (kind, started_at) index)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    a = schema.actions.c
    q = select(schema.actions).where(a.kind == kind).order_by(a.started_at.desc(), a.id.desc()).limit(limit)
    if outcomes is not None:
        q = q.where(a.outcome.in_([ActionOutcome(o).value for o in outcomes]))
    if real_only:
        q = q.where(a.dry_run.is_(False))
    with read_transaction(led.engine) as conn:
        return [action_record(r) for r in reversed(conn.execute(q).all())]


def latest_outcomes(led, kind: str, limit: int) -> list[tuple[bool, dict]]:
    """(succeeded?, detail) of the newest `limit` finished real actions of one kind, oldest first: what a learner
    of outcomes needs, read from the (kind, started_at) index without building whole records."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    a = schema.actions.c
    q = (select(a.outcome, a.detail)
         .where(a.kind == kind, a.outcome.in_([_SUCCEEDED, ActionOutcome.FAILED.value]), a.dry_run.is_(False))
         .order_by(a.started_at.desc(), a.id.desc()).limit(limit))
    with read_transaction(led.engine) as conn:
        return [(r.outcome == _SUCCEEDED, dict(r.detail or {})) for r in reversed(conn.execute(q).all())]


def unfinished(led, started_kind: str, finished_kind: str) -> list[ActionRecord]:
    """Per node, its newest succeeded `started_kind` action that no succeeded `finished_kind` action on the same node
    followed: the remediations still in flight, oldest first.

    Two seeks per known node in the (kind, node, outcome, started_at) index, both answered from the index alone (its
    newest start, then "any finish since?"); only the rows still in flight are read. So the cost follows the fleet's
    size, not its history. Only real actions count: a dry run records `planned`, never `succeeded`.
    """
    a, o, n = schema.actions.alias("a"), schema.actions.alias("o"), schema.nodes.c
    newest = (select(func.max(a.c.started_at)).where(a.c.kind == started_kind, a.c.node == n.name,
                                                    a.c.outcome == _SUCCEEDED)
              .correlate(schema.nodes).scalar_subquery())
    latest = select(n.name.label("node"), newest.label("at")).subquery()
    ended = exists().where(and_(o.c.kind == finished_kind, o.c.node == latest.c.node, o.c.outcome == _SUCCEEDED,
                                o.c.started_at >= latest.c.at))
    live = select(latest.c.node, latest.c.at).where(latest.c.at.is_not(None), ~ended).subquery()
    g = schema.actions.c
    q = (select(schema.actions).join(live, and_(g.node == live.c.node, g.started_at == live.c.at))
         .where(g.kind == started_kind, g.outcome == _SUCCEEDED).order_by(g.started_at, g.id))
    with read_transaction(led.engine) as conn:
        rows = [action_record(r) for r in conn.execute(q)]
    newest_per_node = {r.node: r for r in rows}  # two starts at the same instant: the later id wins
    return sorted(newest_per_node.values(), key=lambda r: (r.started_at, r.id))


def claims_replacing(led, kind: str, waiting: dict[str, datetime]) -> set[str]:
    """Of the nodes in `waiting` (node → when its remediation began), those a succeeded real `kind` action (a spare
    promoted in its place: detail["replaces"]) names since that time. The match is made in the database on the
    JSON field: only the matching claims come back, not every claim since the oldest remediation in flight."""
    if not waiting:
        return set()
    a = schema.actions.c
    replaces = a.detail["replaces"].as_string()
    since = min(require_aware(t, "remediation start") for t in waiting.values())
    q = (select(replaces.label("replaces"), a.started_at)
         .where(a.kind == kind, a.started_at >= since, a.outcome == _SUCCEEDED, a.dry_run.is_(False),
                replaces.in_(sorted(waiting))))
    with read_transaction(led.engine) as conn:
        return {r.replaces for r in conn.execute(q) if r.started_at >= waiting[r.replaces]}


def latest_breaker_events(led) -> tuple[list[BreakerEventRecord], list[BreakerEventRecord]]:
    """(the newest event of every scope, the newest close of every scope): all a board needs of the breaker history.

    The newest event is the scope's state; the newest close is when its explained failures were last forgotten.
    """
    b = schema.breaker_events.c
    newest = select(func.max(b.id)).group_by(b.scope_kind, b.scope)
    closed = select(func.max(b.id)).where(b.to_state == "closed").group_by(b.scope_kind, b.scope)
    with read_transaction(led.engine) as conn:
        last = [breaker_event_record(r) for r in conn.execute(
            select(schema.breaker_events).where(b.id.in_(newest)).order_by(b.id))]
        closes = [breaker_event_record(r) for r in conn.execute(
            select(schema.breaker_events).where(b.id.in_(closed)).order_by(b.id))]
    return last, closes


def live_claims(led, kind: str, *, except_incident: int | None = None) -> set[str]:
    """Nodes named by succeeded `kind` actions (spare claims) of incidents still open or acting — found from those
    incidents (the incidents' status index), not by reading every claim ever made — plus claims made outside any
    incident, which stay taken. `except_incident`: the asking remediation's own claims do not count (None: a claim
    outside any incident asks, and those are its own)."""
    a, i = schema.actions.c, schema.incidents.c
    live = [IncidentStatus.OPEN.value, IncidentStatus.ACTING.value]
    of_live = (select(a.node).select_from(schema.incidents.join(schema.actions, a.incident_id == i.id))
               .where(i.status.in_(live), a.kind == kind, a.outcome == _SUCCEEDED))
    if except_incident is not None:
        of_live = of_live.where(i.id != except_incident)
    loose = select(a.node).where(a.kind == kind, a.outcome == _SUCCEEDED, a.incident_id.is_(None))
    with read_transaction(led.engine) as conn:
        taken = {r.node for r in conn.execute(of_live)}
        return taken if except_incident is None else taken | {r.node for r in conn.execute(loose)}
