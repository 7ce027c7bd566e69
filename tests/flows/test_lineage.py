"""A subflow acts under the claim of the run that started it (tasks.leases.fence): its lineage, read from the run
contexts in this process (no API request), is the one the Prefect API records. A run whose
parent is not in this process falls back to the API."""

from __future__ import annotations

import pytest
from prefect import flow, task

pytestmark = pytest.mark.prefect


def _api_lineage(run_id: str) -> tuple[str, ...]:
    from uuid import UUID

    from prefect.client.orchestration import get_client

    chain: list[str] = []
    with get_client(sync_client=True) as client:
        parent_task = client.read_flow_run(UUID(run_id)).parent_task_run_id
        while parent_task is not None:
            parent = client.read_task_run(parent_task).flow_run_id
            chain.append(str(parent))
            parent_task = client.read_flow_run(parent).parent_task_run_id
    return tuple(chain)


@task
def lineage_seen_by_a_task() -> tuple[str, tuple[str, ...] | None]:
    from tasks.leases import _inline_ancestors, current_run_id

    run_id = current_run_id()
    return run_id, _inline_ancestors(run_id)


@flow
def grandchild() -> tuple[str, tuple[str, ...] | None]:
    return lineage_seen_by_a_task()


@flow
def child() -> list:
    return [lineage_seen_by_a_task(), grandchild()]


@flow
def parent() -> list:
    return [lineage_seen_by_a_task(), *child()]


def test_inline_lineage_is_the_apis(prefect_server):
    seen = parent()
    (top, top_line), (mid, mid_line), (low, low_line) = seen
    assert top_line == () and mid_line == (top,) and low_line == (mid, top)
    for run_id, inline in seen:
        assert inline == _api_lineage(run_id)


def test_a_run_outside_this_context_is_asked_of_the_api(prefect_server):
    """Without the run's contexts (a run started by run_deployment in another process or thread; here: asked after
    the runs ended), the contexts cannot say, and the API answers."""
    from tasks.leases import _inline_ancestors, _lineage, ancestors

    (top, _), (mid, _), (low, _) = parent()
    _lineage.clear()
    assert _inline_ancestors(low) is None
    assert ancestors(low) == (mid, top) == _api_lineage(low)
