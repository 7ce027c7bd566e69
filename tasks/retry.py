"""Which failures a task retries: only transient ones (API server down, 409 races, Slack 429), never a gate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from prefect.cache_policies import NO_CACHE, CachePolicy

from remedy.errors import ClusterUnreachable, Conflict

TRANSIENT = (ClusterUnreachable, Conflict, TimeoutError, ConnectionError)


def transient_only(task: Any, task_run: Any, state: Any) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except TRANSIENT:
        return True
    except Exception:
        return False
    return False


class Retrying(TypedDict):
    """`@task(..., **retrying(...))`'s keywords, typed so the type checker still matches `task`'s overloads."""

    retries: int
    retry_delay_seconds: list[float]
    retry_condition_fn: Callable[..., bool]
    cache_policy: CachePolicy


def retrying(*delays: float) -> Retrying:
    """Retry transient failures once per delay (seconds), never cached: a task here is a side effect or a fresh read."""
    return Retrying(retries=len(delays), retry_delay_seconds=list(delays), retry_condition_fn=transient_only,
                    cache_policy=NO_CACHE)
