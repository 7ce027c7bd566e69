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

from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
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



RERUN = textwrap.dedent("""
    import json, sys
    from flows.replace_node import replace_node
    state = replace_node(node='gpu007', cause='row remap failed', signal='row-remap-failure', gpu=4,
                         incident_id=int(sys.argv[1]), return_state=True)
    out = state.result(raise_on_failure=False)
    print(json.dumps({"status": out.get("status"), "replacement": out.get("replacement")}))
""")


def test_a_killed_replacement_is_taken_over_on_postgres(prefect_on_postgres, fresh_postgres_url, sim, remedy_env,
                                                        tmp_path):
    """Production's databases for both: Prefect on PostgreSQL, the ledger on PostgreSQL. replace-node is killed
    (SIGKILL) during the drain; once its lease runs out a new run takes the incident over: one spare, settled."""
    import signal

    from remedy.domain.model import ActionOutcome, Incident, IncidentStatus, NodeState
    from remedy.platform.demo import _spares_validated_at_build
    from tests.approvals.helpers import wait_for

    api, _ = prefect_on_postgres
    leases = {"LEASES__TTL_SECONDS": "4", "LEASES__RENEW_SECONDS": "0.2"}
    runtime = remedy_env(sim=sim, DB_URL=fresh_postgres_url, **leases)
    _spares_validated_at_build(runtime)
    led = runtime.ledger()
    incident, _ = led.open_incident(Incident(node="gpu007", signal="row-remap-failure", gpu=4), window_seconds=600)
    env = clean_env(tmp_path) | {"PREFECT_API_URL": api, "REMEDY_DB_URL": fresh_postgres_url,
                                  "REMEDY_CLUSTER__MODE": "simulator", "REMEDY_CLUSTER__SIMULATOR_URL": sim.url} | {
        f"REMEDY_{k}": v for k, v in leases.items()}
    killed = subprocess.Popen([sys.executable, "-c", RERUN, str(incident.id)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    draining = lambda: [a for a in led.actions(incident_id=incident.id, kind="drain_node")  # noqa: E731
                        if a.outcome is ActionOutcome.RUNNING]
    deadline = time.monotonic() + 120
    while not draining():
        assert killed.poll() is None and time.monotonic() < deadline, "the run never reached its drain"
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    holder = led.get_incident(incident.id).flow_run_id
    wait_for("the dead run's lease to run out", lambda: led.run_gone(holder), timeout=30, every=0.05)

    rerun = subprocess.run([sys.executable, "-c", RERUN, str(incident.id)], env=env, capture_output=True, text=True,
                           timeout=240)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    out = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert out["status"] == "replaced", (out, rerun.stderr[-3000:])
    promoted = {a.node for a in led.actions(incident_id=incident.id, kind="set_state_active")
                if a.outcome is ActionOutcome.SUCCEEDED}
    assert promoted == {out["replacement"]}
    assert [n.labels.get("remedy.io/pool") for n in runtime.cluster().list_gpu_nodes()].count("spare") == 1
    assert led.get_incident(incident.id).status is IncidentStatus.RESOLVED
    assert led.get_node("gpu007").state is NodeState.REPAIR
    assert [a.detail["from"] for a in led.actions(incident_id=incident.id, kind="take_over_incident")] == [holder]
    assert not [a for a in led.actions(incident_id=incident.id) if a.outcome is ActionOutcome.RUNNING]
    crashed = httpx.get(f"{api}/flow_runs/{holder}").json()
    assert crashed["state_type"] == "CRASHED"
