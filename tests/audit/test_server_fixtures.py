"""The reusable server helpers in tests/fixtures/prometheus.py: Alertmanager stays on loopback, is killed at exit."""

import httpx
import pytest

from tests.fixtures.prometheus import run_alertmanager

pytestmark = pytest.mark.servers


def test_alertmanager_accepts_and_lists_an_alert_then_stops(tmp_path):
    config = {"route": {"receiver": "null", "group_wait": "0s"}, "receivers": [{"name": "null"}]}
    with run_alertmanager(config, tmp_path) as am:
        alert = [{"labels": {"alertname": "NfsRpcSlotStarvation", "node": "gpu074"}}]
        assert httpx.post(f"{am}/api/v2/alerts", json=alert, timeout=5).status_code == 200
        listed = httpx.get(f"{am}/api/v2/alerts", timeout=5).json()
        assert [a["labels"]["node"] for a in listed] == ["gpu074"]
        status = httpx.get(f"{am}/api/v2/status", timeout=5).json()
        assert status["cluster"]["status"] == "disabled"  # --cluster.listen-address= keeps it off the network
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{am}/-/ready", timeout=2)
