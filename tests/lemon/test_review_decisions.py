"""The lemon-review flow's decisions without Prefect or a ledger: the budget split, what the ledger records, burn-in
retirement candidates and the evidence text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from remedy.domain.model import ActionOutcome
from remedy.lemon.review import (
    DEFERRED,
    RETIRE,
    evidence_markdown,
    failed_burn_in_rows,
    flagged,
    plan_review,
    retired_nodes,
)
from remedy.lemon.scoring import LemonVerdict, Signal
from remedy.settings.lemon import LemonSettings

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)


def verdict(node: str, fired: int, p: float = 1e-4) -> LemonVerdict:
    signals = tuple(Signal(f"s{i}", i < fired, 1.0, 0.5, "x") for i in range(3))
    return LemonVerdict(node, fired >= 2, signals, 5, 30.0, 0.5, p, (), f"{node}: {fired} signals " + "r" * 400)


def test_budget_picks_the_strongest_candidates_and_defers_the_rest():
    settings = LemonSettings(retirement_budget=2, retirement_window_days=7)
    cands = [verdict("gpu-a", 2, 1e-3), verdict("gpu-b", 3), verdict("gpu-c", 2, 1e-6)]
    plan = plan_review(cands, [NOW - timedelta(days=1)], NOW, settings, retire=True, budget_words="budget: 2 per 7 d")
    assert [v.node for v in plan.chosen] == ["gpu-b"]  # one of two used this window; most signals first
    assert [v.node for v in plan.deferred] == ["gpu-c", "gpu-a"]
    assert plan.why_deferred == "budget: 2 per 7 d: no retirement left in this window"
    assert plan.decisions == {"gpu-b": RETIRE, "gpu-c": DEFERRED, "gpu-a": DEFERRED}


def test_review_only_defers_every_candidate():
    settings = LemonSettings(retirement_budget=5)
    cands = [verdict("gpu-a", 2), verdict("gpu-b", 3)]
    plan = plan_review(cands, [], NOW, settings, retire=False, budget_words="unused")
    assert plan.chosen == () and [v.node for v in plan.deferred] == ["gpu-a", "gpu-b"]
    assert plan.why_deferred == "review only (retire=False)"


def test_ledger_record_per_candidate():
    v = verdict("gpu-a", 2, 0.000123456)
    rec = flagged([v], {"gpu-a": DEFERRED})["gpu-a"]
    assert rec == {"p_value": 0.000123, "signals": ["s0", "s1"], "decision": DEFERRED, "reason": v.reason[:300]}


@dataclass
class _Action:
    node: str
    outcome: ActionOutcome
    finished_at: datetime | None
    detail: dict = field(default_factory=dict)


def test_failed_burn_in_rows_skip_retired_and_failed_marks():
    actions = [_Action("gpu-b", ActionOutcome.SUCCEEDED, NOW, {"why": "3 failed burn-ins"}),
               _Action("gpu-a", ActionOutcome.SUCCEEDED, None, {"count": 3}),
               _Action("gpu-c", ActionOutcome.FAILED, NOW, {"why": "x"}),
               _Action("gpu-d", ActionOutcome.SUCCEEDED, NOW, {"why": "x"})]
    rows = failed_burn_in_rows(actions, retired={"gpu-d"})
    assert rows == [{"node": "gpu-a", "since": "", "detail": "{'count': 3}"},
                    {"node": "gpu-b", "since": NOW.isoformat(), "detail": "3 failed burn-ins"}]


def test_evidence_text_says_why_each_candidate_waits():
    assert evidence_markdown(40, [], {}, "", {}) == (
        "### No lemon candidates\n\n40 node(s) scored; none shows enough independent signals.")
    text = evidence_markdown(40, [verdict("gpu-a", 2), verdict("gpu-b", 3)], {"gpu-a": DEFERRED, "gpu-b": RETIRE},
                             "budget spent", {"gpu-a": "A evidence", "gpu-b": "B evidence"})
    assert text.startswith("### 2 lemon candidate(s)")
    assert "#### gpu-a: deferred\n\n_budget spent_" in text and "#### gpu-b: retire (asks approval)\n\n```" in text
    assert text.count("_budget spent_") == 1 and "A evidence" in text and "B evidence" in text


def test_retired_nodes_are_the_ones_that_were():
    assert retired_nodes([{"node": "a", "retired": True}, {"node": "b", "retired": False}, {"node": "c"}]) == ["a"]
