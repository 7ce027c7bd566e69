"""Approval vocabulary shared by the flow side (tasks.approvals), the Slack receiver and the demo's AutoApprover.

Plain Python, no Prefect: what a button carries, who may press it, and what an answer means.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

DECISIONS = ("approve", "deny", "timeout")


class ApprovalAction(StrEnum):
    """Slack `action_id`s of the two buttons (Dispatch keeps Slack action ids as enums too)."""

    APPROVE = "remedy_approval_approve"
    DENY = "remedy_approval_deny"

    @property
    def decision(self) -> str:
        return "approve" if self is ApprovalAction.APPROVE else "deny"


class BadInteraction(ValueError):
    """A Slack interaction payload we cannot act on; the message says what was wrong with it."""


@dataclass(frozen=True)
class ButtonValue:
    """What a button's `value` carries: which approval, and which paused flow run to resume."""

    approval_id: int
    flow_run_id: str

    def encode(self) -> str:
        return json.dumps({"approval_id": self.approval_id, "flow_run_id": self.flow_run_id}, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str) -> ButtonValue:
        try:
            data = json.loads(raw)
            return cls(approval_id=int(data["approval_id"]), flow_run_id=str(data["flow_run_id"]))
        except (TypeError, ValueError, KeyError) as exc:
            raise BadInteraction(f"button value is not an approval reference ({type(exc).__name__}): {raw!r:.80}") from None


@dataclass(frozen=True)
class ApprovalOutcome:
    """The answer a flow gets back. `decision` is what happened; `approved` is what the flow should do."""

    decision: str  # approve | deny | timeout
    by: str
    reason: str
    approval_id: int
    default_on_timeout: str = "deny"

    @property
    def approved(self) -> bool:
        return self.decision == "approve" or (self.decision == "timeout" and self.default_on_timeout == "approve")


@dataclass(frozen=True)
class Click:
    """One button press, parsed from Slack's block_actions payload."""

    action: ApprovalAction
    value: ButtonValue
    user_id: str
    user_name: str
    channel_id: str
    message_ts: str

    @property
    def who(self) -> str:
        return self.user_name or self.user_id


def parse_click(payload: dict) -> Click:
    """The first approval button in a block_actions payload; BadInteraction for anything else."""
    if not isinstance(payload, dict):
        raise BadInteraction("payload is not a JSON object")
    if payload.get("type") != "block_actions":
        raise BadInteraction(f"unsupported interaction type {payload.get('type')!r} (want block_actions)")
    for act in payload.get("actions") or []:
        try:
            action = ApprovalAction(act.get("action_id"))
        except ValueError:
            continue
        user = payload.get("user") or {}
        if not user.get("id"):
            raise BadInteraction("interaction has no user id")
        return Click(
            action=action,
            value=ButtonValue.decode(act.get("value") or ""),
            user_id=user["id"],
            user_name=user.get("username") or user.get("name") or "",
            channel_id=(payload.get("channel") or payload.get("container") or {}).get("id", "")
            or (payload.get("container") or {}).get("channel_id", ""),
            message_ts=(payload.get("message") or {}).get("ts") or (payload.get("container") or {}).get("message_ts", ""),
        )
    raise BadInteraction("no approval button in the interaction's actions")


def is_approver(click: Click, approvers: list[str]) -> bool:
    """Approvers are Slack user ids, never names: a user name is chosen by its owner and can be anyone's, the id
    cannot. An empty list lets nobody approve from Slack."""
    allowed = {a.strip() for a in approvers if a.strip()}
    return click.user_id in allowed


def may_answer(approver: str, ui_approvers: list[str], slack_approvers: list[str]) -> bool:
    """Whether an answer that reached the paused run (the Prefect UI form, or its API) names an approver."""
    name = (approver or "").strip()
    return bool(name) and name in {a.strip() for a in [*ui_approvers, *slack_approvers] if a.strip()}


def refusal_text(approver: str, decision: str) -> str:
    """What the form says after an answer from someone not on the approver lists: who, that it did not count, and
    the setting that lists approvers (so the person knows what to ask for)."""
    who = (approver or "").strip()[:80] or "(no name)"
    return (f"Answer '{decision}' by {who} refused: {who} is not on the approver list. Only names in "
            f"approvals.approvers (REMEDY_APPROVALS__APPROVERS) or Slack user ids in slack.approvers may answer; "
            f"ask one of them, or have {who} added there. Still waiting for an answer.")


def wait_phases(timeout_seconds: float, reminder_after_seconds: float | None) -> list[float]:
    """How a flow waits for an answer: until the reminder is due, then the rest (one nudge, never a spam loop)."""
    if timeout_seconds <= 0:
        raise ValueError(f"approval timeout must be positive, got {timeout_seconds!r}")
    if not reminder_after_seconds or reminder_after_seconds >= timeout_seconds:
        return [timeout_seconds]
    return [reminder_after_seconds, timeout_seconds - reminder_after_seconds]
