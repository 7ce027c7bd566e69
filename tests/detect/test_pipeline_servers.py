"""End to end through real servers: dcgm-format metrics → Prometheus (shipped rules.yml) → Alertmanager
(shipped alertmanager.yml, webhook pointed at loopback) → webhook payload → parse_alertmanager → classify.

Loopback only, ports chosen at run time; a missing server binary fails under CI (tests/fixtures/prometheus.py).
"""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path

import pytest
import yaml

from remedy.detect.alertmanager import parse_alertmanager
from remedy.detect.signals import SignalKind, classify
from remedy.domain.xid import RemediationPath as P
from tests.fixtures.http_stub import StubServer
from tests.fixtures.prometheus import run_alertmanager, run_prometheus

pytestmark = pytest.mark.servers

DEPLOY = Path(__file__).resolve().parents[2] / "deployments"
TOKEN = "s3cret-test-token"
LABELS = 'UUID="GPU-{g}",pci_bus_id="00000000:3B:00.0",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-17",DCGM_FI_DRIVER_VERSION="550.54.15"'
METRICS = "\n".join([
    "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
    "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
    f'DCGM_FI_DEV_XID_ERRORS{{gpu="3",{LABELS.format(g=3)}}} 79',
    f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",{LABELS.format(g=0)}}} 0',
    "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge",
    f'DCGM_FI_DEV_ROW_REMAP_FAILURE{{gpu="1",{LABELS.format(g=1)}}} 1',
]) + "\n"


@pytest.fixture
def http_server():
    s = StubServer(lambda: METRICS)
    yield s
    s.close()


def test_rules_to_webhook_to_verdicts(http_server: StubServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    am_cfg = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    am_cfg["route"].update(group_wait="0s", group_interval="1s")
    hook = am_cfg["receivers"][0]["webhook_configs"][0]
    hook["url"] = f"{http_server.url}/v1/alerts/alertmanager"
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)

    with run_alertmanager(am_cfg, tmp_path) as am:
        prom_cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(DEPLOY / "prometheus" / "rules.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am.removeprefix("http://")]}]}]},
            "scrape_configs": [{"job_name": "dcgm", "honor_labels": True,
                                "static_configs": [{"targets": [http_server.url.removeprefix("http://")]}]}],
        }
        with run_prometheus(prom_cfg, tmp_path):
            signals = {}
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline and len(signals) < 2:
                try:
                    headers, body = http_server.posts.get(timeout=1)
                except queue.Empty:
                    continue
                assert headers.get("Authorization") == f"Bearer {TOKEN}"
                batch = parse_alertmanager(json.loads(body))
                assert batch.receiver == "gpu-remedy"
                for s in batch.signals:
                    signals[s.kind] = s

    assert set(signals) == {SignalKind.XID, SignalKind.ROW_REMAP_FAILURE}, signals
    xid = signals[SignalKind.XID]
    assert (xid.node, xid.gpu, xid.xid) == ("gpu-node-17", 3, 79)
    assert xid.fingerprint and not xid.resolved
    assert classify(xid).path is P.REBOOT
    remap = signals[SignalKind.ROW_REMAP_FAILURE]
    assert (remap.gpu, classify(remap).path) == (1, P.REPLACE)
