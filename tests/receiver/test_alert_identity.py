"""Alert identity and evidence on the alert path: a re-sent or flapping alert is one incident and no recurrence;
the value, labels and raw text an alert carries reach triage, so value rules fire (issue 14, items 1 and 2).

Through the receiver's intake with a real ledger (SQLite), then triage's decision as the flow makes it; and once
through a real Alertmanager with a short repeat_interval."""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from sqlalchemy import update

from remedy.domain.model import IncidentStatus
from remedy.domain.xid import RemediationPath as P
from remedy.ledger import schema
from remedy.receiver.alerts import AlertIntake, NodeDirectory
from remedy.receiver.triage_policy import decide
from remedy.settings.signals import SignalThresholds
from remedy.sim.alerts import make_alert, webhook_payload

T1 = "2026-11-24T01:00:00.000Z"


def _intake(ledger, window: float = 600.0) -> AlertIntake:
    return AlertIntake(ledger, NodeDirectory(ledger), window_seconds=window)


def _alert(alertname: str, signal: str, node: str = "gpu003", gpu: str = "2", *, starts_at: str = T1,
           status: str = "firing", value: str | None = None, summary: str = "", **labels: str) -> dict:
    lab = {"alertname": alertname, "Hostname": node, "gpu": gpu, "signal": signal, **labels}
    ann = {"summary": summary or f"{alertname} on {node}"}
    if value is not None:
        ann["value"] = value
    return make_alert(lab, ann, status=status, starts_at=starts_at)


def _ago(minutes: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _age(ledger, incident_id: int, hours: float) -> None:
    """Time passes: the incident was last seen `hours` ago (Alertmanager's repeat_interval is 4 h)."""
    at = datetime.now(UTC) - timedelta(hours=hours)
    with ledger.engine.begin() as conn:
        conn.execute(update(schema.incidents).where(schema.incidents.c.id == incident_id)
                     .values(last_seen=at, first_seen=at))


def _triage(ledger, incident_id: int):
    """Triage's decision on the incident as the flow reads it (tasks.triage.read_incident + triage_policy)."""
    inc = ledger.get_incident(incident_id)
    recurrences = sum(i.fingerprint == inc.fingerprint for i in ledger.incidents(node=inc.node))
    now = datetime.now(UTC)
    return decide(asdict(inc), recurrences=recurrences, node_state="active", now=now, detected_at=now,
                  max_age_seconds=3600, thresholds=SignalThresholds())


def test_a_resent_alert_hours_later_is_the_same_incident_and_no_recurrence(ledger) -> None:
    intake = _intake(ledger)
    first = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="13", severity="warning")]))
    (opened,) = first.opened
    ledger.set_incident_status(opened.record.id, IncidentStatus.IGNORED, detail="restart-app: done")
    _age(ledger, opened.record.id, hours=4)
    again = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="13", severity="warning")]))
    assert again.opened == [] and again.to_dict()["deduplicated"] == 1
    (inc,) = ledger.incidents()
    assert inc.id == opened.record.id and inc.count == 2 and inc.status is IncidentStatus.IGNORED


def test_a_new_occurrence_after_the_hold_down_is_a_new_incident_and_a_recurrence(ledger) -> None:
    intake = _intake(ledger)
    (a,) = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="94", starts_at=T1)])).opened
    intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="94", starts_at=T1, status="resolved")]))
    ledger.set_incident_status(a.record.id, IncidentStatus.IGNORED)
    _age(ledger, a.record.id, hours=2)
    (b,) = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="94", starts_at=_ago(minutes=5))])).opened
    assert b.record.id != a.record.id
    assert _triage(ledger, b.record.id).recurrences == 2


def test_a_flapping_alert_is_one_incident(ledger) -> None:
    intake = _intake(ledger)
    (a,) = intake.ingest(webhook_payload([_alert("GpuNvlinkErrors", "nvlink-error", value="3", counter="crc",
                                                 starts_at=T1)])).opened
    for k in range(1, 4):  # resolve, fire again two minutes later, three times
        intake.ingest(webhook_payload([_alert("GpuNvlinkErrors", "nvlink-error", value="3", counter="crc",
                                              starts_at=T1, status="resolved")]))
        again = intake.ingest(webhook_payload([_alert("GpuNvlinkErrors", "nvlink-error", value="3", counter="crc",
                                                      starts_at=f"2026-11-24T01:0{2 * k}:00.000Z")]))
        assert again.opened == []
    (inc,) = ledger.incidents()
    assert inc.id == a.record.id and inc.count == 4
    assert _triage(ledger, inc.id).recurrences == 1


def test_two_app_errors_on_one_gpu_in_a_week_take_nothing_out(ledger) -> None:
    intake = _intake(ledger)
    (a,) = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="13", starts_at=T1)])).opened
    ledger.set_incident_status(a.record.id, IncidentStatus.RESOLVED)
    _age(ledger, a.record.id, hours=30)
    (b,) = intake.ingest(webhook_payload([_alert("GpuXidError", "xid", xid="13", starts_at=_ago(minutes=5))])).opened
    d = _triage(ledger, b.record.id)
    assert d.recurrences == 2
    assert d.path in (P.RESTART_APP, P.IGNORE, P.WATCH)  # an application error never quarantines or replaces


@pytest.mark.parametrize(
    ("alertname", "signal", "value", "labels", "summary", "path"),
    [
        ("NodeNotReady", "node-not-ready", "900", {}, "", P.REPLACE),  # NotReady 15 min
        ("GpuThermalThrottle", "thermal-throttle", "1800", {}, "", P.REPLACE),  # 30 min of throttling
        ("GpuHwSlowdown", "hw-slowdown", "120", {}, "", P.WATCH),  # 2 min: keep observing
        ("InfinibandDowntime", "ib-downtime", "60", {"port": "mlx5_0/1"}, "", P.REPLACE),  # 60 s down in the window
        ("GpuNvlinkErrors", "nvlink-error", "500", {"counter": "crc"}, "", P.RESET_GPU),  # 500 CRC errors/s
        ("GpuNvlinkErrors", "nvlink-error", "0.5", {"counter": "crc"}, "", P.WATCH),
        ("GpuRowRemapPending", "row-remap-pending", "1", {}, "", P.RESET_GPU),
        ("GpuRowRemapFailure", "row-remap-failure", "1", {}, "", P.REPLACE),
        ("GpuXidError", "xid", None, {"xid": "154"},
         "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
         P.REBOOT),
        ("GpuXidError", "xid", None, {"xid": "154"},
         "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
         P.RESET_GPU),
    ],
)
def test_value_rules_fire_on_the_alert_path(ledger, alertname, signal, value, labels, summary, path) -> None:
    (opened,) = _intake(ledger).ingest(webhook_payload([_alert(alertname, signal, value=value, summary=summary,
                                                               **labels)])).opened
    inc = ledger.get_incident(opened.record.id)
    assert inc.evidence["raw"] and (value is None or inc.evidence["value"] == float(value))
    d = _triage(ledger, inc.id)
    assert d.path is path, d.reason


def test_a_throttle_that_persists_past_its_watch_alert_is_acted_on(ledger) -> None:
    intake = _intake(ledger)
    (warn,) = intake.ingest(webhook_payload([_alert("GpuThermalThrottle", "thermal-throttle", value="120",
                                                    severity="warning")])).opened
    assert _triage(ledger, warn.record.id).path is P.WATCH
    ledger.set_incident_status(warn.record.id, IncidentStatus.IGNORED, detail="watch")
    # 13 min later the rule's `for: 15m` alert fires: another alert (its own fingerprint), new evidence
    (crit,) = intake.ingest(webhook_payload([_alert("GpuThermalThrottle", "thermal-throttle", value="900",
                                                    severity="critical")])).opened
    assert crit.record.id != warn.record.id
    assert _triage(ledger, crit.record.id).path is P.REPLACE


def test_evidence_keeps_the_gpu_identity_from_the_exporter_labels(ledger) -> None:
    (o,) = _intake(ledger).ingest(webhook_payload([_alert("GpuXidError", "xid", xid="79",
                                                          UUID="GPU-5e2a", serial="1654922004123")])).opened
    ev = ledger.get_incident(o.record.id).evidence
    assert ev["gpu_uuid"] == "GPU-5e2a" and ev["gpu_serial"] == "1654922004123"
    assert ev["alert_fingerprint"] and ev["starts_at"].startswith("2026-11-24T01:00:00")


@pytest.mark.servers
def test_real_alertmanager_resends_are_one_incident(receiver_factory, ledger, tmp_path) -> None:
    """A real Alertmanager with repeat_interval 2 s re-sends a firing alert several times: one incident."""
    from tests.fixtures.prometheus import run_alertmanager
    from tests.receiver.conftest import TOKEN

    server = receiver_factory()
    config = {
        "route": {"receiver": "remedy", "group_by": ["alertname"], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "2s"},
        "receivers": [{"name": "remedy", "webhook_configs": [
            {"url": server.alerts_url, "send_resolved": True,
             "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}}}]}],
    }
    with run_alertmanager(config, tmp_path) as am:
        starts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        alert = {"labels": {"alertname": "GpuXidError", "Hostname": "gpu005", "gpu": "1", "xid": "13",
                            "signal": "xid", "severity": "warning"},
                 "annotations": {"summary": "XID 13"}, "startsAt": starts}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            httpx.post(f"{am}/api/v2/alerts", json=[alert], timeout=5).raise_for_status()  # Prometheus re-posts too
            received = server.receiver.metrics.value("remedy_receiver_alerts_received_total")
            if received >= 3:
                break
            time.sleep(0.5)
    assert server.receiver.metrics.value("remedy_receiver_alerts_received_total") >= 3
    (inc,) = ledger.incidents()
    assert inc.count >= 3 and server.receiver.metrics.value("remedy_receiver_incidents_opened_total") == 1
