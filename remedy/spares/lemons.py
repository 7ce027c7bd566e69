"""Lemon candidates as spare selection sees them: the lemon review's verdict, kept in the ledger.

Why the ledger and not a node label: every node fact gpu-remedy decides (its state, claims, validations, fixes,
burn-in's `mark_retirement_candidate`) is a ledger row, and labels only mirror them (`remedy.io/pool`). A candidate
is a decision with evidence (review time, p-value, signals, whether the budget deferred it): an action row carries
that, survives restarts and is what the RMA report and an operator's `remedy ledger` queries already read. A
label would be a second copy that a node re-created by the provider silently loses.

One rule decides: a node is a lemon candidate while its latest `lemon_candidate` / `clear_lemon_candidate` row is a
`lemon_candidate` row. Each review writes one `lemon_candidate` row per node it flags (review time and score) and a
`clear_lemon_candidate` row for each earlier candidate it no longer flags; a person who declines its retirement
clears it the same way. A retired node is never a spare, so its row does not matter once it is retired.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from remedy.domain.model import Action, ActionOutcome

CANDIDATE = "lemon_candidate"
CLEARED = "clear_lemon_candidate"


def lemon_candidates(led) -> dict[str, dict[str, Any]]:
    """Node → the detail of the review row that made it a candidate, for every node still one."""
    latest: dict[str, Any] = {}
    for kind in (CANDIDATE, CLEARED):
        for a in led.actions(kind=kind):
            if a.outcome is not ActionOutcome.SUCCEEDED:
                continue
            seen = latest.get(a.node)
            if seen is None or (a.started_at, a.id) > (seen.started_at, seen.id):
                latest[a.node] = a
    return {node: dict(a.detail) for node, a in sorted(latest.items()) if a.kind == CANDIDATE}


def record_review(led, flagged: Mapping[str, Mapping[str, Any]], *, reviewed_at: datetime, requested_by: str,
                  dry_run: bool = False) -> dict[str, list[str]]:
    """Write the review's verdict: one candidate row per flagged node (its detail: score, decision), one clear row
    per earlier candidate no longer flagged. Written in dry runs too: it changes nothing on the cluster, and spare
    selection (dry or not) must see the same candidates the simulator does."""
    before = lemon_candidates(led)
    now = datetime.now(UTC)
    for node, detail in sorted(flagged.items()):
        _write(led, CANDIDATE, node, {"reviewed_at": reviewed_at.isoformat(), **detail}, requested_by, dry_run, now)
    cleared = sorted(set(before) - set(flagged))
    for node in cleared:
        _write(led, CLEARED, node, {"reviewed_at": reviewed_at.isoformat(),
                                    "why": f"the lemon review of {reviewed_at:%Y-%m-%d %H:%M} UTC no longer flags it"},
               requested_by, dry_run, now)
    return {"flagged": sorted(flagged), "cleared": cleared}


def clear_candidate(led, node: str, *, by: str, why: str, dry_run: bool = False) -> bool:
    """A person says the node is no lemon (e.g. declined its retirement): it may be handed out as a spare again.
    False if it was not a candidate (nothing written)."""
    if node not in lemon_candidates(led):
        return False
    _write(led, CLEARED, node, {"by": by, "why": why}, by, dry_run, datetime.now(UTC))
    return True


def _write(led, kind: str, node: str, detail: dict[str, Any], by: str, dry_run: bool, at: datetime) -> None:
    # One row, written whole (no key: every review is a new fact about the node).
    led.start_action(Action(kind=kind, node=node, requested_by=by, dry_run=dry_run, started_at=at, finished_at=at,
                            outcome=ActionOutcome.SUCCEEDED, detail=detail))
