"""Alertmanager webhook (version 4) validation and label mapping."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timezone
from pathlib import Path

import pytest

from remedy.detect.alertmanager import ALERTNAME_KINDS, AlertPayloadError, parse_alertmanager
from remedy.detect.signals import SignalKind, classify
from remedy.domain.xid import RemediationPath as P
from remedy.errors import RemedyError

DATA = Path(__file__).parent / "data"


@pytest.fixture
def payload() -> dict:
    return json.loads((DATA / "alertmanager_webhook.json").read_text())


def test_maps_every_alert_and_keeps_resolved(payload: dict) -> None:
    b = parse_alertmanager(payload)
    assert (b.receiver, b.status, b.truncated_alerts) == ("gpu-remedy", "firing", 0)
    assert b.group_key.startswith("{}:")
    assert [s.kind for s in b.signals] == [
        SignalKind.XID, SignalKind.ROW_REMAP_PENDING, SignalKind.IB_PORT_DOWN, SignalKind.NODE_NOT_READY, SignalKind.UNKNOWN]
    xid, pending, ib, notready, other = b.signals
    assert (xid.node, xid.gpu, xid.xid, xid.fingerprint) == ("gpu-node-17", 3, 79, "c2b1a7f3e5d40a11")
    assert xid.at == datetime(2026, 11, 21, 10, 0, 1, tzinfo=UTC)
    assert classify(xid).path is P.REBOOT
    assert pending.resolved and classify(pending).rule == "alert-resolved"
    assert (ib.node, ib.labels["port"]) == ("gpu-node-18", "1")  # instance with :port stripped
    assert notready.node == "gpu-node-19" and classify(notready).path is P.REPLACE  # 360 s >= 300 s
    assert other.node == "fd00::17" and classify(other).path is P.ESCALATE  # unknown alertname: kept, escalated
    assert b.summary()["resolved"] == 1


def test_xid_from_value_annotation_when_no_xid_label(payload: dict) -> None:
    del payload["alerts"][0]["labels"]["xid"]
    s = parse_alertmanager(payload).signals[0]
    assert s.xid == 79 and s.value is None


def test_accepts_json_text_and_bytes(payload: dict) -> None:
    assert len(parse_alertmanager(json.dumps(payload)).signals) == 5
    assert len(parse_alertmanager(json.dumps(payload).encode()).signals) == 5


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: p["alerts"][2]["labels"].pop("instance"), "alerts[2].labels: missing node label: need one of node, kubernetes_node, nodename, Hostname, instance"),
        (lambda p: p["alerts"][1].pop("startsAt"), "alerts[1].startsAt: missing field"),
        (lambda p: p["alerts"][0].update(status="burning"), "alerts[0].status: Input should be 'firing' or 'resolved', got 'burning'"),
        (lambda p: p.update(version="3"), "version: Input should be '4', got '3'"),
        (lambda p: p.pop("receiver"), "receiver: missing field"),
        (lambda p: p["alerts"][0]["labels"].update(gpu="three"), "alerts[0].labels.gpu: gpu must be a whole number, got 'three'"),
        (lambda p: p["alerts"][0]["labels"].update(xid="70000"), "alerts[0]: XID 70000 out of range"),
        (lambda p: p["alerts"][3]["annotations"].update(value="lots"), "alerts[3].annotations.value: not a number: 'lots'"),
        (lambda p: p["alerts"][0]["labels"].update(signal="meltdown"), "alerts[0].labels.signal: unknown signal kind 'meltdown'"),
        (lambda p: p["alerts"].__setitem__(4, "nope"), "alerts[4]: Input should be a valid dictionary"),
        (lambda p: p["alerts"][0]["labels"].update(Hostname=7), "alerts[0].labels.Hostname: Input should be a valid string"),
    ],
)
def test_errors_name_the_path(payload: dict, mutate, message: str) -> None:
    mutate(payload)
    with pytest.raises(AlertPayloadError) as exc:
        parse_alertmanager(payload)
    assert str(exc.value).startswith(message)
    assert isinstance(exc.value, RemedyError)


def test_xid_alert_without_code(payload: dict) -> None:
    del payload["alerts"][0]["labels"]["xid"]
    del payload["alerts"][0]["annotations"]["value"]
    with pytest.raises(AlertPayloadError, match=r"alerts\[0\]: xid alert without an xid label or a value annotation"):
        parse_alertmanager(payload)


def test_malformed_json_and_wrong_top_level() -> None:
    with pytest.raises(AlertPayloadError, match="payload: not valid JSON: .* line 1 column"):
        parse_alertmanager('{"version": "4",')
    with pytest.raises(AlertPayloadError, match="payload: must be a JSON object, got list"):
        parse_alertmanager([])


def test_non_strict_collects_problems_and_keeps_good_alerts(payload: dict) -> None:
    bad = copy.deepcopy(payload)
    del bad["alerts"][2]["labels"]["instance"]
    b = parse_alertmanager(bad, strict=False)
    assert len(b.signals) == 4 and len(b.problems) == 1
    assert b.problems[0].startswith("alerts[2].labels: missing node label")


def test_truncated_alerts_reported(payload: dict) -> None:
    payload["truncatedAlerts"] = 3
    assert parse_alertmanager(payload).summary()["truncated_alerts"] == 3


def test_alertname_table_covers_metric_signal_kinds() -> None:
    covered = set(ALERTNAME_KINDS.values())
    assert covered == set(SignalKind) - {SignalKind.UNKNOWN}


def test_early_warning_alert_is_weighed_by_triage_not_acted_on_at_intake(payload: dict) -> None:
    """gpu-remedy's GpuEarlyWarning rule: a watch-level signal naming its detector; triage weighs a swap at the job's
    next checkpoint (flows/triage.py), the receiver never cordons for it (not a node-out path)."""
    alert = copy.deepcopy(payload["alerts"][0])
    alert["labels"] = {"alertname": "GpuEarlyWarning", "node": "gpu-node-17", "detector": "remap-acceleration",
                       "gpu": "3"}
    payload["alerts"] = [alert]
    s = parse_alertmanager(payload).signals[0]
    assert (s.kind, s.node, s.gpu) == (SignalKind.EARLY_WARNING, "gpu-node-17", 3)
    v = classify(s)
    assert v.path is P.WATCH and v.rule == "early-warning"
    assert v.explanation.startswith("remap-acceleration expects gpu-node-17 GPU 3 to fail soon")
