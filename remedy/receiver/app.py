"""The alert receiver: Alertmanager's webhook in, ledger incidents and Prefect events out (ASGI, served by uvicorn).

    POST /v1/alerts/alertmanager   bearer token; judged alert by alert (see docs/operations.md, "What the receiver
                                   answers"): 200 = every alert recorded, ignored or refused for good; 503 = some
                                   alert was not recorded for a reason that passes (a limit): Alertmanager re-sends
    GET  /healthz                  200 when the ledger can be written (a test write, rolled back); else 503
    GET  /metrics                  Prometheus text (remedy.receiver.metrics)

Status codes: 401 no/wrong token; 413 body over receiver.limits.max_body_bytes; 400 body not JSON (or nested too
deep, NaN, NUL in a string); 422 a payload that cannot be used as a whole (not Alertmanager's format, more distinct
faults than max_incidents_per_request); 200 when every alert was recorded, acknowledged or refused for good (each
refusal is in the answer, the metrics and the ledger; the `error` field names the first when all were refused); 503
when an alert was refused for a limit that passes, or the ledger failed: Alertmanager retries. Alertmanager does not
log a failed notification as sent, so any non-2xx comes back at the next group_interval (a 5xx is also retried at
once, with back-off): only what should come back gets one. No answer names the database or carries an exception's
text. The handler never raises. The Slack and open-loop routers of other areas are mounted here too.

With no token configured the receiver only runs on loopback (remedy.receiver.server.check_bind) and then takes
alerts from loopback clients only.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from remedy.receiver.alerts import (
    IGNORED,
    REJECTED,
    AlertIntake,
    AlertPayloadError,
    RequestOverLimit,
    count_alerts,
    rejection_reason,
)
from remedy.receiver.limits import BadJson, BodyTooLarge, loads_bounded, read_body
from remedy.receiver.metrics import ReceiverMetrics
from remedy.settings.receiver import ReceiverLimits

log = logging.getLogger(__name__)

ALERTS_PATH = "/v1/alerts/alertmanager"
# Measured here (uvicorn 0.x h11, loopback): a request on a reused keep-alive connection took ~45 ms more than on a
# fresh one (7 ms p50), for any route and any client (curl, http.client, httpx). Alertmanager sends a webhook every
# group_interval at most, so a new TCP connection per webhook is cheap; closing keeps the 50 ms p99 target.
CONNECTION_CLOSE = True


class Announcer(Protocol):
    """Sends the incidents the receiver opened to Prefect (remedy.receiver.events.IncidentAnnouncer)."""

    def start(self) -> object: ...
    def stop(self) -> None: ...
    def notify(self) -> None: ...


@dataclass
class Receiver:
    """What the app needs; `announcer` may be None (then nothing is sent to Prefect, incidents wait in the ledger)."""

    intake: AlertIntake
    token: str
    metrics: ReceiverMetrics
    announcer: Announcer | None = None
    limits: ReceiverLimits = field(default_factory=ReceiverLimits)


UNAVAILABLE = "the receiver cannot record alerts right now; nothing was recorded, retry later"


def _one_line(exc: BaseException) -> str:
    """For the log (never an answer): the exception's first line, which may name the database."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def ledger_writable(ledger) -> None:
    """Raise unless the ledger takes a write: one row into breaker_events in a transaction that is rolled back (so
    SQLite's write lock, a read-only file or a PostgreSQL standby all show)."""
    from remedy.domain.model import utcnow
    from remedy.ledger import schema
    from remedy.ledger.engine import write_transaction

    class _Rollback(Exception):
        pass

    try:
        with write_transaction(ledger.engine) as conn:
            conn.execute(schema.breaker_events.insert().values(
                scope_kind="healthz", scope="healthz", from_state="", to_state="", reason="write probe (rolled back)",
                at=utcnow(), by="receiver"))
            raise _Rollback
    except _Rollback:
        pass


def _authorized(header: str | None, token: str, client_host: str | None) -> bool:
    if not token:  # no token: only a loopback-bound receiver runs (check_bind), and it serves loopback clients only
        return is_loopback(client_host or "")
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    # compare_digest on bytes: constant time, and no TypeError for non-ASCII input
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or "localhost"; anything else (0.0.0.0, ::, a name) may be reachable from elsewhere."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def create_app(receiver: Receiver, *, include_other_routes: bool = True) -> FastAPI:
    app = FastAPI(title="gpu-remedy receiver", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.receiver = receiver
    m = receiver.metrics

    limits = receiver.limits

    def reply(code: int, body: dict, *, alerts: int = 0, reason: str = "",
              headers: dict[str, str] | None = None) -> JSONResponse:
        if reason:
            m.received.inc(alerts)
            m.rejected.labels(reason=reason).inc(alerts)
        m.requests.labels(code=str(code)).inc()
        headers = dict(headers or {}) | ({"Connection": "close"} if CONNECTION_CLOSE else {})
        if code == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(body, status_code=code, headers=headers)

    @app.post(ALERTS_PATH)
    async def alertmanager_webhook(request: Request) -> Response:
        started = time.perf_counter()
        try:
            client = request.client.host if request.client else None
            if not _authorized(request.headers.get("authorization"), receiver.token, client):
                return reply(401, {"error": "missing or wrong bearer token"})
            try:
                body = await read_body(request, limits.max_body_bytes)
            except BodyTooLarge as exc:
                return reply(413, {"error": str(exc)}, alerts=1, reason="too-large")
            try:
                payload = loads_bounded(body, limits.max_json_depth, what="payload")
            except BadJson as exc:
                return reply(400, {"error": str(exc)}, alerts=1, reason="invalid-json")
            try:
                result = await run_in_threadpool(receiver.intake.ingest, payload)
            except RequestOverLimit as exc:
                return reply(422, {"error": str(exc)}, alerts=count_alerts(payload), reason="over-limit")
            except AlertPayloadError as exc:
                msg = str(exc)
                return reply(422, {"error": msg}, alerts=count_alerts(payload), reason=rejection_reason(msg))
            except (SQLAlchemyError, OSError) as exc:
                if isinstance(exc, (DataError, IntegrityError)):  # a value the ledger refuses: input, not outage
                    log.warning("alert intake: the ledger refused a value: %s", type(exc).__name__)
                    return reply(422, {"error": "payload: a value cannot be stored in the ledger"},
                                 alerts=count_alerts(payload), reason="malformed")
                # the ledger failed: nothing acknowledged, Alertmanager retries; the detail goes to the log only
                log.error("alert intake: ledger unavailable: %s", _one_line(exc))
                m.errors.inc()
                return reply(503, {"error": UNAVAILABLE}, headers={"Retry-After": "10"})
            except Exception:  # a case the validation missed: still the sender's payload, never a 500
                log.exception("alert intake failed on a payload that passed validation")
                m.errors.inc()
                return reply(422, {"error": "payload: could not be used (the receiver's log has the details)"},
                             alerts=count_alerts(payload), reason="malformed")
            m.received.inc(len(result.outcomes))
            m.opened.inc(result.count("opened"))
            m.deduplicated.inc(result.count("deduplicated"))
            m.resolved.inc(result.count("resolved"))
            for o in result.outcomes:
                if o.outcome == REJECTED:
                    m.rejected.labels(reason=o.code or "unresolved-node").inc()
                elif o.outcome == IGNORED:
                    m.ignored.labels(reason=o.code or "unhandled").inc()
            if result.opened and receiver.announcer is not None:
                receiver.announcer.notify()
            summary = result.to_dict()
            if result.retry:
                # Alertmanager's webhook notifier re-sends on 5xx only (notify.Retrier without RetryCodes: a 429 is
                # dropped like any 4xx). What was recorded is a re-send's no-op (same occurrence, same incident).
                first = next(o for o in result.outcomes if o.retryable)
                return reply(503, {"error": f"alerts[{first.index}]: {first.reason}", **summary},
                             headers={"Retry-After": "30"})
            if result.outcomes and result.count(REJECTED) == len(result.outcomes):
                # every alert refused for good, each recorded (ledger, metric): a 200 stops the re-sends. Alertmanager
                # does not log a failed notification as sent, so a 4xx here would come back every group_interval.
                first = summary["rejections"][0]
                why = first["reason"] if first["reason"].startswith("alerts[") else f"alerts[{first['index']}]: {first['reason']}"
                return reply(200, {"error": why, **summary})
            return reply(200, summary)
        except Exception:  # the answer itself failed: say nothing about why
            log.exception("alert receiver: unexpected failure")
            m.errors.inc()
            return reply(503, {"error": UNAVAILABLE})
        finally:
            m.latency.observe(time.perf_counter() - started)

    @app.get("/healthz")
    async def healthz() -> Response:
        try:
            await asyncio.wait_for(run_in_threadpool(ledger_writable, receiver.intake.ledger),
                                   timeout=limits.health_timeout_seconds)
        except Exception as exc:  # noqa: BLE001 - any failure to write is "unhealthy"; the log says which
            log.warning("healthz: the ledger cannot be written: %s", _one_line(exc))
            return JSONResponse({"status": "unhealthy", "ledger": "cannot be written"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> Response:
        return PlainTextResponse(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    if include_other_routes:
        from remedy.receiver import open_loop, slack

        app.include_router(slack.router)
        app.include_router(open_loop.router)
    return app
