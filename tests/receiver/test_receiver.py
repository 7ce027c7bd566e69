"""The alert receiver over HTTP (real uvicorn on a loopback port): auth, bad input, dedup, resolved alerts,
metrics, and no loss when Prefect is down or the receiver restarts."""

from __future__ import annotations

import time

from remedy.domain.model import IncidentStatus
from remedy.receiver import outbox
from remedy.receiver.events import EVENT_OPENED
from remedy.sim.alerts import make_alert, webhook_payload
from tests.receiver.conftest import dead_api_url


def xid_alert(node: str = "gpu003", gpu: str = "2", xid: str = "79", status: str = "firing", **extra) -> dict:
    labels = {"alertname": "GpuXidError", "Hostname": node, "gpu": gpu, "xid": xid, "severity": "critical", **extra}
    return make_alert(labels, {"summary": f"XID {xid} on {node}"}, status=status)


def counters(server) -> dict[str, float]:
    m = server.receiver.metrics
    return {
        "received": m.value("remedy_receiver_alerts_received_total"),
        "opened": m.value("remedy_receiver_incidents_opened_total"),
        "deduplicated": m.value("remedy_receiver_alerts_deduplicated_total"),
        "resolved": m.value("remedy_receiver_alerts_resolved_total"),
        "rejected": sum(m.value("remedy_receiver_alerts_rejected_total", reason=r)
                        for r in ("unresolved-node", "malformed", "invalid-json", "xid-out-of-range")),
    }


def test_token_required_and_compared(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    payload = webhook_payload([xid_alert()])
    assert post(server, payload, token=None).status_code == 401
    wrong = post(server, payload, token="s3cret-receiver-tokeN")
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert post(server, payload, token="Basic").status_code == 401
    assert ledger.incidents() == []
    assert server.receiver.metrics.value("remedy_receiver_requests_total", code="401") == 3
    assert post(server, payload).status_code == 200
    assert len(ledger.incidents()) == 1


def test_malformed_payloads_say_what_is_wrong_and_write_nothing(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    r = post(server, None, raw=b'{"version": "4", "alerts": [')
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]

    no_alerts = webhook_payload([xid_alert()])
    del no_alerts["alerts"]
    r = post(server, no_alerts)
    assert r.status_code == 422 and r.json()["error"] == "alerts: missing field"

    bad_time = webhook_payload([xid_alert(), xid_alert("gpu004")])
    bad_time["alerts"][1]["startsAt"] = "yesterday"
    r = post(server, bad_time)
    assert r.status_code == 422 and r.json()["error"].startswith("alerts[1].startsAt")

    # one good alert and one XID out of range: judged alert by alert (issue 30): the good one is recorded whatever
    # its neighbour carries, the bad one is refused alone, reported, counted and kept in the ledger
    r = post(server, webhook_payload([xid_alert("gpu005"), xid_alert("gpu006", xid="70000")]))
    assert r.status_code == 200
    body = r.json()
    assert (body["opened"], body["rejected"]) == (1, 1)
    assert body["rejections"][0]["reason"] == "alerts[1]: XID 70000 out of range: must be 1..65535"
    assert [i.node for i in ledger.incidents()] == ["gpu005"]
    [refused] = ledger.actions(kind="alert_refused")
    assert refused.node == "gpu006" and refused.detail["code"] == "xid-out-of-range" and "70000" in refused.error
    # alone, the same bad alert is answered 200 with the refusal: recorded as refused, so Alertmanager stops sending
    # it (it does not log a 4xx notification as sent and would send it again every group_interval)
    r = post(server, webhook_payload([xid_alert("gpu006", xid="70000")]))
    assert r.status_code == 200 and r.json()["error"] == "alerts[0]: XID 70000 out of range: must be 1..65535"
    assert r.json()["rejected"] == 1 and r.json()["opened"] == 0

    m = server.receiver.metrics
    assert m.value("remedy_receiver_alerts_rejected_total", reason="invalid-json") == 1
    assert m.value("remedy_receiver_alerts_rejected_total", reason="malformed") == 1 + 2
    assert m.value("remedy_receiver_alerts_rejected_total", reason="xid-out-of-range") == 2
    c = counters(server)
    assert c["received"] == c["rejected"] + c["opened"] == 7


def test_unknown_node_rejected_and_counted_never_acted_on(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    r = post(server, webhook_payload([xid_alert("gpu999")]))
    assert r.status_code == 200 and r.json()["rejected"] == 1
    assert "no label names a node of this cluster (tried Hostname=gpu999)" in r.json()["error"]
    # mixed: the known node's fault is recorded, the unknown one is reported back and counted
    r = post(server, webhook_payload([xid_alert("gpu998"), xid_alert("gpu007")]))
    assert r.status_code == 200
    body = r.json()
    assert (body["opened"], body["rejected"]) == (1, 1)
    assert body["rejections"][0]["node"] == "gpu998"
    assert [i.node for i in ledger.incidents()] == ["gpu007"]
    assert server.receiver.metrics.value("remedy_receiver_alerts_rejected_total", reason="unresolved-node") == 2
    # recorded in the ledger with what the alert carried, once per alert occurrence
    refused = ledger.actions(kind="alert_refused")
    assert sorted(a.node for a in refused) == ["gpu998", "gpu999"]
    assert all(a.detail["code"] == "unresolved-node" and a.detail["labels"]["Hostname"] == a.node for a in refused)


def test_node_lister_makes_a_new_node_known(receiver_factory, post, ledger) -> None:
    fleet = {"gpu003"}
    server = receiver_factory(node_lister=lambda: fleet)
    server.receiver.intake.nodes._refresh_seconds = 0  # re-read on every miss for this test
    fleet.add("gpu100")  # joined the cluster, not yet in the ledger
    assert post(server, webhook_payload([xid_alert("gpu100")])).status_code == 200
    assert ledger.incidents()[0].node == "gpu100"


def test_duplicate_storm_is_one_incident_with_counts(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    for _ in range(40):
        assert post(server, webhook_payload([xid_alert()])).status_code == 200
    r = post(server, webhook_payload([xid_alert(), xid_alert(), xid_alert(gpu="5")]))
    assert (r.json()["opened"], r.json()["deduplicated"]) == (1, 2)
    incidents = ledger.incidents()
    assert [(i.gpu, i.count) for i in incidents] == [(2, 42), (5, 1)]
    assert incidents[0].first_seen <= incidents[0].last_seen
    c = counters(server)
    assert c == {"received": 43, "opened": 2, "deduplicated": 41, "resolved": 0, "rejected": 0}
    assert c["received"] == c["opened"] + c["deduplicated"] + c["resolved"] + c["rejected"]


def test_resolved_alerts_are_recorded_not_acted_on(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    post(server, webhook_payload([xid_alert()]))
    before = ledger.incidents()[0]
    time.sleep(0.01)
    r = post(server, webhook_payload([xid_alert(status="resolved")]))
    assert r.status_code == 200 and r.json()["resolved"] == 1
    after = ledger.incidents()[0]
    assert (after.id, after.count, after.status) == (before.id, 1, IncidentStatus.OPEN)
    assert after.last_seen > before.last_seen
    # resolved with nothing open: kept as a resolved row, never announced
    post(server, webhook_payload([xid_alert("gpu009", status="resolved")]))
    row = [i for i in ledger.incidents() if i.node == "gpu009"][0]
    assert row.status is IncidentStatus.RESOLVED
    assert [i.node for i in outbox.unannounced(ledger)] == ["gpu003"]
    assert counters(server)["resolved"] == 2


def test_new_incidents_are_announced_as_prefect_events(receiver_factory, post, ledger, event_stub) -> None:
    server = receiver_factory(api_url=event_stub.api_url)
    post(server, webhook_payload([xid_alert("gpu009", gpu="4", xid="79")]))
    post(server, webhook_payload([xid_alert("gpu009", gpu="4", xid="79")]))  # a repeat: no second event
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not event_stub.events:
        time.sleep(0.02)
    time.sleep(0.3)
    assert len(event_stub.events) == 1
    ev = event_stub.events[0]
    incident = ledger.incidents()[0]
    assert ev["event"] == EVENT_OPENED
    assert ev["resource"] == {"prefect.resource.id": "remedy.node.gpu009", "prefect.resource.name": "gpu009"}
    roles = {r["prefect.resource.role"]: r["prefect.resource.id"] for r in ev["related"]}
    assert roles == {"gpu": "remedy.gpu.gpu009.4", "rack": "remedy.rack.rack1", "xid": "remedy.xid.79",
                     "incident": f"remedy.incident.{incident.id}"}
    p = ev["payload"]
    assert (p["incident_id"], p["node"], p["gpu"], p["signal"], p["xid"]) == (incident.id, "gpu009", 4, "xid", 79)
    assert (p["path"], p["severity"]) == ("reboot", "critical")  # seed 002 Table 3: XID 79 → reboot
    assert p["detected_at"] == incident.first_seen.isoformat()
    assert ledger.get_incident(incident.id).flow_run_id == f"event:{ev['id']}"
    assert server.receiver.metrics.value("remedy_receiver_events_emitted_total") == 1


def test_prefect_down_keeps_incident_and_reemits(receiver_factory, post, ledger, event_stub) -> None:
    server = receiver_factory(api_url=dead_api_url())
    announcer = server.receiver.announcer
    announcer.retry_seconds = 0.1
    assert post(server, webhook_payload([xid_alert("gpu010")])).status_code == 200
    m = server.receiver.metrics
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and m.value("remedy_receiver_event_emit_failures_total") < 2:
        time.sleep(0.05)
    assert m.value("remedy_receiver_event_emit_failures_total") >= 2  # tried, failed, tried again
    assert [i.node for i in outbox.unannounced(ledger)] == ["gpu010"]

    # the API comes back (a different address here): the held event goes out, once
    event_stub.fail = True
    announcer.sink.api_url = event_stub.api_url
    time.sleep(0.3)
    assert event_stub.events == [] and outbox.unannounced(ledger)
    event_stub.fail = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and outbox.unannounced(ledger):
        time.sleep(0.05)
    assert outbox.unannounced(ledger) == []
    time.sleep(0.3)
    assert [e["payload"]["node"] for e in event_stub.events] == ["gpu010"]
    assert m.value("remedy_receiver_events_emitted_total") == 1
    assert m.value("remedy_receiver_event_emit_retries_total") == 1


def test_restart_loses_nothing_acknowledged(receiver_factory, post, ledger, event_stub) -> None:
    first = receiver_factory(api_url=dead_api_url())
    for node in ("gpu001", "gpu002", "gpu003"):
        assert post(first, webhook_payload([xid_alert(node)])).status_code == 200
    first.stop()  # the process dies with three acknowledged, unannounced incidents

    second = receiver_factory(api_url=event_stub.api_url)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(event_stub.events) < 3:
        time.sleep(0.05)
    assert sorted(e["payload"]["node"] for e in event_stub.events) == ["gpu001", "gpu002", "gpu003"]
    # dedup still holds across the restart: the ledger, not the process, is the truth
    r = post(second, webhook_payload([xid_alert("gpu002")]))
    assert r.json()["deduplicated"] == 1
    assert len(ledger.incidents()) == 3


def test_healthz_and_metrics_endpoints(receiver_factory, post) -> None:
    import httpx

    server = receiver_factory()
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    post(server, webhook_payload([xid_alert()]))
    text = httpx.get(server.url + "/metrics").text
    assert "remedy_receiver_incidents_opened_total 1.0" in text
    assert 'remedy_receiver_requests_total{code="200"} 1.0' in text
    assert "remedy_receiver_request_seconds_bucket" in text
