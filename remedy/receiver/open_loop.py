"""`POST /v1/remediations/{incident_id}/execute`: an external break-fix system lets a proposed remediation run.

In open-loop pools (ladder.open_loop_pools) the fix flow emits `remedy.remediation.proposed` and pauses; this
endpoint (bearer token = receiver.token) records the go-ahead in the ledger and resumes the run. Body (optional
JSON): {"approve": true, "by": "ticket-system", "reason": "CHG-1234"}; approve false declines (nothing is done).
"""

from __future__ import annotations

import hmac
import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from remedy import runtime
from remedy.approvals.decide import decide_and_resume
from remedy.approvals.open_loop import OPEN_LOOP_KIND

router = APIRouter()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


@router.post("/v1/remediations/{incident_id}/execute")
async def execute_remediation(incident_id: int, request: Request) -> JSONResponse:
    raw = await request.body()
    return await run_in_threadpool(handle_execute, incident_id, raw, request.headers.get("authorization", ""))


def handle_execute(incident_id: int, raw: bytes, authorization: str) -> JSONResponse:
    settings = runtime.settings()
    want = settings.receiver.token.get_secret_value()
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token or not hmac.compare_digest(token.strip().encode(), want.encode()):
        return _error(401, "missing or wrong bearer token")
    try:
        body = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return _error(400, f"body is not JSON: {exc.msg}")
    if not isinstance(body, dict):
        return _error(400, "body must be a JSON object")
    approve = body.get("approve", True)
    if not isinstance(approve, bool):
        return _error(400, f"'approve' must be true or false, got {approve!r}")
    by = str(body.get("by") or "external")
    reason = str(body.get("reason") or "")

    led = runtime.ledger()
    waiting = [a for a in led.approvals(incident_id=incident_id) if a.kind == OPEN_LOOP_KIND]
    pending = [a for a in waiting if a.pending]
    if not pending:
        if waiting:
            last = waiting[-1]
            return _error(409, f"incident {incident_id}: already decided: {last.decision} by {last.decided_by}")
        return _error(404, f"no remediation of incident {incident_id} is waiting to be executed")
    result = decide_and_resume(led, pending[-1].id, decision="approve" if approve else "deny", by=by, reason=reason)
    if not result.first:
        return _error(409, f"incident {incident_id}: already decided: {result.decision} by {result.by}")
    return JSONResponse({"ok": True, "incident_id": incident_id, "approval_id": result.approval_id,
                         "decision": result.decision, "by": by, "resumed": result.resumed,
                         **({"warning": result.error} if result.error else {})})
