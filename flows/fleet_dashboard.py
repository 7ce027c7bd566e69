"""The fleet at a glance, every 10 minutes: one page in the Prefect UI under the artifact key `fleet-dashboard`
(its history is the fleet's history), plus a sortable pool table.

    pools by state (ledger vs live labels) → open breakers → runs waiting for a person → open incidents →
    lemon candidates → spare pool

Reads only. An unreachable cluster still publishes the ledger's view, with a note saying what is missing.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from tasks.dashboard import (
    Dashboard,
    check_spare_pool,
    count_pools,
    dashboard_markdown,
    list_open_incidents,
    list_waiting_for_a_person,
    read_breakers,
    read_job_failures,
    score_lemons,
)

ARTIFACT_KEY = "fleet-dashboard"


def _run_name() -> str:
    return f"fleet dashboard {datetime.now(UTC):%Y-%m-%d %H:%M}Z"


@flow(name="fleet-dashboard", flow_run_name=_run_name, log_prints=False)
def fleet_dashboard() -> dict[str, Any]:
    now = datetime.now(UTC)

    # 1. Pools by lifecycle state, as the ledger has them and as the node labels say.
    pools, notes = count_pools()
    # 2. What holds automation back, and what is being worked on.
    breakers = read_breakers()
    incidents = list_open_incidents()
    waiting = list_waiting_for_a_person(now)
    # 3. What is going wrong slowly: lemons, and the spare pool's depth and spread.
    lemons = score_lemons(now)
    spares = check_spare_pool()
    # 4. The training Job's restart budget: a real Job fails outright past its backoffLimit.
    job = read_job_failures()

    board = Dashboard(now, pools, breakers, incidents, lemons, spares, notes, job, waiting)
    create_markdown_artifact(key=ARTIFACT_KEY, markdown=dashboard_markdown(board), description="Fleet dashboard")
    create_table_artifact(key=f"{ARTIFACT_KEY}-pools", table=pools, description="Nodes per lifecycle state")
    return asdict(board) | {"at": now.isoformat()}
