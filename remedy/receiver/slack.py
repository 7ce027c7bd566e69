"""`POST /v1/slack/interactions`: Slack's Approve/Deny button presses → ledger decision → resumed flow run.

Order matters: the v0 signature (and its 5-minute replay window) is checked before the body is even parsed, the
approver allowlist before anything is written, and the ledger (first decision wins) before Prefect is touched.
Forged or stale → 401, not an approver → 403, and in both cases nothing is recorded or resumed. A body over
receiver.limits.max_body_bytes → 413 before it is read; a signed payload of any shape that is not an approval click
→ 400; a failure inside → a generic 503 (logged), never a 500 carrying its text. A click for a run that is gone (its
process died while it waited: its lease expired) resumes nothing: the answer says so and who has the incident now,
and the receiver's lease watchdog re-announces the incident at once.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from remedy import runtime
from remedy.approvals import messages
from remedy.approvals.decide import decide_and_resume
from remedy.approvals.model import BadInteraction, Click, is_approver, parse_click
from remedy.domain.durations import human_duration
from remedy.domain.escape import mrkdwn
from remedy.receiver.limits import BadJson, BodyTooLarge, loads_bounded, read_body

router = APIRouter()
REPLAY_WINDOW_SECONDS = 300  # Slack's documented window (and slack_sdk's SignatureVerifier default)
log = logging.getLogger(__name__)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


@router.post("/v1/slack/interactions")
async def slack_interactions(request: Request) -> JSONResponse:
    try:
        limit = runtime.settings().receiver.limits.max_body_bytes
        raw = await read_body(request, limit)
    except BodyTooLarge as exc:
        return _error(413, str(exc))
    except Exception:  # settings unreadable: the log says why; the caller learns nothing about the host
        log.exception("slack interaction: could not read settings or body")
        return _error(503, UNAVAILABLE)
    body = raw.decode("utf-8", errors="replace")
    return await run_in_threadpool(_guarded, body, dict(request.headers), _lease_check(request))


def _lease_check(request: Request):
    """Wakes the lease watchdog of the receiver serving this request (none in a bare test app)."""
    receiver = getattr(request.app.state, "receiver", None)
    announcer = getattr(receiver, "announcer", None)
    return getattr(announcer, "check_leases", None)


UNAVAILABLE = "the receiver cannot handle interactions right now; nothing was recorded"


def _guarded(body: str, headers: dict[str, str], on_gone=None) -> JSONResponse:
    """handle_interaction, but an unexpected failure is a generic 503 (logged), never a 500 with its text."""
    try:
        return handle_interaction(body, headers, on_gone)
    except Exception:
        log.exception("slack interaction failed")
        return _error(503, UNAVAILABLE)


def _click(body: str, max_depth: int) -> Click:
    """The button press in a verified body; BadInteraction (→ 400) for any shape that is not one."""
    raw = parse_qs(body).get("payload", [""])[0]
    if not raw:
        raise BadInteraction("form field 'payload' is missing")
    try:
        payload = loads_bounded(raw, max_depth, what="payload")
    except BadJson as exc:
        raise BadInteraction(str(exc)) from None
    try:
        click = parse_click(payload)
    except (TypeError, AttributeError, ValueError, KeyError, OverflowError) as exc:
        if isinstance(exc, BadInteraction):
            raise
        # a field of the wrong JSON type (actions not a list, user not an object, …): not a click Slack sends
        raise BadInteraction(f"payload is not a block_actions click Slack sends ({type(exc).__name__})") from None
    texts = {"user.id": click.user_id, "user.name": click.user_name, "channel": click.channel_id,
             "message.ts": click.message_ts}
    wrong = [k for k, v in texts.items() if not isinstance(v, str)]
    if wrong:
        raise BadInteraction(f"payload: {', '.join(wrong)} must be text")
    return click


def handle_interaction(body: str, headers: dict[str, str], on_gone=None) -> JSONResponse:
    """`on_gone()` is called when the answer came for a run that is gone (the receiver's watchdog re-announces its
    incident at once)."""
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
    except (ValueError, OverflowError):  # OverflowError: more digits than a float holds
        return _error(401, f"X-Slack-Request-Timestamp is not a number: {ts[:20]!r}")
    if abs(age) > REPLAY_WINDOW_SECONDS:
        log.warning("slack interaction refused: timestamp %s s old (replay window %d s)", int(age), REPLAY_WINDOW_SECONDS)
        return _error(401, f"stale X-Slack-Request-Timestamp ({human_duration(int(age))} old; the window is "
                               f"{human_duration(REPLAY_WINDOW_SECONDS)})")
    # is_valid_request checks the same window again and compares the HMAC in constant time
    if not verifier.is_valid_request(body, {"x-slack-request-timestamp": ts, "x-slack-signature": sig}):
        log.warning("slack interaction refused: bad signature")
        return _error(401, "bad Slack signature")

    try:
        click = _click(body, settings.receiver.limits.max_json_depth)
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
    # the id is what is recorded: it is the identity Slack vouches for; the display name is only shown
    result = decide_and_resume(led, rec.id, decision=click.action.decision, by=click.user_id,
                               reason=f"Slack button by {click.who}")
    if result.gone:  # the run that asked died while it waited: say so, never "resumed"
        if on_gone is not None:
            on_gone()
        _update_message(rec.slack_ts or click.message_ts, click.channel_id, None, click.who, text=result.gone)
        return JSONResponse({"ok": True, "text": result.gone, "resumed": False, "gone": True,
                             "decision": None, "by": click.who})
    if not result.first:
        text = f"already decided by {result.by}: {result.decision}"
        return JSONResponse({"ok": True, "text": text, "decision": result.decision, "by": result.by})
    _update_message(rec.slack_ts or click.message_ts, click.channel_id, result.decision, click.who)
    text = messages.verdict_text(result.decision, click.who)
    return JSONResponse({"ok": True, "text": text, "decision": result.decision, "by": click.who,
                         "resumed": result.resumed, **({"warning": result.error} if result.error else {})})


def _update_message(ts: str | None, channel_id: str, decision: str | None, who: str, *, text: str = "") -> None:
    """Show who decided on the message at once (the flow updates it again with the full summary), or `text`."""
    if not ts or not channel_id:
        return
    from remedy.adapters.slack import SlackError

    try:
        notifier = messages.notifier(runtime.settings(), channel=channel_id)
        if notifier is not None:
            # the clicker's name and the run's words are outside text: inert in mrkdwn (remedy.domain.escape)
            text = mrkdwn(text) if text else messages.verdict_text(str(decision), who)
            notifier.update(ts, text, messages.render("approval_reminder", text=text, context="gpu-remedy"))
    except SlackError as exc:
        log.warning("slack: could not update message %s: %s", ts, exc)
