"""`POST /v1/slack/interactions`: Slack's Approve/Deny button presses → ledger decision → resumed flow run.

Order matters: the v0 signature (and its 5-minute replay window) is checked before the body is even parsed, the
approver allowlist before anything is written, and the ledger (first decision wins) before Prefect is touched.
Forged or stale → 401, not an approver → 403, and in both cases nothing is recorded or resumed.
"""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from remedy import runtime
from remedy.approvals import messages
from remedy.approvals.decide import decide_and_resume
from remedy.approvals.model import BadInteraction, is_approver, parse_click

router = APIRouter()
REPLAY_WINDOW_SECONDS = 300  # Slack's documented window (and slack_sdk's SignatureVerifier default)
log = logging.getLogger(__name__)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


@router.post("/v1/slack/interactions")
async def slack_interactions(request: Request) -> JSONResponse:
    body = (await request.body()).decode("utf-8", errors="replace")
    return await run_in_threadpool(handle_interaction, body, dict(request.headers))


def handle_interaction(body: str, headers: dict[str, str]) -> JSONResponse:
    from slack_sdk.signature import SignatureVerifier

    settings = runtime.settings()
    secret = settings.slack.signing_secret.get_secret_value()
    if not secret:
        return _error(503, "slack.signing_secret is not configured: refusing unverifiable interactions")
    headers = {k.lower(): v for k, v in headers.items()}
    ts, sig = headers.get("x-slack-request-timestamp", ""), headers.get("x-slack-signature", "")
    verifier = SignatureVerifier(secret)
    if not ts or not sig:
        return _error(401, "missing X-Slack-Request-Timestamp or X-Slack-Signature")
    try:
        age = time.time() - int(ts)
    except ValueError:
        return _error(401, f"X-Slack-Request-Timestamp is not a number: {ts[:20]!r}")
    if abs(age) > REPLAY_WINDOW_SECONDS:
        log.warning("slack interaction refused: timestamp %s s old (replay window %d s)", int(age), REPLAY_WINDOW_SECONDS)
        return _error(401, f"stale X-Slack-Request-Timestamp ({int(age)} s old; the window is 5 minutes)")
    # is_valid_request checks the same window again and compares the HMAC in constant time
    if not verifier.is_valid_request(body, {"x-slack-request-timestamp": ts, "x-slack-signature": sig}):
        log.warning("slack interaction refused: bad signature")
        return _error(401, "bad Slack signature")

    try:
        raw = parse_qs(body).get("payload", [""])[0]
        if not raw:
            raise BadInteraction("form field 'payload' is missing")
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BadInteraction(f"payload is not JSON: {exc.msg}") from None
        click = parse_click(payload)
    except BadInteraction as exc:
        return _error(400, str(exc))

    if not is_approver(click, settings.slack.approvers):
        log.warning("slack: %s (%s) pressed %s on approval %s but is not an approver", click.who, click.user_id,
                    click.action.decision, click.value.approval_id)
        return _error(403, f"{click.who} is not on the approver list (slack.approvers)")

    led = runtime.ledger()
    try:
        rec = led.get_approval(click.value.approval_id)
    except Exception:
        return _error(404, f"no approval {click.value.approval_id}")
    if rec.flow_run_id != click.value.flow_run_id:
        return _error(400, f"approval {rec.id} belongs to another flow run")
    result = decide_and_resume(led, rec.id, decision=click.action.decision, by=click.who,
                               reason=f"Slack button by {click.user_id}")
    if not result.first:
        text = f"already decided by {result.by}: {result.decision}"
        return JSONResponse({"ok": True, "text": text, "decision": result.decision, "by": result.by})
    _update_message(rec.slack_ts or click.message_ts, click.channel_id, result.decision, click.who)
    text = messages.verdict_text(result.decision, click.who)
    return JSONResponse({"ok": True, "text": text, "decision": result.decision, "by": click.who,
                         "resumed": result.resumed, **({"warning": result.error} if result.error else {})})


def _update_message(ts: str | None, channel_id: str, decision: str, who: str) -> None:
    """Show who decided on the message at once (the flow updates it again with the full summary)."""
    if not ts or not channel_id:
        return
    from remedy.adapters.slack import SlackError

    try:
        notifier = messages.notifier(runtime.settings(), channel=channel_id)
        if notifier is not None:
            text = messages.verdict_text(decision, who)
            notifier.update(ts, text, messages.render("approval_reminder", text=text, context="gpu-remedy"))
    except SlackError as exc:
        log.warning("slack: could not update message %s: %s", ts, exc)
