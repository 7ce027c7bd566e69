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


def may_answer(approver: str, ui_approvers: list[str]) -> bool:
    """Whether an answer that reached the paused run without a ledger answer behind it (the Prefect UI form, or
    its API) names a listed Prefect approver (approvals.approvers). Slack approvers (slack.approvers) answer only
    through Slack, where Slack signs who pressed the button: their id typed into the form proves nothing (anyone
    who reaches the Prefect API can type it), so it is refused like any name not listed."""
    name = (approver or "").strip()
    return bool(name) and name in {a.strip() for a in ui_approvers if a.strip()}


def refusal_text(approver: str, decision: str) -> str:
    """What the form says after an answer from someone not on the approver list: who, that it did not count, and
    the setting that lists approvers (so the person knows what to ask for)."""
    who = (approver or "").strip()[:80] or "(no name)"
    return (f"Answer '{decision}' by {who} refused: {who} is not on the approver list. Only names in "
            f"approvals.approvers (REMEDY_APPROVALS__APPROVERS) may answer here (Slack approvers answer with the "
            f"Slack buttons); ask one of them, or have {who} added there. Still waiting for an answer.")


def wait_phases(timeout_seconds: float, reminder_after_seconds: float | None) -> list[float]:
    """How a flow waits for an answer: until the reminder is due, then the rest (one nudge, never a spam loop)."""
    if timeout_seconds <= 0:
        raise ValueError(f"approval timeout must be positive, got {timeout_seconds!r}")
    if not reminder_after_seconds or reminder_after_seconds >= timeout_seconds:
        return [timeout_seconds]
    return [reminder_after_seconds, timeout_seconds - reminder_after_seconds]


# The form's approver list is validated by the Prefect server on every resume; answers that reach the ledger first
# (a Slack button from a listed user id, the go-ahead endpoint, the demo's --approve) resume the run with this entry.
# A person who picks it in the form is refused like any name not on the list (the ledger holds no answer then).
ANSWERED_ELSEWHERE = "(answered in Slack or by the go-ahead endpoint)"
APPROVERS_ENV = "REMEDY_APPROVALS__APPROVERS"
NO_APPROVERS = (f"No approvers configured: set approvals.approvers in the config or {APPROVERS_ENV}='[\"your-name\"]' "
                "and answer again (until then every answer here is refused and the safe default is taken).")


def default_approver() -> str:
    """The local user: who runs `remedy demo` / `remedy up` on a laptop is the one who answers its approvals."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment or the password database (a bare container)
        return "operator"


def approver_choices(ui_approvers: list[str]) -> list[str]:
    """The names the Prefect form offers, in the configured order (empty: no list, the form says how to set one)."""
    names = list(dict.fromkeys(a.strip() for a in ui_approvers if a.strip()))
    return names + [ANSWERED_ELSEWHERE] if names else []


def form_approver(by: str, ui_approvers: list[str]) -> str:
    """The `approver` a ledger-first answer resumes the form with: its name when listed, else ANSWERED_ELSEWHERE
    (the ledger keeps who it was)."""
    choices = approver_choices(ui_approvers)
    return by if not choices or by in choices else ANSWERED_ELSEWHERE


def approvers_note(approvers: list[str], defaulted: bool) -> str:
    """The banner line of `remedy demo` / `remedy up`: who may answer in the Prefect form, and where that is set."""
    if defaulted:
        return (f"{', '.join(approvers)} (the local user: no approvals.approvers configured; {APPROVERS_ENV} "
                "names others) answers in the paused run's Resume form")
    return f"{', '.join(approvers)} (approvals.approvers) answer in the paused run's Resume form"
