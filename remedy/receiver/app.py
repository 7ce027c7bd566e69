"""The alert receiver: Alertmanager's webhook in, ledger incidents and Prefect events out (ASGI, served by uvicorn).

    POST /v1/alerts/alertmanager   bearer token; 200 = every alert is in the ledger (or counted as rejected)
    GET  /healthz                  ledger reachable, announcer alive
    GET  /metrics                  Prometheus text (remedy.receiver.metrics)

Status codes: 401 no/wrong token; 400 body not JSON; 422 payload that cannot be used (the body names the path of
the problem, e.g. `alerts[0]: XID 70000 out of range`) or every alert rejected (unknown nodes); 500 only when the
ledger itself failed, and then nothing was acknowledged, so Alertmanager retries. The handler never raises.
The Slack and open-loop routers of other areas are mounted here too.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from remedy.receiver.alerts import REJECTED, AlertIntake, AlertPayloadError, count_alerts, rejection_reason
from remedy.receiver.metrics import ReceiverMetrics

log = logging.getLogger(__name__)

ALERTS_PATH = "/v1/alerts/alertmanager"
# Measured here (uvicorn 0.x h11, loopback): a request on a reused keep-alive connection took ~45 ms more than on a
# fresh one (7 ms p50), for any route and any client (curl, http.client, httpx). Alertmanager sends a webhook every
# group_interval at most, so a new TCP connection per webhook is cheap; closing keeps the 50 ms p99 target.
CONNECTION_CLOSE = True


@dataclass
class Receiver:
    """What the app needs; `announcer` may be None (then nothing is sent to Prefect, incidents wait in the ledger)."""

    intake: AlertIntake
    token: str
    metrics: ReceiverMetrics
    announcer: object | None = None


def _authorized(header: str | None, token: str) -> bool:
    if not header or not token:
        return False
    scheme, _, value = header.partition(" ")
    # compare_digest on bytes: constant time, and no TypeError for non-ASCII input
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def create_app(receiver: Receiver, *, include_other_routes: bool = True) -> FastAPI:
    app = FastAPI(title="gpu-remedy receiver", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.receiver = receiver
    m = receiver.metrics

    def reply(code: int, body: dict, *, alerts: int = 0, reason: str = "") -> JSONResponse:
        if reason:
            m.received.inc(alerts)
            m.rejected.labels(reason=reason).inc(alerts)
        m.requests.labels(code=str(code)).inc()
        headers = {"Connection": "close"} if CONNECTION_CLOSE else {}
        if code == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(body, status_code=code, headers=headers)

    @app.post(ALERTS_PATH)
    async def alertmanager_webhook(request: Request) -> Response:
        started = time.perf_counter()
        try:
            if not _authorized(request.headers.get("authorization"), receiver.token):
                return reply(401, {"error": "missing or wrong bearer token"})
            body = await request.body()
            try:
                result = await run_in_threadpool(receiver.intake.ingest, body)
            except AlertPayloadError as exc:
                msg = str(exc)
                reason = rejection_reason(msg)
                return reply(400 if reason == "invalid-json" else 422, {"error": msg}, alerts=count_alerts(body),
                             reason=reason)
            m.received.inc(len(result.outcomes))
            m.opened.inc(result.count("opened"))
            m.deduplicated.inc(result.count("deduplicated"))
            m.resolved.inc(result.count("resolved"))
            for o in result.outcomes:
                if o.outcome == REJECTED:
                    m.rejected.labels(reason="unknown-node").inc()
            if result.opened and receiver.announcer is not None:
                receiver.announcer.notify()
            summary = result.to_dict()
            if result.outcomes and result.count(REJECTED) == len(result.outcomes):
                first = summary["rejections"][0]
                return reply(422, {"error": f"alerts[{first['index']}]: {first['reason']}", **summary})
            return reply(200, summary)
        except Exception as exc:  # the ledger failed: nothing acknowledged, Alertmanager will retry
            log.exception("alert intake failed")
            m.errors.inc()
            return reply(500, {"error": f"receiver could not record the alerts: {type(exc).__name__}: {exc}"[:500]})
        finally:
            m.latency.observe(time.perf_counter() - started)

    @app.get("/healthz")
    async def healthz() -> Response:
        try:
            await run_in_threadpool(receiver.intake.ledger.nodes)
        except Exception as exc:
            return JSONResponse({"status": "unhealthy", "ledger": str(exc)[:200]}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> Response:
        return PlainTextResponse(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    if include_other_routes:
        from remedy.receiver import open_loop, slack

        app.include_router(slack.router)
        app.include_router(open_loop.router)
    return app
