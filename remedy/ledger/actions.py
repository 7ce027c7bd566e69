"""Actions (what automation or an operator did to a node), breaker transitions and human approvals."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select, update
from sqlalchemy.exc import IntegrityError

from remedy.domain.model import Action, ActionOutcome
from remedy.ledger import schema
from remedy.ledger.base import LedgerBase, inserted_id
from remedy.ledger.convert import (
    action_record,
    approval_record,
    as_enum,
    breaker_event_record,
    require_aware,
    require_choice,
    require_json,
    require_text,
)
from remedy.ledger.errors import IdempotentReplay, LedgerConflict, RecordNotFound
from remedy.ledger.records import ActionRecord, ApprovalRecord, BreakerEventRecord, Fence

BREAKER_SCOPES = ("cluster", "rack", "switch", "pdu")
# Recorded already over (a gate's refusal is one SKIPPED row): finished when started unless told otherwise.
_DONE_AT_START = frozenset({ActionOutcome.SUCCEEDED, ActionOutcome.FAILED, ActionOutcome.SKIPPED})
DECISIONS = ("approve", "deny", "timeout")


class ActionsMixin(LedgerBase):
    # --- actions -------------------------------------------------------------------------------------------
    def start_action(self, action: Action, *, fence: Fence | None = None) -> tuple[ActionRecord, bool]:
        """Record an action as it starts. A known idempotency key returns (existing, False) and writes nothing.

        An action started as succeeded/failed/skipped (e.g. a gate's refusal) is finished at its start time.
        `fence`: the writing run must still hold the action's incident (LeaseLost otherwise; see LedgerBase._fenced).
        """
        require_text(action.kind, "action kind")
        require_text(action.node, "action node")
        outcome = as_enum(ActionOutcome, action.outcome, "action outcome")
        require_json(action.detail, "action detail")
        require_aware(action.started_at, "action started_at")
        require_aware(action.finished_at, "action finished_at")
        key = action.idempotency_key
        if key is not None:
            require_text(key, "idempotency_key")
        values = {
            "kind": action.kind, "node": action.node, "incident_id": action.incident_id,
            "requested_by": action.requested_by or "", "dry_run": bool(action.dry_run),
            "started_at": action.started_at,
            "finished_at": action.finished_at or (action.started_at if outcome in _DONE_AT_START else None),
            "outcome": outcome.value,
            "error": action.error or "", "detail": action.detail, "idempotency_key": key,
        }
        try:
            with self._write() as conn:
                # the fence on the lease clock: the action's own time is this host's, unless a test clock stamps both
                self._fenced(conn, action.incident_id, fence, action.started_at if self._test_clock else None)
                if key is not None and (existing := self._action_by_key(conn, key, action)):
                    return existing, False
                if action.incident_id is not None:
                    self._require_incident(conn, action.incident_id)
                new_id = inserted_id(conn.execute(schema.actions.insert().values(**values)))
                return self._action(conn, new_id), True
        except IntegrityError:
            # A concurrent start with the same key won the insert: its row is the answer.
            if key is None:
                raise
            with self._read() as conn:
                existing = self._action_by_key(conn, key, action)
            if existing is None:
                raise
            return existing, False

    @staticmethod
    def _action_by_key(conn: Connection, key: str, action: Action) -> ActionRecord | None:
        row = conn.execute(select(schema.actions).where(schema.actions.c.idempotency_key == key)).first()
        if row is None:
            return None
        existing = action_record(row)
        if (existing.kind, existing.node) != (action.kind, action.node):
            raise IdempotentReplay(key, f"{existing.kind} on {existing.node}", f"{action.kind} on {action.node}")
        return existing

    @staticmethod
    def _action(conn: Connection, action_id: int) -> ActionRecord:
        row = conn.execute(select(schema.actions).where(schema.actions.c.id == action_id)).first()
        if row is None:
            raise RecordNotFound("action", action_id)
        return action_record(row)

    @staticmethod
    def _require_incident(conn: Connection, incident_id: int) -> None:
        if conn.execute(select(schema.incidents.c.id).where(schema.incidents.c.id == incident_id)).first() is None:
            raise RecordNotFound("incident", incident_id)

    def get_action(self, action_id: int) -> ActionRecord:
        with self._read() as conn:
            return self._action(conn, action_id)

    def finish_action(
        self,
        action_id: int,
        outcome: ActionOutcome,
        *,
        error: str = "",
        detail: dict | None = None,
        at: datetime | None = None,
    ) -> ActionRecord:
        """Fill finished_at/outcome/error once; `detail` is merged into the start detail.

        Finishing again with the same outcome returns the record unchanged (a retried task); a different
        outcome is a LedgerConflict.
        """
        outcome = as_enum(ActionOutcome, outcome, "action outcome")
        if outcome is ActionOutcome.RUNNING:
            raise ValueError(f"action {action_id}: 'running' is not a finishing outcome")
        if detail is not None:
            require_json(detail, "action detail")
        at = self._now(at)
        a = schema.actions.c
        with self._write() as conn:
            current = self._action(conn, action_id)
            merged = {**current.detail, **(detail or {})}
            swapped = conn.execute(
                update(schema.actions)
                .where(a.id == action_id, a.finished_at.is_(None))
                .values(finished_at=at, outcome=outcome.value, error=error or "", detail=merged)
            ).rowcount
            done = self._action(conn, action_id)
        if swapped == 1 or done.outcome is outcome:
            return done
        raise LedgerConflict(
            f"action {action_id} ({done.kind} on {done.node}) already finished as {done.outcome.value}; "
            f"refusing to record {outcome.value}"
        )

    def find_action(self, idempotency_key: str) -> ActionRecord | None:
        """The action started with this idempotency key, if any."""
        with self._read() as conn:
            row = conn.execute(select(schema.actions).where(schema.actions.c.idempotency_key == idempotency_key)).first()
            return action_record(row) if row else None

    def actions(
        self,
        *,
        node: str | None = None,
        incident_id: int | None = None,
        kind: str | None = None,
        key_prefix: str | None = None,
    ) -> list[ActionRecord]:
        """Actions oldest first. `key_prefix` keeps those whose idempotency key starts with it (retry chains
        like "incident-7:cordon_node:gpu-001#2")."""
        a = schema.actions.c
        q = select(schema.actions).order_by(a.started_at, a.id)
        if key_prefix is not None:
            q = q.where(a.idempotency_key.startswith(key_prefix, autoescape=True))
        if node is not None:
            q = q.where(a.node == node)
        if incident_id is not None:
            q = q.where(a.incident_id == incident_id)
        if kind is not None:
            q = q.where(a.kind == kind)
        with self._read() as conn:
            return [action_record(r) for r in conn.execute(q)]

    # --- circuit breakers ----------------------------------------------------------------------------------
    def record_breaker_event(
        self, scope_kind: str, scope: str, from_state: str, to_state: str, *, reason: str, by: str,
        at: datetime | None = None, incident_id: int | None = None, fence: Fence | None = None,
    ) -> BreakerEventRecord:
        [rec] = self.record_breaker_events([{"scope_kind": scope_kind, "scope": scope, "from_state": from_state,
                                             "to_state": to_state, "reason": reason, "by": by}],
                                           at=at, incident_id=incident_id, fence=fence)
        return rec

    def record_breaker_events(
        self, events: list[dict[str, str]], *, at: datetime | None = None, incident_id: int | None = None,
        fence: Fence | None = None,
    ) -> list[BreakerEventRecord]:
        """The breaker transitions of one decision, all or none, in one transaction (each a dict of scope_kind,
        scope, from_state, to_state, reason, by).

        `fence` with `incident_id`: a run deciding for the incident it holds moves no breaker once it has lost the
        incident (LeaseLost, nothing written; LedgerBase._fenced). A person's CLI passes neither."""
        given, now = at, self._now(at)
        rows = []
        for e in events:
            require_choice(e["scope_kind"], BREAKER_SCOPES, "breaker scope_kind")
            for what in ("scope", "from_state", "to_state", "reason", "by"):
                require_text(e[what], what if what != "scope" else "breaker scope")
            rows.append({k: e[k] for k in ("scope_kind", "scope", "from_state", "to_state", "reason", "by")}
                        | {"at": now})
        if not rows:
            return []
        b = schema.breaker_events.c
        with self._write() as conn:
            self._fenced(conn, incident_id, fence, given)
            ids = [inserted_id(conn.execute(schema.breaker_events.insert().values(**r))) for r in rows]
            return [breaker_event_record(r) for r in conn.execute(
                select(schema.breaker_events).where(b.id.in_(ids)).order_by(b.id))]

    def breaker_events(
        self, *, since: datetime | None = None, scope_kind: str | None = None, scope: str | None = None
    ) -> list[BreakerEventRecord]:
        b = schema.breaker_events.c
        q = select(schema.breaker_events).order_by(b.at, b.id)
        if since is not None:
            q = q.where(b.at >= require_aware(since, "since"))
        if scope_kind is not None:
            q = q.where(b.scope_kind == scope_kind)
        if scope is not None:
            q = q.where(b.scope == scope)
        with self._read() as conn:
            return [breaker_event_record(r) for r in conn.execute(q)]

    def latest_breaker_states(self) -> dict[tuple[str, str], str]:
        """(scope_kind, scope) → to_state of the last recorded event: what a restarted process resumes from."""
        b = schema.breaker_events.c
        last = select(func.max(b.id).label("id")).group_by(b.scope_kind, b.scope).subquery()
        q = select(b.scope_kind, b.scope, b.to_state).join(last, b.id == last.c.id)
        with self._read() as conn:
            return {(r.scope_kind, r.scope): r.to_state for r in conn.execute(q)}

    # --- approvals -----------------------------------------------------------------------------------------
    def request_approval(
        self, *, incident_id: int | None, flow_run_id: str, kind: str, slack_ts: str | None = None,
        at: datetime | None = None, fence: Fence | None = None,
    ) -> ApprovalRecord:
        require_text(flow_run_id, "flow_run_id")
        require_text(kind, "approval kind")
        requested_at = self._now(at)
        values = {"incident_id": incident_id, "flow_run_id": flow_run_id, "kind": kind,
                  "requested_at": requested_at, "reason": "", "slack_ts": slack_ts}
        with self._write() as conn:
            self._fenced(conn, incident_id, fence, at)
            if incident_id is not None:
                self._require_incident(conn, incident_id)
            new_id = inserted_id(conn.execute(schema.approvals.insert().values(**values)))
            return self._approval(conn, new_id)

    @staticmethod
    def _approval(conn: Connection, approval_id: int) -> ApprovalRecord:
        row = conn.execute(select(schema.approvals).where(schema.approvals.c.id == approval_id)).first()
        if row is None:
            raise RecordNotFound("approval", approval_id)
        return approval_record(row)

    def get_approval(self, approval_id: int) -> ApprovalRecord:
        with self._read() as conn:
            return self._approval(conn, approval_id)

    def set_approval_slack_ts(self, approval_id: int, slack_ts: str) -> ApprovalRecord:
        """Remember the Slack message that asks for this approval (to update it when decided)."""
        require_text(slack_ts, "slack_ts")
        with self._write() as conn:
            self._approval(conn, approval_id)
            conn.execute(
                update(schema.approvals).where(schema.approvals.c.id == approval_id).values(slack_ts=slack_ts)
            )
            return self._approval(conn, approval_id)

    def decide_approval(
        self, approval_id: int, *, decision: str, decided_by: str, reason: str = "", at: datetime | None = None
    ) -> ApprovalRecord:
        """The first decision wins; any later one (even the same) is a LedgerConflict naming the first."""
        require_choice(decision, DECISIONS, "approval decision")
        require_text(decided_by, "decided_by")
        at = self._now(at)
        p = schema.approvals.c
        with self._write() as conn:
            swapped = conn.execute(
                update(schema.approvals)
                .where(p.id == approval_id, p.decision.is_(None))
                .values(decision=decision, decided_by=decided_by, decided_at=at, reason=reason or "")
            ).rowcount
            rec = self._approval(conn, approval_id)
        if swapped == 1:
            return rec
        raise LedgerConflict(
            f"approval {approval_id} already decided: {rec.decision} by {rec.decided_by} at "
            f"{rec.decided_at.isoformat() if rec.decided_at else '?'}; ignoring {decision} by {decided_by}"
        )

    def approvals(self, *, incident_id: int | None = None, pending: bool | None = None) -> list[ApprovalRecord]:
        p = schema.approvals.c
        q = select(schema.approvals).order_by(p.requested_at, p.id)
        if incident_id is not None:
            q = q.where(p.incident_id == incident_id)
        if pending is True:
            q = q.where(p.decision.is_(None))
        elif pending is False:
            q = q.where(p.decision.is_not(None))
        with self._read() as conn:
            return [approval_record(r) for r in conn.execute(q)]
