"""Which failures a task retries: only transient ones (API server down, 409 races, Slack 429), never a gate."""

from __future__ import annotations

from remedy.errors import ClusterUnreachable, Conflict

TRANSIENT = (ClusterUnreachable, Conflict, TimeoutError, ConnectionError)


def transient_only(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except TRANSIENT:
        return True
    except Exception:
        return False
    return False
