"""What every health check returns: a verdict, the numbers behind it and the thresholds it was judged by.

Parsers read what a tool printed; criteria turn the reading into a `CheckResult`. Flows, the ledger
and the simulator only ever see `CheckResult`, never a tool's raw format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from remedy.errors import RemedyError


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"  # usable, but worth watching (recorded, does not block burn-in)
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return {"pass": 0, "warn": 1, "fail": 2}[self.value]


def worst(verdicts: list[Verdict] | tuple[Verdict, ...]) -> Verdict:
    """The most severe verdict; an empty list passes."""
    return max(verdicts, key=lambda v: v.rank, default=Verdict.PASS)


class CheckOutputError(RemedyError, ValueError):
    """A tool's output could not be read (wrong format, truncated, empty); the message says which and where.

    A ValueError too, so callers that guard any parser with `except ValueError` catch it."""


@dataclass
class CheckResult:
    """One health check's judged outcome."""

    check: str  # the `remedy.io/check` label value, e.g. "dcgm-diag", "nccl"
    verdict: Verdict
    measurements: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # why it is not a pass (empty on pass)
    raw_tail: str = ""  # last lines of the tool output, for the ledger / an RMA ticket
    # What a complete output would have had and this one lacks (GPU blocks, table sections, required fields). Never
    # a pass: the verdict is FAIL, so every consumer that reads `verdict` keeps the node out; `status` says why.
    incomplete: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict is not Verdict.FAIL

    @property
    def status(self) -> str:
        """pass | warn | fail, or "incomplete" when the only failures are parts of the output that are missing."""
        real = [r for r in self.reasons if not r.startswith((INCOMPLETE_PREFIX, "warning: "))]
        return "incomplete" if self.incomplete and not real else self.verdict.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "verdict": self.verdict.value,
            "measurements": self.measurements,
            "thresholds": self.thresholds,
            "reasons": list(self.reasons),
            "raw_tail": self.raw_tail,
            "status": self.status,
            "incomplete": list(self.incomplete),
        }


def tail(text: str, lines: int = 20) -> str:
    """Last `lines` lines of a tool's output (kept with the result as evidence)."""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


INCOMPLETE_PREFIX = "incomplete output: "


class Judgement:
    """Collects findings while a check is judged, then folds them into one verdict."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []
        self.reasons: list[str] = []
        self.missing: list[str] = []

    def incomplete(self, what: str) -> None:
        """A part of the output a verdict needs is missing: the check cannot pass."""
        self.verdicts.append(Verdict.FAIL)
        self.missing.append(what)
        self.reasons.append(INCOMPLETE_PREFIX + what)

    def fail(self, reason: str) -> None:
        self.verdicts.append(Verdict.FAIL)
        self.reasons.append(reason)

    def warn(self, reason: str) -> None:
        self.verdicts.append(Verdict.WARN)
        self.reasons.append(f"warning: {reason}")

    @property
    def verdict(self) -> Verdict:
        return worst(self.verdicts)


def same_gpu_model(found: str | None, expected: str) -> bool:
    """NVML says 'NVIDIA H100 80GB HBM3', GPU feature discovery labels say 'NVIDIA-H100-80GB-HBM3': same GPU."""
    norm = lambda s: " ".join((s or "").replace("-", " ").replace("_", " ").lower().split())  # noqa: E731
    return norm(found) == norm(expected)
