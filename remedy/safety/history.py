"""What the gate reads of the ledger: a bounded window, so a decision costs the same at a million actions as at a
thousand.

A decision needs, of all the history:
- the failures that can still count in a window: gate decisions since the failure's time minus the longest
  window or cool-down of any scope (`horizon_seconds`). Anything older is pruned the moment the new failure is
  recorded, and cannot move a cool-down either (it is older than the cool-down itself);
- the remediations still in flight: per node, its newest acting decision with no outcome after it, however old;
- per scope, its newest breaker event (its state) and newest close (what is already explained);
- the spare claims of those in-flight remediations, made since the oldest of them.

`load_board` rebuilds the breaker board from exactly that; for every decision it equals the board rebuilt from the
whole ledger (tests/safety/test_history.py pins it). Two differences, both on purpose: a spare claim recorded for a
node before its current remediation began (an earlier replacement of the same node) no longer hides the spare the
current one still needs; and a probe whose outcome was recorded but whose breaker transition was not (a crash in
between) stops blocking its half-open scope once it leaves the window.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from remedy.config import CapacityBudget
from remedy.ledger.recent import actions_since, claims_replacing, latest_breaker_events, unfinished
from remedy.ledger.records import ActionRecord
from remedy.safety.board import BreakerBoard
from remedy.safety.scopes import BreakerState, BreakerTransition, Decision, require_aware
from remedy.settings.safety import BreakerSettings

GATE_KIND = "gate_decision"
OUTCOME_KIND = "remediation_finished"
CLAIM_KIND = "set_state_active"  # a spare promoted in place of a node (detail["replaces"])
SCOPE_KINDS = ("cluster", "rack", "switch", "pdu")


def horizon_seconds(settings: BreakerSettings) -> float:
    """How far back a failure can still matter: the longest window or cool-down of any scope kind."""
    return max(max(lim.window_seconds, lim.cooldown_seconds or 0.0) for lim in map(settings.limit, SCOPE_KINDS))


def _decisions(records: Iterable[ActionRecord]) -> list[Decision]:
    return [Decision.from_dict(a.detail["decision"]) for a in records if a.detail.get("decision")]


def load_board(led, settings: BreakerSettings, budget: CapacityBudget, now: datetime,
               failure_at: datetime | None = None) -> BreakerBoard:
    """The breaker board as of `now`, from a bounded read of the ledger (see the module doc).

    `failure_at`: when the failure about to be decided happened; a late-reported failure is counted with the
    failures around its own time, so the window reaches back from it, not from `now`."""
    require_aware(now, "board time")
    start = now if failure_at is None else min(require_aware(failure_at, "failure time"), now)
    since = start - timedelta(seconds=horizon_seconds(settings))
    window = _decisions(actions_since(led, GATE_KIND, since))
    in_flight = _decisions(unfinished(led, GATE_KIND, OUTCOME_KIND))
    return BreakerBoard.rebuild(window, _transitions(led), (), settings, budget, in_flight=in_flight)


def _transitions(led) -> list[BreakerTransition]:
    """Per scope, its newest close then its newest event: replayed in that order they leave the board's state and
    forgotten-before marks exactly as the whole history would."""
    last, closes = latest_breaker_events(led)
    rows = sorted({e.id: e for e in (*closes, *last)}.values(), key=lambda e: e.id)
    return [BreakerTransition(e.scope_kind, e.scope, BreakerState(e.from_state), BreakerState(e.to_state), e.reason,
                              e.at, e.by) for e in rows]


def spare_claims(led, board: BreakerBoard) -> set[str]:
    """Nodes in flight whose replacement spare is already promoted (so no spare is still promised to them)."""
    waiting = {n: f.at for n, f in board.active.items() if f.needs_spare}
    return claims_replacing(led, CLAIM_KIND, waiting)


def held_on(led, scope_or_reason: str, since: datetime) -> list[str]:
    """Nodes whose latest gate decision since `since` holds them on this scope (or gate), newest first."""
    latest: dict[int | None, ActionRecord] = {}
    for a in actions_since(led, GATE_KIND, since):
        latest[a.incident_id] = a  # oldest first: the last one per incident wins
    held = [a for a in latest.values() if not a.detail.get("act")
            and (a.detail.get("scope") or a.detail.get("skip")) == scope_or_reason]
    return [a.node for a in sorted(held, key=lambda a: a.started_at, reverse=True)]
