"""Typed results of the health tasks (issue 29, item 2): a node's validation and a fault's re-check. Plain Python,
no Prefect. One check's row (`checks`) stays the JSON the ledger records for the validation and burn-in reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Validation:
    """A node's single-node checks at one level (quick, standard, full): `passed` when every check passed;
    `summary` names the failed checks and why; `checks` are the per-check rows as the ledger records them."""

    node: str
    level: str
    passed: bool
    summary: str
    checks: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "level": self.level, "passed": self.passed, "summary": self.summary,
                "checks": [dict(c) for c in self.checks]}
