"""`POST /v1/remediations/{incident_id}/execute`: an external break-fix system lets a proposed remediation run.

In open-loop pools (ladder.open_loop_pools) the fix flow emits `remedy.remediation.proposed` and pauses; this
endpoint (bearer token = receiver.execute_token, not Alertmanager's receiver.token: the credential that reports
faults must not be the one that lets remediations run) records the go-ahead in the ledger and resumes the run.
Body (optional JSON): {"approve": true, "by": "ticket-system", "reason": "CHG-1234"}; approve false declines
(nothing is done). No execute_token configured → 503 for every call. Bad input → 4xx; a failure inside → a generic
503 (logged), never a 500.
"""

from __future__ import annotations

import hmac
import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from remedy import runtime
from remedy.approvals.decide import decide_and_resume
from remedy.approvals.open_loop import OPEN_LOOP_KIND
from remedy.receiver.limits import BadJson, BodyTooLarge, loads_bounded, read_body

router = APIRouter()
log = logging.getLogger(__name__)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


@router.post("/v1/remediations/{incident_id}/execute")
async def execute_remediation(incident_id: int, request: Request) -> JSONResponse:
    try:
        limits = runtime.settings().receiver.limits
        raw = await read_body(request, limits.max_body_bytes)
    except BodyTooLarge as exc:
        return _error(413, str(exc))
    except Exception:
        log.exception("execute: could not read settings or body")
        return _error(503, UNAVAILABLE)
    return await run_in_threadpool(_guarded, incident_id, raw, request.headers.get("authorization", ""))


UNAVAILABLE = "the receiver cannot take the go-ahead right now; nothing was recorded"


def _guarded(incident_id: int, raw: bytes, authorization: str) -> JSONResponse:
    try:
        return handle_execute(incident_id, raw, authorization)
    except Exception:
        log.exception("execute of incident %s failed", incident_id)
        return _error(503, UNAVAILABLE)


def handle_execute(incident_id: int, raw: bytes, authorization: str) -> JSONResponse:
    settings = runtime.settings()
    want = settings.receiver.execute_token.get_secret_value()
    if not want:
        return _error(503, "receiver.execute_token is not configured: refusing every go-ahead")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token or not hmac.compare_digest(token.strip().encode(), want.encode()):
        return _error(401, "missing or wrong bearer token")
    if not 1 <= incident_id < 2**63:
        return _error(404, f"no remediation of incident {incident_id} is waiting to be executed")
    try:
        body = loads_bounded(raw, settings.receiver.limits.max_json_depth) if raw.strip() else {}
    except BadJson as exc:
        return _error(400, str(exc))
    if not isinstance(body, dict):
        return _error(400, "body must be a JSON object")
    approve = body.get("approve", True)
    if not isinstance(approve, bool):
        return _error(400, f"'approve' must be true or false, got {approve!r:.40}")
    by, reason = body.get("by") or "external", body.get("reason") or ""
    if not isinstance(by, str) or not isinstance(reason, str):
        return _error(400, "'by' and 'reason' must be text")

    led = runtime.ledger()
    waiting = [a for a in led.approvals(incident_id=incident_id) if a.kind == OPEN_LOOP_KIND]
    pending = [a for a in waiting if a.pending]
    if not pending:
        if waiting:
            last = waiting[-1]
            return _error(409, f"incident {incident_id}: already decided: {last.decision} by {last.decided_by}")
        return _error(404, f"no remediation of incident {incident_id} is waiting to be executed")
    result = decide_and_resume(led, pending[-1].id, decision="approve" if approve else "deny", by=by, reason=reason)
    if result.gone:  # the run that proposed it died while it waited; its incident is (being) taken over
        return _error(409, f"incident {incident_id}: {result.gone}")
    if not result.first:
        return _error(409, f"incident {incident_id}: already decided: {result.decision} by {result.by}")
    return JSONResponse({"ok": True, "incident_id": incident_id, "approval_id": result.approval_id,
                         "decision": result.decision, "by": by, "resumed": result.resumed,
                         **({"warning": result.error} if result.error else {})})
