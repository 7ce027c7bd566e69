"""Human approvals: Slack buttons and the Prefect UI answer the same paused flow run; first decision wins.

Flow side: `tasks.approvals.request_approval(...) -> ApprovalOutcome`. Receiver side: `remedy.receiver.slack`
(signed button presses) and `remedy.receiver.open_loop` (external go-ahead). Demos: `remedy.approvals.auto`.
"""

from remedy.approvals.model import ApprovalAction, ApprovalOutcome, ButtonValue

__all__ = ["ApprovalAction", "ApprovalOutcome", "ButtonValue"]
