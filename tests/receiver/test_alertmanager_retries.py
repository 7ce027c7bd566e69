"""What the receiver answers, as a real Alertmanager (0.25, Debian's) reads it: a fault refused for a limit is
answered 503 and Alertmanager sends it again; an alert refused for good (recorded as refused) and an alert gpu-remedy
does not handle are answered 200 and not sent again (issue 30, item 2).

Seen here first: Alertmanager does not log a failed notification as sent, so a 4xx is not retried within the flush
but comes back at every group_interval (a 422 for a bad alert arrived 4 times in 3 s at group_interval 1s)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timezone

import httpx

from remedy.config import load_settings
from remedy.domain.model import Node
from remedy.receiver.server import ReceiverServer, build_receiver
from tests.fixtures.prometheus import run_alertmanager
from tests.receiver.conftest import TOKEN


def _am_config(receiver_url: str) -> dict:
    return {
        "route": {"receiver": "gpu-remedy", "group_by": ["..."], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "1h"},
        "receivers": [{"name": "gpu-remedy", "webhook_configs": [{
            "url": receiver_url, "send_resolved": False,
            "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}}}]}],
    }


def _post(am: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    r = httpx.post(f"{am}/api/v2/alerts", json=[{"labels": labels, "annotations": annotations or {},
                                                  "startsAt": now}], timeout=10)
    assert r.status_code == 200, r.text


def _requests(server, code: str) -> float:
    return server.receiver.metrics.value("remedy_receiver_requests_total", code=code)


def _wait(cond, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


def test_a_limit_refusal_is_sent_again_and_a_bad_alert_is_not(ledger, tmp_path) -> None:
    ledger.upsert_nodes([Node(name="gpu003", gpu_count=8)])
    settings = load_settings(db_url=ledger.url, receiver={"token": TOKEN,
                                                          "limits": {"max_incidents_per_node": 1}})
    with ReceiverServer(build_receiver(settings, ledger, api_url=None)).start() as server, \
            run_alertmanager(_am_config(server.alerts_url), tmp_path) as am:
        # one hardware fault fills gpu003's cap of 1 …
        _post(am, {"alertname": "GpuXidError", "Hostname": "gpu003", "gpu": "0", "xid": "48"})
        assert _wait(lambda: len(ledger.incidents(node="gpu003")) == 1)
        # … so a second one is refused for the limit: 503, and Alertmanager keeps sending it
        _post(am, {"alertname": "GpuXidError", "Hostname": "gpu003", "gpu": "1", "xid": "79"})
        assert _wait(lambda: _requests(server, "503") >= 3), _requests(server, "503")
        refused = ledger.actions(kind="alert_refused")
        assert len(refused) == 1 and refused[0].detail["code"] == "node-cap" and refused[0].detail["retryable"]
        # an unusable alert (XID out of range): refused for good, recorded, answered 200: sent once
        m = server.receiver.metrics
        _post(am, {"alertname": "GpuXidError", "Hostname": "gpu005", "gpu": "0", "xid": "70000"})
        assert _wait(lambda: m.value("remedy_receiver_alerts_rejected_total", reason="xid-out-of-range") == 1)
        # an alert gpu-remedy does not handle: acknowledged once, never refused
        _post(am, {"alertname": "TargetDown", "job": "dcgm-exporter", "namespace": "gpu-operator"})
        assert _wait(lambda: m.value("remedy_receiver_alerts_ignored_total", reason="unhandled") == 1)
        time.sleep(3)  # a few group_intervals and retry rounds
        assert m.value("remedy_receiver_alerts_rejected_total", reason="xid-out-of-range") == 1  # not sent again
        assert m.value("remedy_receiver_alerts_ignored_total", reason="unhandled") == 1  # neither was this one
        assert _requests(server, "422") == 0
        assert len(ledger.incidents(node="gpu003")) == 1  # the refused fault is still not recorded
