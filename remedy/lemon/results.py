"""Typed results of the lemon tasks (issue 29, item 2): the fleet scored, the retirement budget, the RMA report
archived. Plain Python, no Prefect."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from remedy.lemon.scoring import LemonVerdict


@dataclass(frozen=True)
class LemonScores:
    """Every node the ledger knows, scored as of `now` (retired ones are out of the running); `explain`: each
    candidate's evidence as plain text."""

    now: datetime
    verdicts: list[LemonVerdict]
    retired: tuple[str, ...]
    explain: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RetirementBudget:
    """How many retirements the budget still allows now (`allowed`), how many it counted (`used`, at `times`),
    in words (`text`)."""

    allowed: int
    used: int
    times: list[datetime]
    text: str


@dataclass(frozen=True)
class RmaReport:
    """The node's RMA report, rendered and archived: where (`key`, `url`), its size and its text."""

    key: str
    url: str
    bytes: int
    markdown: str
    dry_run: bool
