"""Fault injection: hidden health, kernel log, dcgm-exporter metrics, and the Alertmanager v4 webhook."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remedy.errors import NodeNotFound
from remedy.sim.alerts import fingerprint
from remedy.sim.cluster import build_cluster
from remedy.sim.faults import FaultError, inject


class Receiver:
    """A local webhook receiver recording each POST (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.posts.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": json.loads(body)})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/alerts"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_xid_79_changes_health_writes_dmesg_and_posts_a_v4_webhook(sim, receiver):
    sim.cluster.alert_url, sim.cluster.alert_token = receiver.url, "s3cret"
    result = inject(sim.cluster, "xid", "gpu007", gpu=3, code=79)
    gpu = sim.cluster.health_of("gpu007").gpus[3]
    assert gpu.fallen_off_bus and gpu.pending_xids == [79] and sim.cluster.health_of("gpu007").faulty()
    assert not sim.cluster.health_of("gpu007").gpus[2].pending_xids
    assert result["alert"]["posted"] is True and result["alert"]["status"] == 200
    [post] = receiver.posts
    assert post["auth"] == "Bearer s3cret"
    body = post["body"]
    assert body["version"] == "4" and body["status"] == "firing" and body["receiver"]
    assert body["groupKey"] == '{}:{alertname="GpuXidError"}' and body["externalURL"].startswith("http")
    assert body["groupLabels"] == {"alertname": "GpuXidError"}
    [alert] = body["alerts"]
    labels = alert["labels"]
    assert (labels["alertname"], labels["Hostname"], labels["gpu"], labels["xid"], labels["severity"]) == \
        ("GpuXidError", "gpu007", "3", "79", "critical")
    assert alert["status"] == "firing" and alert["endsAt"] == "0001-01-01T00:00:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", alert["startsAt"])
    assert alert["fingerprint"] == fingerprint(labels) and re.fullmatch(r"[0-9a-f]{16}", alert["fingerprint"])
    status, dmesg = _get(f"{sim.url}/sim/nodes/gpu007/dmesg")
    assert status == 200
    assert re.search(r"NVRM: Xid \(PCI:0000:5d:00\): 79, pid=.*GPU has fallen off the bus\.", dmesg)


def test_fingerprint_is_prometheus_fnv64a():
    # FNV-64a of the empty label set is the FNV offset basis
    assert fingerprint({}) == "cbf29ce484222325"
    assert fingerprint({"a": "1", "b": "2"}) == fingerprint({"b": "2", "a": "1"})
    assert fingerprint({"a": "1"}) != fingerprint({"a": "2"})


def test_app_level_xid_restarts_the_training_pod_without_a_pending_fault(sim, core):
    inject(sim.cluster, "xid", "gpu003", gpu=0, code=43)
    pod = core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu003").items[0]
    assert pod.status.container_statuses[0].restart_count == 1 and pod.status.phase == "Running"
    assert sim.cluster.health_of("gpu003").gpus[0].pending_xids == []  # seed 002: RESTART_APP
    assert sim.cluster.health_of("gpu003").gpus[0].last_xid == 43
    log = core.read_namespaced_pod_log(pod.metadata.name, "training")
    assert "Xid 43" in log


def test_metrics_are_dcgm_exporter_text_prometheus_can_parse(sim):
    inject(sim.cluster, "xid", "gpu002", gpu=1, code=119)
    inject(sim.cluster, "row-remap-pending", "gpu002", gpu=5)
    inject(sim.cluster, "thermal", "gpu002", gpu=6)
    inject(sim.cluster, "pcie-degraded", "gpu002", gpu=7, width=8)
    status, text = _get(f"{sim.url}/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(family.name, s.labels["Hostname"], s.labels["gpu"])] = (s.value, s.labels)
    assert len({k[1] for k in samples}) == 16
    value, labels = samples[("DCGM_FI_DEV_XID_ERRORS", "gpu002", "1")]
    assert value == 119 and labels["device"] == "nvidia1" and labels["modelName"] == "NVIDIA B200"
    assert labels["UUID"].startswith("GPU-") and labels["DCGM_FI_DRIVER_VERSION"] == "570.124.06"
    assert samples[("DCGM_FI_DEV_XID_ERRORS", "gpu002", "0")][0] == 0
    assert samples[("DCGM_FI_DEV_ROW_REMAP_PENDING", "gpu002", "5")][0] == 1
    assert samples[("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "gpu002", "5")][0] == 1
    assert int(samples[("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gpu002", "6")][0]) & 0x40  # HW thermal slowdown
    assert samples[("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gpu002", "7")][0] == 8
    assert samples[("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gpu001", "7")][0] == 16
    _, one = _get(f"{sim.url}/metrics?node=gpu002")
    assert 'Hostname="gpu001"' not in one and 'Hostname="gpu002"' in one


def test_each_fault_kind_changes_the_health_it_names():
    cluster = build_cluster(nodes=6, spares=1, time_scale=0.01)
    inject(cluster, "row-remap-failure", "gpu001", gpu=1)
    inject(cluster, "correctable-remaps", "gpu001", gpu=2, count=254)  # seed 002's gpu124 reached 254
    inject(cluster, "nvlink-down", "gpu001", gpu=3, link=5)
    inject(cluster, "ib-port-down", "gpu002", port=3, seconds=20)
    inject(cluster, "lemon", "gpu003")
    inject(cluster, "slow-nccl", "gpu003", size=268435456)
    inject(cluster, "reset-fails", "gpu004")
    h1, h2, h3, h4 = (cluster.health_of(n) for n in ("gpu001", "gpu002", "gpu003", "gpu004"))
    assert h1.gpus[1].remap_failure and h1.gpus[1].uncorrectable_remaps == 8
    assert h1.gpus[2].correctable_remaps == 254 and h1.gpus[3].nvlink_down == [5]
    port = h2.ib_ports[2]
    assert port.state == "Down" and port.downtime_seconds == 20 and port.link_downed == 1
    cluster.settle(until=lambda: port.state == "Active", timeout=3)  # the flap ends after 20 s (0.2 s here)
    assert port.state == "Active" and port.downtime_seconds == 20
    assert h3.lemon and h3.nccl_slow_sizes == [268435456]
    assert not any(g.reset_clears for g in h4.gpus)
    inject(cluster, "heal", "gpu001")
    assert not cluster.health_of("gpu001").faulty()
    assert cluster.health_of("gpu001").gpus[0].uuid == h1.gpus[0].uuid


def test_bad_injections_are_clear_errors_and_failed_posts_never_raise(sim):
    with pytest.raises(FaultError, match="unknown fault kind 'meltdown'"):
        inject(sim.cluster, "meltdown", "gpu001")
    with pytest.raises(NodeNotFound, match="gpu999"):
        inject(sim.cluster, "xid", "gpu999", code=79)
    with pytest.raises(FaultError, match="has no GPU 9"):
        inject(sim.cluster, "xid", "gpu001", gpu=9, code=79)
    with pytest.raises(FaultError, match="'code' is required"):
        inject(sim.cluster, "xid", "gpu001", gpu=0)
    sim.cluster.alert_url = "http://127.0.0.1:9/unreachable"  # discard port: nothing listens
    result = inject(sim.cluster, "thermal", "gpu001", gpu=0)
    assert result["alert"]["posted"] is False and "cannot post" in result["alert"]["error"]
    assert sim.cluster.health_of("gpu001").gpus[0].thermal_throttle


def test_heal_resolves_the_alerts_it_raised(sim, receiver):
    sim.cluster.alert_url = receiver.url
    inject(sim.cluster, "xid", "gpu005", gpu=0, code=145)
    inject(sim.cluster, "heal", "gpu005")
    assert [p["body"]["status"] for p in receiver.posts] == ["firing", "resolved"]
    resolved = receiver.posts[1]["body"]["alerts"][0]
    assert resolved["status"] == "resolved" and resolved["endsAt"] != "0001-01-01T00:00:00Z"
    assert resolved["fingerprint"] == receiver.posts[0]["body"]["alerts"][0]["fingerprint"]


def test_sim_http_endpoints_inject_and_state(sim):
    req = urllib.request.Request(f"{sim.url}/sim/inject", method="POST",
                                 data=json.dumps({"kind": "xid", "node": "gpu009", "gpu": 4,
                                                  "params": {"code": 149}}).encode())
    with urllib.request.urlopen(req, timeout=5) as resp:
        result = json.loads(resp.read())
    assert result["health"]["gpus"][4]["pending_xids"] == [149]
    status, text = _get(f"{sim.url}/sim/state?objects=false")
    state = json.loads(text)
    assert state["health"]["gpu009"]["gpus"][4]["pending_xids"] == [149] and "objects" not in state
    assert state["training"] == {"parallelism": 14, "ready": 14}
    bad = urllib.request.Request(f"{sim.url}/sim/inject", method="POST",
                                 data=json.dumps({"kind": "xid", "node": "nope", "params": {"code": 1}}).encode())
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, timeout=5)
    assert err.value.code == 404 and json.loads(err.value.read())["error"] == "node not found: nope"
    status, _ = _get(f"{sim.url}/sim/nodes/nope/dmesg")
    assert status == 404


@pytest.mark.parametrize("kind, params, signal", [
    ("xid", {"gpu": 2, "code": 149}, "xid"),
    ("row-remap-pending", {"gpu": 1}, "row-remap-pending"),
    ("row-remap-failure", {"gpu": 1}, "row-remap-failure"),
    ("correctable-remaps", {"gpu": 1, "count": 254}, "correctable-remap"),
    ("pcie-degraded", {"gpu": 4, "width": 8}, "pcie-degraded"),
    ("thermal", {"gpu": 5}, "thermal-throttle"),
    ("nvlink-down", {"gpu": 6, "link": 2}, "nvlink-error"),
    ("ib-port-down", {"port": 3, "seconds": 45}, "ib-port-down"),
    ("not-ready", {}, "node-not-ready"),
])
def test_every_alert_reads_back_as_gpu_remedys_signal(sim, receiver, kind, params, signal):
    from remedy.detect.alertmanager import parse_alertmanager

    sim.cluster.alert_url = receiver.url
    params = dict(params)
    inject(sim.cluster, kind, "gpu010", gpu=params.pop("gpu", None), **params)
    [post] = receiver.posts
    [sig] = parse_alertmanager(post["body"]).signals
    assert sig.node == "gpu010" and sig.kind.value == signal and not sig.resolved
    if kind == "xid":
        assert (sig.gpu, sig.xid) == (2, 149)
    if kind == "ib-port-down":
        assert sig.value == 45


def test_metrics_read_back_as_gpu_remedys_dcgm_signals(sim):
    from remedy.detect.dcgm import parse_dcgm_metrics, signals_from_dcgm

    _, text = _get(f"{sim.url}/metrics")
    healthy = parse_dcgm_metrics(text)
    assert healthy.unparsed == 0 and healthy.parsed > 0
    assert signals_from_dcgm(healthy.samples) == []  # a healthy fleet raises nothing
    inject(sim.cluster, "xid", "gpu004", gpu=1, code=79)
    inject(sim.cluster, "pcie-degraded", "gpu005", gpu=2, width=4)
    inject(sim.cluster, "thermal", "gpu006", gpu=3)
    inject(sim.cluster, "row-remap-failure", "gpu007", gpu=4)
    _, text = _get(f"{sim.url}/metrics")
    parsed = parse_dcgm_metrics(text)
    got = {(s.node, s.gpu, s.kind.value) for s in signals_from_dcgm(parsed.samples)}
    assert {("gpu004", 1, "xid"), ("gpu005", 2, "pcie-degraded"), ("gpu006", 3, "thermal-throttle"),
            ("gpu007", 4, "row-remap-failure")} <= got
    assert {n for n, _, _ in got} == {"gpu004", "gpu005", "gpu006", "gpu007"}
