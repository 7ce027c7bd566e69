"""The decisions of the replace-node runbook, as plain functions (flows/replace_node.py calls them between steps).

Each answers one question the runbook asks — is this run the one to act, does the gate let it go on, does the
re-check say act, can the node be drained, did the drain leave anything behind, which spare, what the end means —
from what the steps returned. No Prefect, no I/O: tests/remediate/test_replace_decisions.py runs them in
milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from remedy.detect.reconfirm import Recheck, Reconfirmation
from remedy.domain.model import IncidentStatus
from remedy.domain.outcome import Outcome, hold_cause
from remedy.health.results import Validation
from remedy.remediate.results import Drained, Joined, RemediationClaim, WorkloadBack
from remedy.safety.disruption import BudgetBlock, hold_sentence
from remedy.safety.procedure import GatePass
from remedy.spares.results import SpareChoice


class Next(StrEnum):
    """What the runbook does after a step."""

    GO = "go"  # on to the next step
    WATCH = "watch"  # a warned node keeps working, nothing touched (Outcome.WATCHED)
    STOP = "stop"  # the run ends here with `outcome`


@dataclass(frozen=True)
class Verdict:
    next: Next
    why: str = ""
    outcome: Outcome | None = None
    escalate: bool = False  # the incident is escalated to a person (the node stays as it is)
    failed_remediation: bool = False  # the breaker board hears the remediation ended without a fix

    @property
    def go(self) -> bool:
        return self.next is Next.GO


GO = Verdict(Next.GO)


def duplicate_why(incident_id: int, claim: RemediationClaim) -> str | None:
    """None when this run holds the incident; else why another run (or nobody, it is settled) has it."""
    if claim.claimed:
        return None
    if claim.settled:
        return f"incident {incident_id} is already {claim.settled.value}"
    return f"run {claim.holder} is handling it"


def warned_spare(choice: SpareChoice, validation: Validation | None) -> tuple[SpareChoice, str]:
    """A warned node is swapped only when a checked spare is ready: (the choice to use, "" or why not)."""
    spare = choice.spare
    if spare and choice.needs_validation and validation is not None:
        if not validation.passed:
            why = f"{spare} failed validation: {validation.summary}"
            return SpareChoice(None, False, why), why
        choice = choice.validated()
    if choice.spare:
        return choice, ""
    first = (choice.why or "none in the pool").splitlines()[0].removeprefix("no spare: ")
    return choice, f"no spare was ready at the checkpoint boundary — {first}"


def after_gate(passed: GatePass, *, early_warning: bool) -> Verdict:
    """The gate's answer for this run. A warned node that still works is not worth a person's page: any hold
    leaves it working and watched."""
    if passed.status is None:
        return GO
    if early_warning and passed.status is Outcome.HELD:
        return Verdict(Next.WATCH, f"the gate held the swap: "
                                   f"{hold_cause(passed.hold.to_dict() if passed.hold else None, warned=True)}")
    return Verdict(Next.STOP, passed.gate, passed.status, escalate=passed.status is Outcome.HELD)


def after_recheck(check: Reconfirmation | None) -> Verdict:
    """The re-check just before the drain: act, or put the node back (cleared, or a monitor that failed)."""
    if check is None or check.act:
        return GO
    outcome = Outcome.CLEARED if check.verdict is Recheck.CLEARED else Outcome.MONITOR_FAILURE
    return Verdict(Next.STOP, check.why, outcome)


def before_drain(node: str, blocks: Sequence[BudgetBlock]) -> Verdict:
    """A budget that can never allow an eviction: do not drain into it (the job would stay on the failed node while
    a spare is promoted); a person fixes the budget. The node stays cordoned."""
    if not blocks:
        return GO
    return Verdict(Next.STOP, hold_sentence(node, blocks), Outcome.ESCALATED, escalate=True, failed_remediation=True)


def after_drain(node: str, drained: Drained) -> Verdict:
    """Pods the drain could not move mean the job may still run on the failed node: no spare is promoted for it."""
    refused = drained.refused
    if refused:  # e.g. a pod under two PodDisruptionBudgets: no retry helps, a person must fix it
        why = "the API refused to evict " + "; ".join(f"{pod}: {w}" for pod, w in refused.items())
        return Verdict(Next.STOP, why, Outcome.ESCALATED, escalate=True, failed_remediation=True)
    left = drained.not_evicted
    if left and not drained.dry_run:
        pod, why = next(iter(sorted(left.items())))
        more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
        return Verdict(Next.STOP, f"{node} is cordoned but the drain did not finish and no spare was promoted: "
                                  f"{pod}{more} is still there ({why})", Outcome.ESCALATED, escalate=True,
                       failed_remediation=True)
    return GO


def spare_validation_failed(spare: str, validation: Validation) -> str | None:
    return None if validation.passed else f"{spare} failed validation: {validation.summary}"


@dataclass(frozen=True)
class Ending:
    """How a replacement (by a spare or a preempted node) ends."""

    status: str
    succeeded: bool
    incident_status: IncidentStatus
    detail: str


def replacement_ending(replacement: str, joined: Joined, size: WorkloadBack, dry_run: bool, *,
                       preempted: str = "") -> Ending:
    """Replaced (or preempted) when the new node joined and carries the job; else a person looks."""
    ok = joined.joined and size.on_node
    verb = "preempted" if preempted else "replaced"
    status = "planned" if dry_run else (verb if ok else f"{verb}-not-joined")
    if preempted:
        detail = (f"no spare; preempted {preempted}, {replacement} took its place" if ok
                  else f"preempted for {replacement} but the job is not on it: {joined.why}")
    else:
        detail = f"replaced by {replacement}" if ok else f"replaced by {replacement}: {joined.why}"
    return Ending(status, ok, IncidentStatus.RESOLVED if ok else IncidentStatus.ESCALATED, detail)


def preemption_goes(decision: Mapping[str, Any]) -> bool:
    return decision.get("decision") in ("approve", "planned", "not-required")


def preemption_refused(decision: Mapping[str, Any], explain: str) -> str:
    by = f" by {decision['by']}" if decision.get("by") else ""
    return f"preemption not approved ({decision.get('decision')}{by}): {explain.splitlines()[0]}"


def shrink_to(desired: int, min_nodes: int | None, when_no_spare: str) -> int | None:
    """An elastic job may continue one node short inside its min:max; None: it may not shrink."""
    if not min_nodes or when_no_spare != "shrink" or desired - 1 < min_nodes:
        return None
    return desired - 1
