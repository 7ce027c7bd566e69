"""Production's database: a real `prefect server start` on PostgreSQL 15 (Debian's package), a flow run against
it that also keeps its ledger in PostgreSQL, checked through the API and in the database itself."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from tests.fixtures.prefect import clean_env, prefect_server_process

pytestmark = [pytest.mark.servers, pytest.mark.prefect]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prefect_on_postgres(postgres_server, tmp_path_factory):
    """(API URL, database URL) of one server for this module: its first start on PostgreSQL is the slow part."""
    tmp_path = tmp_path_factory.mktemp("prefect-pg")
    db_url = postgres_server.create_database("prefect_server")
    t0 = time.monotonic()
    try:
        with prefect_server_process(tmp_path, db_url=db_url) as api:
            print(f"prefect server on PostgreSQL healthy after {time.monotonic() - t0:.1f} s")
            yield api, db_url
    finally:
        postgres_server.drop_database("prefect_server")


FLOW = textwrap.dedent("""
    import json
    from flows.fleet_dashboard import fleet_dashboard
    out = fleet_dashboard()
    print(json.dumps({"pools": out["pools"], "notes": out["notes"]}))
""")


def test_flow_run_and_artifact_on_a_postgres_backed_server(prefect_on_postgres, fresh_postgres_url, tmp_path):
    import psycopg

    api, server_db = prefect_on_postgres
    dead = _free_port()  # no cluster here: the dashboard publishes the ledger's view with a note
    env = clean_env(tmp_path) | {"PREFECT_API_URL": api, "REMEDY_DB_URL": fresh_postgres_url,
                                  "REMEDY_CLUSTER__SIMULATOR_URL": f"http://127.0.0.1:{dead}",
                                  "REMEDY_CLUSTER__API_RETRIES": "0", "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": ""}
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", FLOW], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"flow subprocess took {time.monotonic() - t0:.1f} s")

    runs = httpx.post(f"{api}/flow_runs/filter", json={  # scheduled runs of the deployed dashboard may exist too
        "flows": {"name": {"any_": ["fleet-dashboard"]}}, "flow_runs": {"deployment_id": {"is_null_": True}}}).json()
    assert len(runs) == 1 and runs[0]["state_type"] == "COMPLETED"
    assert runs[0]["name"].startswith("fleet dashboard ")
    arts = httpx.post(f"{api}/artifacts/filter", json={"artifacts": {"key": {"any_": ["fleet-dashboard"]}}}).json()
    assert len(arts) == 1 and arts[0]["flow_run_id"] == runs[0]["id"] and "# Fleet at" in arts[0]["data"]

    # Both really live in PostgreSQL: the server's run row and the ledger's schema.
    conninfo = server_db.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM flow_run WHERE deployment_id IS NULL")]
    assert names == [runs[0]["name"]]
    with psycopg.connect(fresh_postgres_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"nodes", "incidents", "actions"} <= tables


def test_production_deployments_apply_to_a_kubernetes_work_pool(prefect_on_postgres, tmp_path):
    """`prefect work-pool create` takes our base job template and `prefect deploy --all` takes prefect.yaml:
    every deployment lands on the pool with its schedules and its trigger's automation."""
    from remedy.deployments import DEPLOYMENTS
    from remedy.production import PREFECT_YAML, ROOT, WORK_POOL_TEMPLATE

    api, _ = prefect_on_postgres
    env = clean_env(tmp_path) | {"PREFECT_API_URL": api}
    pool = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", "work-pool", "create", "gpu-remedy", "--type", "kubernetes",
         "--overwrite", "--base-job-template", str(WORK_POOL_TEMPLATE)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert pool.returncode == 0, pool.stdout[-2000:] + pool.stderr[-2000:]
    stored = httpx.get(f"{api}/work_pools/gpu-remedy").json()
    assert stored["type"] == "kubernetes"
    assert stored["base_job_template"] == json.loads(WORK_POOL_TEMPLATE.read_text())

    deploy = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file", str(PREFECT_YAML)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
    deployments = httpx.post(f"{api}/deployments/filter", json={}).json()
    by_name = {d["name"]: d for d in deployments}
    assert set(by_name) == {s.name for s in DEPLOYMENTS}
    for spec in DEPLOYMENTS:
        d = by_name[spec.name]
        assert d["work_pool_name"] == "gpu-remedy"
        assert d["entrypoint"] == f"{spec.module.replace('.', '/')}.py:{spec.function}"
        assert sorted(d["tags"]) == sorted(spec.tags)
        intervals = sorted(s["schedule"].get("interval") for s in d["schedules"])
        assert intervals == sorted(s.interval_seconds for s in spec.schedules if s.interval_seconds)
    automations = httpx.post(f"{api}/automations/filter", json={}).json()
    triggered = {t.name for s in DEPLOYMENTS for t in s.triggers}
    assert triggered and triggered <= {a["name"] for a in automations}

