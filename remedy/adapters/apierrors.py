"""What a Kubernetes API answer means, and the one retry policy every adapter call goes through.

Retried, waiting what the server asks (`Retry-After`) or backing off when it says nothing:
- 429 Too Many Requests from API Priority and Fairness or max-in-flight (a plain-text body and `Retry-After`;
  staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go, `tooManyRequests`) — but not a
  PodDisruptionBudget's 429 on an eviction (a JSON Status with a `DisruptionBudget` cause): the budget decides
  that, and the drain waits for it on its own deadline;
- 503 (API server starting or shutting down, aggregated API unavailable) and 502 / 504 (a proxy or a timeout in
  front of it);
- any other 5xx that carries `Retry-After` (client-go retries exactly 429 and 5xx with `Retry-After`:
  staging/src/k8s.io/client-go/rest/with_retry.go, `checkWait`);
- connection errors (refused, reset, timed out).
Everything else is classified by meaning and not retried here: 404 `ObjectNotFound`, 409 `Conflict` /
`AlreadyExists`, 400 / 422 `Rejected`, 401 / 403 `Forbidden`, any other 5xx `ApiServerError` (a retry gets the
same answer: a pod under two PodDisruptionBudgets gets this 500 on every attempt).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from remedy.errors import (
    AlreadyExists,
    ApiServerError,
    ClusterUnreachable,
    Conflict,
    Forbidden,
    ObjectNotFound,
    Rejected,
    RemedyError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

BUSY = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER = 60.0  # APF's own ceiling on the Retry-After it computes; a larger one is a broken proxy
MULTIPLE_PDBS = "more than one PodDisruptionBudget"  # pkg/registry/core/pod/storage/eviction.go's 500


def status_body(exc: ApiException) -> dict:
    """The `Status` object the API server sent, or {} (APF's 429 and proxies answer in plain text)."""
    try:
        body = json.loads(exc.body or "{}")
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def status_message(exc: ApiException) -> str:
    body = status_body(exc)
    if body.get("message"):
        return str(body["message"])
    text = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else (exc.body or "")
    first = text.strip().splitlines()[0][:200] if text.strip() else ""
    return first or (exc.reason or str(exc.status)).strip()


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (the `Retry-After` header, else Status.details.retryAfterSeconds)."""
    if not isinstance(exc, ApiException):
        return None
    value = (exc.headers or {}).get("Retry-After") if exc.headers is not None else None
    if value is None:
        value = (status_body(exc).get("details") or {}).get("retryAfterSeconds")
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def is_pdb_refusal(exc: ApiException) -> bool:
    """The eviction subresource's 429: a PodDisruptionBudget does not allow the disruption now."""
    causes = (status_body(exc).get("details") or {}).get("causes") or []
    return exc.status == 429 and any(c.get("reason") == "DisruptionBudget" for c in causes)


def is_multiple_pdbs(exc: ApiException) -> bool:
    return exc.status == 500 and MULTIPLE_PDBS in status_message(exc)


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        if exc.status == 429:
            return not is_pdb_refusal(exc)
        return exc.status in BUSY or (bool(exc.status) and exc.status >= 500 and retry_after(exc) is not None)
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))


class DisruptionRefused(RemedyError):
    """An eviction's 429: a PodDisruptionBudget does not allow it now (it may later)."""


class MultipleBudgets(ApiServerError):
    """An eviction's 500: the pod is covered by more than one PodDisruptionBudget; the API refuses it every time."""


def classify(exc: ApiException, what: str) -> RemedyError:
    """The API answer as the error an operator reads: what we tried, what the server said."""
    code, body = exc.status, status_body(exc)
    said = f"{what}: {status_message(exc)}"
    if code == 429 and is_pdb_refusal(exc):
        err: RemedyError = DisruptionRefused(status_message(exc))
    elif is_multiple_pdbs(exc):
        err = MultipleBudgets(status_message(exc))
    elif code == 404:
        err = ObjectNotFound(said)
    elif code == 409:
        err = AlreadyExists(said) if body.get("reason") == "AlreadyExists" else Conflict(said)
    elif code in (400, 422):
        err = Rejected(f"{what} rejected by the API server: {status_message(exc)}")
    elif code in (401, 403):
        err = Forbidden(f"not allowed to {what}: {status_message(exc)} (check gpu-remedy's RBAC and credentials)")
    else:
        err = ApiServerError(f"the API server failed to {what}: HTTP {code}: {status_message(exc)}")
    err.status = code  # type: ignore[attr-defined]
    err.api_exception = exc  # type: ignore[attr-defined]
    return err


def connection_reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    if "Connection refused" in text or isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the API server running?)"
    if "timed out" in text.lower():
        return "timed out"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _why(exc: BaseException | None) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {status_message(exc)}"
    return connection_reason(exc) if exc is not None else "unknown"


class ApiRetry:
    """The retry policy: `attempts` tries in all; between them the server's `Retry-After`, else exponential
    back-off from `backoff` seconds, capped at `max_backoff`. `sleep` is injectable for tests of the policy."""

    def __init__(self, attempts: int, *, backoff: float = 0.2, max_backoff: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.attempts = max(1, attempts)
        self._backoff = wait_exponential(multiplier=backoff, max=max_backoff)
        self._sleep = sleep

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after(exc) if exc is not None else None
        return asked if asked is not None else self._backoff(state)

    @staticmethod
    def _before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.info("Kubernetes API busy or unreachable (%s); retry %d in %.1fs", _why(exc), state.attempt_number,
                 state.next_action.sleep if state.next_action else 0.0)

    def call(self, what: str, where: str, fn: Callable[..., T], *args, **kwargs) -> T:
        """`fn(*args, **kwargs)`, retried as above; then ClusterUnreachable (busy or down) or the classified error."""
        retrying = Retrying(stop=stop_after_attempt(self.attempts), wait=self._wait, sleep=self._sleep,
                            retry=retry_if_exception(retryable), before_sleep=self._before_sleep, reraise=True)
        last: Exception
        try:
            return retrying(fn, *args, **kwargs)
        except ApiException as exc:
            if not retryable(exc):
                raise classify(exc, what) from None
            last = exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            last = exc
        raise ClusterUnreachable(
            f"Kubernetes API at {where} failed to {what} after {self.attempts} attempts: {_why(last)}"
        ) from None
