"""The lemon-review flow's decisions, Prefect-free: which candidates are retired now and which wait (and why), what
the ledger records for each, which nodes failed burn-in often enough to show a person, and the evidence text.

The flow (flows/lemon_review.py) reads the ledger, runs the steps and calls these; scoring is remedy.lemon.scoring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from remedy.domain.model import ActionOutcome
from remedy.lemon.scoring import LemonVerdict, select_for_retirement
from remedy.settings.lemon import LemonSettings

RETIRE = "retire (asks approval)"
DEFERRED = "deferred"


@dataclass(frozen=True)
class ReviewPlan:
    """Candidates to retire now (each asks a person) and the rest, deferred with one reason."""

    chosen: tuple[LemonVerdict, ...]
    deferred: tuple[LemonVerdict, ...]
    why_deferred: str

    @property
    def decisions(self) -> dict[str, str]:
        """node → what the review does with it, as the candidate table shows it."""
        return {v.node: RETIRE for v in self.chosen} | {v.node: DEFERRED for v in self.deferred}


def plan_review(candidates: Sequence[LemonVerdict], recent_retirements: Iterable[datetime], now: datetime,
                settings: LemonSettings, *, retire: bool, budget_words: str) -> ReviewPlan:
    """Never more retirements per window than the budget; `retire=False` only lists the candidates."""
    chosen, deferred = select_for_retirement(candidates, recent_retirements, now, settings)
    if not retire:
        return ReviewPlan((), tuple(candidates), "review only (retire=False)")
    return ReviewPlan(tuple(chosen), tuple(deferred), f"{budget_words}: no retirement left in this window")


def flagged(candidates: Sequence[LemonVerdict], decisions: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """What the ledger records per candidate, so spare selection never hands one out meanwhile."""
    return {v.node: {"p_value": float(f"{v.p_value:.3g}"), "signals": list(v.fired), "decision": decisions[v.node],
                     "reason": v.reason[:300]} for v in candidates}


def failed_burn_in_rows(actions: Iterable[Any], retired: set[str]) -> list[dict[str, Any]]:
    """Nodes marked retirement candidates by burn-in (and not retired yet), one row each, by name. They never
    served load, so the lemon score has no evidence on them: a person looks."""
    seen: dict[str, dict[str, Any]] = {}
    for a in actions:
        if a.outcome is ActionOutcome.SUCCEEDED and a.node not in retired:
            seen[a.node] = {"node": a.node, "since": a.finished_at.isoformat() if a.finished_at else "",
                            "detail": str(a.detail.get("why") or a.detail)[:200]}
    return sorted(seen.values(), key=lambda r: r["node"])


def evidence_markdown(scored: int, candidates: Sequence[LemonVerdict], decisions: Mapping[str, str],
                      why_deferred: str, explain: Mapping[str, str]) -> str:
    """Why each candidate is one, with what the review does with it."""
    if not candidates:
        return f"### No lemon candidates\n\n{scored} node(s) scored; none shows enough independent signals."
    parts = [f"### {len(candidates)} lemon candidate(s)", ""]
    for v in candidates:
        parts += [f"#### {v.node}: {decisions.get(v.node, '')}", ""]
        if decisions.get(v.node) == DEFERRED:
            parts += [f"_{why_deferred}_", ""]
        parts += ["```", explain[v.node], "```", ""]
    return "\n".join(parts)


def retired_nodes(retirements: Iterable[Mapping[str, Any]]) -> list[str]:
    return [r["node"] for r in retirements if r.get("retired")]
