"""`remedy up` out of the box runs the NFS audit: the simulator's nodes export mountstats as node_exporter does, the
stack's own Prometheus (Debian's binary, on a port chosen at run time) scrapes them, the `nfs-audit` deployment reads
it, judges every node's mount, archives the report under the workdir (no S3 configured) and finds the node injected
with RPC slot starvation. `remedy down` stops that Prometheus with the rest. Real processes throughout."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.prometheus import require_binary
from tests.fixtures.stack import prefect_db_template, seed_prefect_home  # noqa: F401 - a fixture
from tests.platform.test_own_servers import _running, remedy, stack_env

pytestmark = [pytest.mark.prefect, pytest.mark.servers]


def _wait(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def test_nfs_audit_under_remedy_up_reads_the_stacks_prometheus_and_finds_the_starved_node(tmp_path,
                                                                                         prefect_db_template):
    require_binary("prometheus")
    seed_prefect_home(tmp_path / "var" / "stack" / "prefect", prefect_db_template)  # tests/fixtures/stack.py
    env = stack_env(tmp_path, prometheus=True)  # the stack's own Prometheus is what this test reads
    up = subprocess.Popen([sys.executable, "-m", "remedy.cli", "up", "--json", "--prefect-port", "0", "--sim-port", "0",
                           "--receiver-port", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=open(tmp_path / "up.err", "w"), text=True)
    try:
        line = up.stdout.readline()
        assert line.startswith("{"), f"remedy up did not start ({line!r}): " + (tmp_path / "up.err").read_text()[-3000:]
        urls = json.loads(line)
        assert urls.get("prometheus"), (tmp_path / "up.err").read_text()[-3000:]
        record = json.loads((tmp_path / "var" / "stack" / "running.json").read_text())["prometheus"]
        assert record["url"] == urls["prometheus"] and _running(record["pid"])

        inject = remedy(tmp_path, "sim", "inject", "nfs-slot-starvation", "--node", "gpu007", "--url",
                        urls["simulator"])
        assert inject.returncode == 0, inject.stderr
        # Wait until Prometheus holds enough scrapes since the injection that gpu007's 5-min rates show the slot
        # wait. Counting three scrapes in all was not enough: when the stack came up slowly (a loaded machine), the
        # three were taken before the injection, and the audit ran with the starvation diluted in healthy samples.
        ratio = ("max by (instance) (rate(node_mountstats_nfs_operations_queue_time_seconds_total{instance=\"gpu007\"}"
                 "[5m]) / rate(node_mountstats_nfs_operations_request_time_seconds_total{instance=\"gpu007\"}[5m]))"
                 " > 0.5")
        _wait(lambda: httpx.get(f"{urls['prometheus']}/api/v1/query", params={"query": ratio},
                                timeout=5).json()["data"]["result"], "gpu007's slot wait in Prometheus's 5-min rates", 120)

        api = urls["prefect_api"]
        dep = httpx.get(f"{api}/deployments/name/nfs-audit/nfs-audit", timeout=10).json()
        run = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={}, timeout=10).json()

        def finished():
            r = httpx.get(f"{api}/flow_runs/{run['id']}", timeout=10).json()
            return r if r["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

        done = _wait(finished, "the nfs-audit run to finish")
        assert done["state_type"] == "COMPLETED", (done["state"].get("message"), (tmp_path / "up.err").read_text()[-3000:])
        assert done["name"].startswith("nfs audit over 5m, ") and "None" not in done["name"]

        reports = list((tmp_path / "var" / "stack" / "archive" / "audits" / "nfs").rglob("*.json"))
        assert len(reports) == 1, reports
        mounts = {m["node"]: m for m in json.loads(reports[0].read_text())["mounts"]}
        assert len(mounts) == 63, "every simulated node's checkpoint mount is audited"
        assert mounts["gpu007"]["verdict"]["kind"] == "rpc-slot-starvation"
        assert {m["verdict"]["kind"] for n, m in mounts.items() if n != "gpu007"} <= {"healthy", "idle"}
    finally:
        down = remedy(tmp_path, "down")
        up.wait(timeout=60)
    assert down.returncode == 0, down.stderr
    assert not _running(record["pid"]), "remedy down stops the stack's Prometheus"
    assert not (tmp_path / "var" / "stack" / "running.json").exists()
