"""A real Prometheus (Debian's package) scrapes the simulator's dcgm-exporter endpoint."""

from __future__ import annotations

import time

import httpx
import pytest

from remedy.sim.faults import inject
from tests.fixtures.prometheus import run_prometheus, scrape_config

pytestmark = pytest.mark.servers


def test_prometheus_scrapes_the_simulated_fleet_and_sees_an_injected_xid(sim, tmp_path):
    inject(sim.cluster, "xid", "gpu004", gpu=1, code=79)
    with run_prometheus(scrape_config(sim.url, interval="1s", job="dcgm-exporter"), tmp_path) as prom:
        deadline = time.monotonic() + 20
        result = []
        while time.monotonic() < deadline and not result:
            resp = httpx.get(f"{prom}/api/v1/query", params={"query": "DCGM_FI_DEV_XID_ERRORS > 0"}, timeout=5)
            result = resp.json()["data"]["result"]
            time.sleep(0.3)
        assert len(result) == 1, result
        labels = result[0]["metric"]
        assert (labels["Hostname"], labels["gpu"], result[0]["value"][1]) == ("gpu004", "1", "79")
        count = httpx.get(f"{prom}/api/v1/query", params={"query": "count(DCGM_FI_DEV_GPU_TEMP)"}, timeout=5)
        assert count.json()["data"]["result"][0]["value"][1] == str(16 * 8)
        health = httpx.get(f"{prom}/api/v1/targets", timeout=5).json()["data"]["activeTargets"][0]
        assert health["health"] == "up" and not health["lastError"]
