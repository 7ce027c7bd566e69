"""Will a drain be able to evict this node's pods? PodDisruptionBudgets that can never allow an eviction, found
before the drain starts (issue 31).

The Eviction API consults the one budget over a pod (pkg/registry/core/pod/storage/eviction.go) and the status the
disruption controller keeps for it (pkg/controller/disruption/disruption.go). Some budgets can never allow one:
- a `maxUnavailable` budget, or a percentage `minAvailable`, over pods whose controller has no scale subresource (a
  bare batch/v1 Job, a DaemonSet): `getExpectedPodCount` needs the controller's scale for those forms and fails,
  the controller's `failSafe` sets `disruptionsAllowed: 0` with condition DisruptionAllowed=False reason
  SyncFailed and never advances `status.observedGeneration`; every eviction answers 429 for good;
- a budget over pods with no controller for those forms (`expectedPods` 0: nothing is ever allowed);
- an integer `minAvailable` as large as the pods it counts (the whole gang must stay up);
- two budgets over one pod (the API answers 500 every time).
Draining into such a budget ends with the job still on the failed node; promoting a spare then would leave it
there. Plain Python: the adapter reads the budgets, this module judges them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(d: dict[str, Any], key: str, default: int = 0) -> int:
    return int(d.get(key) or default)


@dataclass(frozen=True)
class BudgetView:
    """One PodDisruptionBudget as the API serves it (spec and the disruption controller's status)."""

    namespace: str
    name: str
    min_available: str | None = None
    max_unavailable: str | None = None
    generation: int = 1
    observed_generation: int = 0
    expected_pods: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    disruptions_allowed: int = 0
    sync_failed: str = ""  # the SyncFailed condition's message ("" when the controller computed the budget)
    always_allow_unhealthy: bool = False  # spec.unhealthyPodEvictionPolicy: AlwaysAllow

    @classmethod
    def from_api(cls, obj: dict[str, Any]) -> BudgetView:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        failed = next((c for c in status.get("conditions") or []
                       if c.get("type") == "DisruptionAllowed" and c.get("reason") == "SyncFailed"), None)
        return cls(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                   min_available=_text(spec.get("minAvailable")), max_unavailable=_text(spec.get("maxUnavailable")),
                   generation=_int(meta, "generation", 1), observed_generation=_int(status, "observedGeneration"),
                   expected_pods=_int(status, "expectedPods"), current_healthy=_int(status, "currentHealthy"),
                   desired_healthy=_int(status, "desiredHealthy"),
                   disruptions_allowed=_int(status, "disruptionsAllowed"),
                   sync_failed=(failed.get("message") or "SyncFailed") if failed else "",
                   always_allow_unhealthy=spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def form(self) -> str:
        """How the budget is written: "maxUnavailable 1", "minAvailable 50%", "minAvailable 3"."""
        if self.max_unavailable is not None:
            return f"maxUnavailable {self.max_unavailable}"
        return f"minAvailable {self.min_available if self.min_available is not None else '1 (default)'}"

    @property
    def needs_scale(self) -> bool:
        """A form the controller computes from the pods' controller's scale subresource."""
        return self.max_unavailable is not None or "%" in (self.min_available or "")


@dataclass(frozen=True)
class PodBudgets:
    """A pod a drain would evict and the budgets whose selector selects it."""

    pod: str  # namespace/name
    owner: str  # "Job training/llm-pretrain", "" for a bare pod
    ready: bool
    budgets: tuple[BudgetView, ...] = ()


class Blocker(StrEnum):
    TWO_BUDGETS = "two-budgets"
    SYNC_FAILED = "sync-failed"
    NOT_OBSERVED = "not-observed"  # the controller has not caught up with the budget's generation (may be brief)
    EXPECTS_NONE = "expects-no-pods"
    WHOLE_GANG = "whole-gang"


@dataclass(frozen=True)
class BudgetBlock:
    """A pod no eviction can move, and why."""

    pod: str
    owner: str
    budgets: tuple[str, ...]
    blocker: Blocker
    why: str

    @property
    def transient(self) -> bool:
        """Worth one more look in a few seconds (the API itself says "retry after 10 s")."""
        return self.blocker is Blocker.NOT_OBSERVED


def blocks_eviction(p: PodBudgets) -> BudgetBlock | None:
    """The reason no eviction of this pod can ever succeed, or None (no budget, or one that allows or may allow)."""
    if len(p.budgets) > 1:
        names = ", ".join(sorted(b.name for b in p.budgets))
        return BudgetBlock(p.pod, p.owner, tuple(sorted(b.key for b in p.budgets)), Blocker.TWO_BUDGETS,
                           f"pod {p.pod} is covered by more than one PodDisruptionBudget ({names}), which the Eviction "
                           "API refuses every time; a person must merge the budgets or delete the pod")
    if not p.budgets:
        return None
    b = p.budgets[0]
    which = f"PodDisruptionBudget {b.key} ({b.form})" + (f" over {p.owner}" if p.owner else f" over pod {p.pod}")
    if b.sync_failed:
        return BudgetBlock(p.pod, p.owner, (b.key,), Blocker.SYNC_FAILED,
                           f"{which} can never allow an eviction (SyncFailed: {b.sync_failed}); use an integer "
                           "minAvailable or remove it")
    if b.observed_generation < b.generation:
        return BudgetBlock(p.pod, p.owner, (b.key,), Blocker.NOT_OBSERVED,
                           f"{which} was never processed by the disruption controller (observedGeneration "
                           f"{b.observed_generation} < generation {b.generation}), so every eviction is refused")
    if b.expected_pods == 0:
        return BudgetBlock(p.pod, p.owner, (b.key,), Blocker.EXPECTS_NONE,
                           f"{which} expects no pods (expectedPods 0), so it allows no eviction; use an integer "
                           "minAvailable or remove it")
    unready_ok = not p.ready and b.always_allow_unhealthy
    if b.desired_healthy >= b.expected_pods and not unready_ok:
        return BudgetBlock(p.pod, p.owner, (b.key,), Blocker.WHOLE_GANG,
                           f"{which} needs all {b.expected_pods} pods healthy, so it never allows an eviction")
    return None


def drain_blockers(pods: Sequence[PodBudgets]) -> list[BudgetBlock]:
    """Every pod on the node that no eviction can move (a drain would end with them still there)."""
    return [blk for p in pods if (blk := blocks_eviction(p)) is not None]


def hold_sentence(node: str, blocks: Sequence[BudgetBlock]) -> str:
    """One sentence for the operator: what was not done, and the budget that stops it."""
    more = f" ({len(blocks)} pods blocked)" if len(blocks) > 1 else ""
    return f"{node} is cordoned but not drained and no spare was promoted{more}: {blocks[0].why}."
