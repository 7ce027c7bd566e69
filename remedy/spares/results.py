"""Typed results of the spare tasks (issue 29, item 2). Plain Python, no Prefect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SpareChoice:
    """The warm spare chosen to replace a node (tasks.spares.select_spare), or None; `why` explains the choice
    (chosen and rejected, with reasons), its first line the headline; `needs_validation`: its last check is stale.
    `replayed`: a re-run of the incident read the spare claimed the first time."""

    spare: str | None
    needs_validation: bool
    why: str
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> SpareChoice:
        spare = detail.get("spare")
        return cls(None if spare is None else str(spare), bool(detail.get("needs_validation")),
                   str(detail.get("why") or ""), bool(detail.get("replayed")))

    def record(self) -> dict[str, Any]:
        """What the claim's ledger row keeps (a re-run reads it back with from_record)."""
        return {"spare": self.spare, "needs_validation": self.needs_validation, "why": self.why}

    def validated(self) -> SpareChoice:
        """The same spare, its check now fresh."""
        return SpareChoice(self.spare, False, self.why, self.replayed)


@dataclass(frozen=True)
class Preempted:
    """A preemption plan carried out (tasks.preemption.preempt): the workloads suspended or evicted, each one's
    recorded result, the plan's nodes now free of its victims, and pods an eviction could not move (pod → why)."""

    preempted: tuple[str, ...]
    freed: tuple[str, ...]
    blocked: Mapping[str, str]
    results: tuple[Mapping[str, Any], ...] = ()

    @property
    def complete(self) -> bool:
        return not self.blocked and bool(self.freed)

    def summary(self) -> dict[str, Any]:
        """What the replace-node run's result shows of it."""
        return {"preempted": list(self.preempted), "freed": list(self.freed), "blocked": dict(self.blocked)}
