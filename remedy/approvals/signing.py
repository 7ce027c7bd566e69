"""Slack's v0 request signing, from the sender's side: what the demo's AutoApprover and the tests use to click a
button the way Slack would deliver the click (form-encoded `payload=`, signed with the app's signing secret)."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from remedy.approvals.model import ApprovalAction, ButtonValue


def signed_headers(signing_secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends with a request body: X-Slack-Request-Timestamp and the v0 HMAC-SHA256 signature."""
    from slack_sdk.signature import SignatureVerifier

    if not signing_secret:
        raise ValueError("cannot sign a Slack request without a signing secret (slack.signing_secret)")
    ts = str(int(time.time()) if timestamp is None else int(timestamp))
    sig = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    assert sig is not None  # None only without a secret, refused above
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig,
            "Content-Type": "application/x-www-form-urlencoded"}


def click_payload(*, approval_id: int, flow_run_id: str, approve: bool, user_id: str, user_name: str = "",
                  channel_id: str = "", message_ts: str = "") -> dict:
    """A block_actions payload as Slack sends it when someone presses Approve or Deny."""
    action = ApprovalAction.APPROVE if approve else ApprovalAction.DENY
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_name or user_id, "name": user_name or user_id},
        "channel": {"id": channel_id},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel_id},
        "message": {"ts": message_ts},
        "actions": [{"type": "button", "action_id": action.value, "block_id": f"remedy_approval_{approval_id}",
                     "value": ButtonValue(approval_id, flow_run_id).encode(), "action_ts": f"{time.time():.6f}"}],
    }


def form_body(payload: dict) -> str:
    return urlencode({"payload": json.dumps(payload)})
