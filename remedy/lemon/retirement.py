"""The retire-node flow's decisions, Prefect-free: is the request sane, may this node be retired now (already
retired, budget, the person's answer), must a spare take its place first, why a swap did not happen, and the words of
the approval request and of the report.

The flow (flows/retire_node.py) runs the runbook's steps and calls these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from remedy.domain.model import NodeState

LATER = "it keeps working and stays out of spare rotation; the next lemon review asks again"
SWAP_FIELDS = ("incident_id", "replacement", "spare_choice", "joined", "workload")  # what a swap adds to the outcome


class RetireStatus(StrEnum):
    ALREADY_RETIRED = "already-retired"
    DEFERRED = "deferred"
    NOT_RETIRED = "not-retired"
    PLANNED = "planned"
    RETIRED = "retired"


@dataclass(frozen=True)
class Stop:
    """The flow ends here without retiring the node: the status and why, in an operator's words."""

    status: RetireStatus
    why: str

    def fields(self) -> dict[str, str]:
        return {"status": self.status.value, "why": self.why}


def check_request(node: object, reason: object) -> None:
    """A one-line ValueError before anything is touched."""
    if not isinstance(node, str) or not node.strip():
        raise ValueError(f"retire_node: node must be a node name, got {node!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"retire_node: say why {node} is retired (reason is empty); it goes into the RMA report")


def already_retired(node: str, state: NodeState | None) -> Stop | None:
    """A retired node stays retired: a re-run is a no-op."""
    return Stop(RetireStatus.ALREADY_RETIRED, f"{node} is already retired") if state is NodeState.RETIRED else None


def budget_spent(allowed: int, budget_text: str) -> Stop | None:
    """Retiring faster than the budget drains the spare pool (seed 000): defer instead of asking."""
    return Stop(RetireStatus.DEFERRED, f"{budget_text}: nothing left, deferred") if allowed <= 0 else None


def approved(decision: str) -> bool:
    """Only a yes (or a dry run's plan) goes on; a deny, or no answer in time, retires nothing."""
    return decision in ("approve", "planned")


def declined(approval: Mapping[str, Any]) -> Stop:
    by = f" by {approval['by']}" if approval.get("by") else ""
    return Stop(RetireStatus.NOT_RETIRED, f"approval {approval['decision']}{by}")


@dataclass(frozen=True)
class ClearCandidate:
    """A person said it is no lemon: spare selection may hand it out again."""

    by: str
    why: str


def clear_after_deny(approval: Mapping[str, Any]) -> ClearCandidate | None:
    """A deny clears the lemon mark; a timeout or a withdrawn request does not (nobody looked)."""
    if approval["decision"] != "deny":
        return None
    return ClearCandidate(by=f"operator:{approval.get('by') or 'unknown'}",
                          why=f"retirement declined: {approval.get('reason') or 'no reason given'}"[:300])


def budget_used_while_waiting(allowed_now: int) -> Stop | None:
    """A person may take hours: someone else may have used the budget up meanwhile."""
    if allowed_now <= 0:
        return Stop(RetireStatus.DEFERRED, "the budget was used up while waiting for approval")
    return None


def needs_swap(state: NodeState | None) -> bool:
    """A lemon still in the job is swapped, not just drained: a gang-scheduled job cannot run a node short."""
    return state is NodeState.ACTIVE


def swap_fields(swap: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in swap.items() if k in SWAP_FIELDS}


def claim_taken_why(node: str, holder: str) -> str:
    return f"another run ({holder}) is already swapping {node} out of the job"


def no_spare_why(choice_why: str) -> str:
    first = choice_why.splitlines()[0].removeprefix("no spare: ")
    return f"no spare is ready to take its place in the job ({first}): {LATER}"


def spare_failed_why(spare: str, summary: str) -> str:
    return f"{spare}, the spare chosen to take its place, failed validation ({summary}): {LATER}"


def final_status(dry_run: bool) -> RetireStatus:
    return RetireStatus.PLANNED if dry_run else RetireStatus.RETIRED


def approval_for_rma(approval: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Only a person's yes goes into the RMA report (a dry run's plan is nobody's answer)."""
    return approval if approval["decision"] == "approve" else None


def approval_summary(node: str, reason: str, evidence: str, budget: str) -> str:
    """What the person is asked, in markdown."""
    summary = [f"**{node}** is a lemon candidate: {reason}", "", f"_{budget}_", ""]
    if evidence:
        summary += ["```", evidence[:2500], "```", ""]
    summary.append("Approve to retire it for good (NoExecute taint, out of spare rotation, RMA report). "
                   "Deny or no answer leaves it as it is.")
    return "\n".join(summary)


def slug(node: str) -> str:
    """The node's name as an artifact key part (one sanitiser for every identifier: remedy.domain.names)."""
    from remedy.domain.names import artifact_key

    return artifact_key(node)


def report_lines(outcome: Mapping[str, Any], sentence: str) -> list[str]:
    """The retirement outcome's markdown lines, after the decision sentence."""
    lines = [f"### {outcome['node']}: {outcome['status']}", "", sentence, "", f"- reason: {outcome['reason']}"]
    if outcome.get("budget"):
        lines.append(f"- {outcome['budget']}")
    if outcome.get("approval"):
        a = outcome["approval"]
        lines.append(f"- approval: {a['decision']}" + (f" by {a['by']}" if a.get("by") else ""))
    if outcome.get("why"):
        lines.append(f"- why not retired: {outcome['why']}")
    if outcome.get("replacement"):
        lines.append(f"- its place in the job: {outcome['replacement']}")
    if outcome.get("rma"):
        lines.append(f"- RMA report: {outcome['rma']['url']}")
    return lines
