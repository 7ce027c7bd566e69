"""Every bad input is a 4xx and limits exist (issue 17, part 5), over real HTTP against a real uvicorn receiver:
body size (413), JSON nesting and numbers (400), numeric bounds (refused alert by alert), fault caps per request and per node, a ledger
that cannot be written (503 with a generic answer, /healthz 503), and nothing of the database in any answer."""

from __future__ import annotations

import json
import socket
import sqlite3

import httpx
import pytest

from remedy.config import load_settings
from remedy.domain.model import Node, Topology
from remedy.ledger import Ledger
from remedy.receiver.server import ReceiverServer, build_receiver
from remedy.sim.alerts import make_alert, webhook_payload
from tests.receiver.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def xid_alert(node: str = "gpu003", gpu: str = "2", xid: str = "79", **extra) -> dict:
    labels = {"alertname": "GpuXidError", "Hostname": node, "gpu": gpu, "xid": xid, "severity": "critical", **extra}
    return make_alert(labels, {"summary": f"XID {xid} on {node}"})


@pytest.fixture
def serve(ledger):
    """serve(**limits) → a running receiver on the test ledger with those receiver.limits (and the test token)."""
    started = []

    def start(led=None, **limits):
        led = led or ledger
        settings = load_settings(db_url=led.url, receiver={"token": TOKEN, "limits": limits})
        server = ReceiverServer(build_receiver(settings, led, api_url=None)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def send(server, payload=None, *, raw: bytes | None = None, headers: dict | None = None) -> httpx.Response:
    body = raw if raw is not None else json.dumps(payload).encode()
    return httpx.post(server.alerts_url, content=body, headers=headers or AUTH, timeout=30)


def test_body_over_the_cap_is_413_declared_or_streamed(serve, ledger) -> None:
    server = serve(max_body_bytes=64 * 1024)
    big = webhook_payload([xid_alert()])
    big["commonAnnotations"] = {"description": "x" * 100_000}
    r = send(server, big)
    assert r.status_code == 413 and "max_body_bytes" in r.json()["error"]

    def chunks():  # no Content-Length: the cap holds while reading
        yield b'{"version": "4", "padding": "'
        for _ in range(100):
            yield b"y" * 1024
        yield b'"}'

    r = httpx.post(server.alerts_url, content=chunks(), headers=AUTH, timeout=30)
    assert r.status_code == 413
    assert ledger.incidents() == []
    # under the cap the same receiver takes it
    assert send(server, webhook_payload([xid_alert()])).status_code == 200


@pytest.mark.parametrize("raw, why", [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),                      # RecursionError before
    (b'{"version": "4", "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32"),
    (b'{"version": "4", "n": NaN}', "not a number JSON allows"),
    (b'{"version": "4", "n": 1e400}', "out of range"),
    (b'{"version": "4", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),       # past Python's int digit limit
    (b'{"version": "4", "s": "a\\u0000b"}', "NUL"),
    (b'{"version": "4", "s": "\\ud800"}', "surrogate"),
    (b"\xff\xfe\x00garbage", "not valid JSON"),
])
def test_json_the_receiver_cannot_take_is_400(serve, raw, why) -> None:
    r = send(serve(), raw=raw)
    assert r.status_code == 400, r.text
    assert why in r.json()["error"]


@pytest.mark.parametrize("labels, why", [
    ({"xid": "inf"}, "labels.xid: xid must be a non-negative whole number"),
    ({"xid": "1e400"}, "labels.xid: xid must be"),
    ({"xid": "nan"}, "labels.xid"),
    ({"xid": "70000"}, "XID 70000 out of range: must be 1..65535"),
    ({"gpu": "1e30"}, "labels.gpu: gpu must be a non-negative whole number below 2^31"),
    ({"gpu": "-1"}, "labels.gpu"),
])
def test_numbers_out_of_bounds_are_refused_and_write_nothing(serve, ledger, labels, why) -> None:
    # refused alert by alert (200: each refusal is in the answer, the metrics and the ledger; a 4xx would only make
    # Alertmanager send it again every group_interval)
    r = send(serve(), webhook_payload([xid_alert(**labels)]))
    assert r.status_code == 200, r.text
    assert why in r.json()["error"]
    assert ledger.incidents() == []


def test_infinite_values_and_impossible_times_are_refused(serve, ledger) -> None:
    server = serve()
    inf = make_alert({"alertname": "GpuThermalThrottle", "Hostname": "gpu003", "gpu": "1"}, {"value": "+Inf"})
    r = send(server, webhook_payload([inf]))
    assert r.status_code == 200 and "must be finite" in r.json()["error"]
    naive = webhook_payload([xid_alert()])
    naive["alerts"][0]["startsAt"] = "2026-01-02T03:04:05"
    r = send(server, naive)
    assert r.status_code == 200 and "time zone" in r.json()["error"]
    ancient = webhook_payload([xid_alert()])  # Go's zero time as startsAt: the dedup window would underflow
    ancient["alerts"][0]["startsAt"] = "0001-01-01T00:00:00Z"
    r = send(server, ancient)
    assert r.status_code == 200 and "before 1970" in r.json()["error"]
    assert ledger.incidents() == []


def test_gpu_index_within_the_nodes_gpu_count(serve, ledger) -> None:
    ledger.upsert_nodes([Node(name="gpu100", gpu_count=8, topology=Topology(rack="rack9"))])
    server = serve(max_gpus_per_node=16)
    r = send(server, webhook_payload([xid_alert("gpu100", gpu="99")]))
    assert r.status_code == 200
    assert r.json()["error"] == "alerts[0]: GPU 99 out of range: gpu100 has 8 GPUs (0..7)"
    assert send(server, webhook_payload([xid_alert("gpu100", gpu="8")])).status_code == 200
    # a node whose GPU count is not known: the configured bound
    r = send(server, webhook_payload([xid_alert("gpu003", gpu="16")]))
    assert r.status_code == 200 and "max_gpus_per_node" in r.json()["error"]
    assert ledger.incidents() == []
    # mixed: the good one is recorded, the bad one reported and counted
    r = send(server, webhook_payload([xid_alert("gpu100", gpu="7"), xid_alert("gpu100", gpu="12", xid="48")]))
    assert r.status_code == 200 and r.json()["opened"] == 1 and r.json()["rejected"] == 1
    assert [(i.node, i.gpu) for i in ledger.incidents()] == [("gpu100", 7)]
    m = server.receiver.metrics
    assert m.value("remedy_receiver_alerts_rejected_total", reason="gpu-out-of-range") == 4


def test_one_request_cannot_open_a_hundred_incidents(serve, ledger) -> None:
    """The attack of the issue: one request, one node, gpus 100–199. Bounded three ways now."""
    ledger.upsert_nodes([Node(name="gpu100", gpu_count=8)])
    server = serve(max_incidents_per_request=32, max_incidents_per_node=4)
    flood = webhook_payload([xid_alert("gpu100", gpu=str(g)) for g in range(100, 200)])
    r = send(server, flood)
    assert r.status_code == 422
    assert r.json()["error"] == ("alerts: 100 distinct faults in one request, more than 32 "
                                 "(receiver.limits.max_incidents_per_request); nothing recorded")
    assert ledger.incidents() == []

    # within the request cap, on one node: XIDs 40–49 are 5 node-attributable (42, 46–49) and 5 application-class
    # (40, 41, 43–45) faults; each class has its own cap of 4, so 4 + 4 are recorded and one of each is refused with
    # a retryable answer (Alertmanager re-sends on 5xx only)
    many = webhook_payload([xid_alert("gpu100", gpu=str(g % 8), xid=str(xid)) for g, xid in enumerate(range(40, 50))])
    r = send(server, many)
    body = r.json()
    assert r.status_code == 503 and body["opened"] == 8 and body["rejected"] == 2 and body["retry"] is True
    assert {x["xid"] for x in body["rejections"]} == {45, 49}
    assert "gpu100 already has 4 distinct application-class faults" in body["rejections"][0]["reason"]
    assert len(ledger.incidents(node="gpu100")) == 8
    # a later request: a repeat of a known fault still counts (dedup), a new one is refused, other nodes are fine
    again = webhook_payload([xid_alert("gpu100", gpu="0", xid="40")])
    assert send(server, again).json()["deduplicated"] == 1
    r = send(server, webhook_payload([xid_alert("gpu100", gpu="5", xid="79")]))
    assert r.status_code == 503 and "max_incidents_per_node" in r.json()["error"]
    assert send(server, webhook_payload([xid_alert("gpu004", gpu="5", xid="79")])).json()["opened"] == 1
    assert len(ledger.incidents(node="gpu100")) == 8
    m = server.receiver.metrics
    assert m.value("remedy_receiver_alerts_rejected_total", reason="node-cap") == 3
    assert m.value("remedy_receiver_alerts_rejected_total", reason="over-limit") == 100


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_database_is_a_generic_503_naming_nothing(serve) -> None:
    """PostgreSQL down: 503 (Alertmanager retries), no host, port, driver or exception text in any answer."""
    port = _dead_port()
    led = Ledger(f"postgresql+psycopg://remedy:pw@127.0.0.1:{port}/remedy?connect_timeout=2")
    server = serve(led)
    r = send(server, webhook_payload([xid_alert()]))
    assert r.status_code == 503 and r.headers["retry-after"]
    assert r.json() == {"error": "the receiver cannot record alerts right now; nothing was recorded, retry later"}
    health = httpx.get(server.url + "/healthz", timeout=30)
    assert health.status_code == 503
    for answer in (r.text, health.text):
        assert str(port) not in answer and "127.0.0.1" not in answer and "psycopg" not in answer.lower()
    led.close()


def test_healthz_follows_whether_the_ledger_can_be_written(serve, ledger, tmp_path) -> None:
    """Another writer holds SQLite's write lock (a stuck process): reads still work, writes do not."""
    led = Ledger(ledger.url, busy_timeout_seconds=0.3)
    server = serve(led, health_timeout_seconds=2)
    assert httpx.get(server.url + "/healthz", timeout=30).json() == {"status": "ok"}
    holder = sqlite3.connect(ledger.url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        health = httpx.get(server.url + "/healthz", timeout=30)
        assert health.status_code == 503 and health.json() == {"status": "unhealthy", "ledger": "cannot be written"}
        r = send(server, webhook_payload([xid_alert()]))
        assert r.status_code == 503 and "locked" not in r.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
    assert send(server, webhook_payload([xid_alert()])).status_code == 200  # Alertmanager's retry lands
    assert ledger.breaker_events() == []  # the probe's write was rolled back every time
    led.close()
