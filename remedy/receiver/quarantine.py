"""The receiver's quarantine at intake: cordon a failed node before its triage run is created.

The rule is `remedy.safety.intake.decide_intake` (what may be cordoned, and how many at once); this module reads
the facts it needs — the live node, the breakers, the quarantines no flow has taken over yet — cordons, and writes
one ledger action per quarantine (kind `intake_cordon`, keyed by the incident, so one incident is quarantined at
most once, across receiver restarts). It runs in the announcer's thread, before the incident's run is created, so
the POST that brought the alert never waits for it. Any failure here is one log line: triage then cordons as it
always did.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from remedy.domain.model import Action, ActionOutcome, IncidentStatus
from remedy.domain.xid import RemediationPath
from remedy.ledger.records import IncidentRecord
from remedy.safety import history
from remedy.safety.intake import TAKES_NODE_OUT, IntakeDecision, decide_intake, intake_owner
from remedy.safety.scopes import BreakerState, scopes_of

if TYPE_CHECKING:
    from sqlalchemy import Connection

log = logging.getLogger(__name__)

KIND = "intake_cordon"
_OPEN = (IncidentStatus.OPEN.value, IncidentStatus.ACTING.value)
_REMEMBER = timedelta(days=7)  # quarantines older than this are not looked for after a restart
_NODE_OUT = frozenset(p.value for p in TAKES_NODE_OUT)  # the event's path strings that may cordon
RECHECK_SECONDS = 1.0  # at the limit, look again whether a flow took a quarantine over at most this often


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def action_key(incident_id: int) -> str:
    return f"incident-{incident_id}:{KIND}"


RELEASED_KIND = "intake_cordon_released"  # a receiver saw the quarantine taken over or uncordoned: it stops counting


def release_key(incident_id: int) -> str:
    return f"incident-{incident_id}:{RELEASED_KIND}"


class IntakeQuarantine:
    """Called by the announcer with the incidents it is about to announce and their catalog paths."""

    def __init__(self, ledger, settings, cluster: Callable[[], Any]) -> None:
        self.ledger, self.settings, self._cluster = ledger, settings, cluster
        self._checked_at = -math.inf  # when `_held` was last checked against the ledger and the nodes
        self.decisions: list[tuple[int, IntakeDecision]] = []  # the last batch's, for logs and tests

    def __call__(self, records: list[IncidentRecord], paths: list[str]) -> None:
        self.decisions = []
        if not self.settings.receiver.quarantine.enabled or self.settings.receiver.quarantine.max_nodes <= 0:
            return
        board = cluster = None
        for record, path in zip(records, paths):
            if path not in _NODE_OUT:
                continue  # most alerts: nothing to read, nothing to decide here
            try:
                if board is None:  # one read of the breakers per batch
                    now = datetime.now(UTC)
                    board = history.load_board(self.ledger, self.settings.breaker, self.settings.budget, now)
                    cluster = self._cluster()  # one client per batch
                self._consider(record, RemediationPath(path), board, cluster)
            except Exception as exc:  # noqa: BLE001 - the flows cordon as before; say why this one did not
                log.warning("%s: not quarantined at intake (%s: %s); triage decides", record.node,
                            type(exc).__name__, exc)

    def _consider(self, record: IncidentRecord, path: RemediationPath, board, cluster) -> None:
        from remedy.approvals.open_loop import is_open_loop
        from remedy.ledger.claims import claim_within_cap

        q = self.settings.receiver.quarantine
        if self.ledger.find_action(action_key(record.id)) is not None:
            return  # announced again after a Prefect outage: quarantined (or not) once already
        held = self._still_held(cluster)
        # at the limit (or switched off) the decision needs no node facts: the node is not read
        node = None if held >= q.max_nodes or not q.enabled else cluster.get_node(record.node)
        decision = decide_intake(
            path=path, node_state=node.state if node else None, cordoned=bool(node and node.unschedulable),
            open_loop=bool(node and is_open_loop(node, self.settings.ladder.open_loop_pools)),
            scopes_not_closed=[k for k in scopes_of(node.topology) if board.state_of(k) is not BreakerState.CLOSED]
            if node else [],
            quarantined_by_intake=held, max_nodes=q.max_nodes, dry_run=self.settings.dry_run, enabled=q.enabled)
        if not decision.quarantine:
            self.decisions.append((record.id, decision))
            log.info("%s: incident %s not quarantined at intake: %s", record.node, record.id, decision.reason)
            return
        owner = intake_owner(record.id)
        # The cap is global, not per receiver: the count and the claim are one ledger transaction (issue 32), so a
        # second receiver on the same ledger waits for this claim's commit and counts it.
        claim = claim_within_cap(
            self.ledger, Action(kind=KIND, node=record.node, requested_by=owner, dry_run=False,
                                incident_id=record.id, idempotency_key=action_key(record.id)),
            cap_name=KIND, limit=q.max_nodes, held=self._held_query())
        if claim.action is None:
            decision = decide_intake(path=path, node_state=None, cordoned=False, open_loop=False,
                                     scopes_not_closed=[], quarantined_by_intake=claim.held,
                                     max_nodes=q.max_nodes, dry_run=self.settings.dry_run, enabled=q.enabled)
            self.decisions.append((record.id, decision))
            log.info("%s: incident %s not quarantined at intake: %s", record.node, record.id, decision.reason)
            return
        self.decisions.append((record.id, decision))
        if not claim.new:
            return
        action = claim.action
        cause = f"XID {record.xid}" if record.xid is not None else record.signal
        try:
            change = cluster.cordon(record.node, reason=f"{cause}: quarantined at intake; triage decides next",
                                    by=owner)
        except Exception as exc:
            self.ledger.finish_action(action.id, ActionOutcome.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
            raise
        self.ledger.finish_action(action.id, ActionOutcome.SUCCEEDED,
                                  detail={"reason": decision.reason, "changed": change.changed, "detail": change.detail})
        log.info("%s: %s (incident %s, %s)", record.node, decision.reason, record.id, cause)

    def _held_query(self) -> Callable[[Connection], int]:
        from remedy.ledger.claims import held_intake_quarantines

        return held_intake_quarantines(KIND, RELEASED_KIND, datetime.now(UTC) - _REMEMBER)

    def _still_held(self, cluster) -> int:
        """Quarantines at intake that no flow has taken over and nobody released, counted in the ledger across every
        receiver on it (what the limit counts). At the limit, at most once a second, each is checked against its
        node: one uncordoned by hand or taken over by a flow's cordon gets a release mark in the ledger, so it no
        longer counts for any receiver."""
        from remedy.adapters.kubernetes import ANN_CORDONED_BY

        limit = self.settings.receiver.quarantine.max_nodes
        with self.ledger._read() as conn:  # noqa: SLF001 - one count, the claim's own query
            held = self._held_query()(conn)
        if held < limit or time.monotonic() - self._checked_at < RECHECK_SECONDS:
            return held
        self._checked_at = time.monotonic()
        since = datetime.now(UTC) - _REMEMBER
        for a in self.ledger.actions(kind=KIND):
            if a.outcome is not ActionOutcome.SUCCEEDED or a.incident_id is None or _aware(a.started_at) < since:
                continue
            if self.ledger.find_action(release_key(a.incident_id)) is not None:
                continue
            if self.ledger.get_incident(a.incident_id).status not in _OPEN:
                continue
            live = cluster.get_node(a.node)
            if not live.unschedulable or live.annotations.get(ANN_CORDONED_BY) != intake_owner(a.incident_id):
                self.ledger.start_action(Action(
                    kind=RELEASED_KIND, node=a.node, requested_by="receiver", incident_id=a.incident_id,
                    outcome=ActionOutcome.SUCCEEDED, idempotency_key=release_key(a.incident_id),
                    detail={"why": "taken over by a flow's cordon, or uncordoned"}))
        with self.ledger._read() as conn:  # noqa: SLF001
            return self._held_query()(conn)
