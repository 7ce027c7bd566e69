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


@dataclass(frozen=True)
class BurnInVerdict:
    """One node's burn-in: `status` skipped (why it may not start) | checked (single-node suite done, the verdict
    waits for the multi-node sweep) | spare | planned-spare | repair | planned-repair; `checks` as the ledger records
    them; a failed node's count of failed validations, and whether that made it a retirement candidate."""

    node: str
    status: str
    passed: bool
    why: str = ""
    level: str = ""
    checks: tuple[Mapping[str, Any], ...] = ()
    dry_run: bool | None = None
    failed_validations: int | None = None
    retirement_candidate: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The row the burn-in and spare-cycle flows (and their results) keep per node."""
        out: dict[str, Any] = {"node": self.node, "status": self.status, "passed": self.passed,
                               "checks": [dict(c) for c in self.checks]}
        if self.level:
            out["level"] = self.level
        if self.why or self.status != "checked":
            out["why"] = self.why
        if self.dry_run is not None:
            out["dry_run"] = self.dry_run
        if self.failed_validations is not None:
            out["failed_validations"] = self.failed_validations
        if self.retirement_candidate:
            out["retirement_candidate"] = True
        return out


@dataclass(frozen=True)
class GroupCheck:
    """A multi-node NCCL sweep over a group of nodes, judged (pass | warn | fail | planned); a failure names the
    group, not yet the node."""

    id: str
    check: str
    job: str
    group: tuple[str, ...]
    verdict: str
    reasons: tuple[str, ...] = ()
    seconds: float | None = None
    measurements: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The check row (as a node's checks list and the ledger's validation record hold it)."""
        out: dict[str, Any] = {"id": self.id, "check": self.check, "job": self.job, "group": list(self.group),
                               "verdict": self.verdict, "reasons": list(self.reasons)}
        if self.seconds is not None:
            out["seconds"] = self.seconds
        if self.measurements is not None:
            out["measurements"] = dict(self.measurements)
        return out


@dataclass(frozen=True)
class PoolMember:
    """A managed GPU node as the spare cycle surveys it: lifecycle state, readiness, failure domains, last
    validation (ISO, None if never)."""

    name: str
    state: str | None
    ready: bool
    gpu_model: str = ""
    rack: str | None = None
    switch: str | None = None
    pdu: str | None = None
    validated_at: str | None = None

    def row(self) -> dict[str, Any]:
        """The fleet row remedy.spares.cycle reads."""
        return {"name": self.name, "state": self.state, "ready": self.ready, "gpu_model": self.gpu_model,
                "rack": self.rack, "switch": self.switch, "pdu": self.pdu, "validated_at": self.validated_at}
