"""The early-warning scan's domain half (remedy.warn.scan): Prometheus frames → detector inputs → findings → the
alert the receiver reads. The frames have the shape PrometheusSource.query_range returns (one column per label,
`timestamp`, `value`); tests/warn/test_scan_servers.py gets them from a real Prometheus."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pandas as pd

from remedy.detect.alertmanager import parse_alertmanager
from remedy.detect.signals import SignalKind, classify
from remedy.settings.lemon import EarlyWarningSettings
from remedy.warn.scan import ScanInputs, finding_alert, findings_markdown, port_events, scan

T0 = datetime(2026, 11, 27, 12, tzinfo=UTC)
JOB = [f"gpu{i:03d}" for i in range(12)]
SPARES = ["gpu100", "gpu101"]


def temps(hot: dict[str, list[float]] | None = None, samples: int = 10, seed: int = 1) -> pd.DataFrame:
    """GPU temperature per node as `max by (Hostname)` returns it: busy job nodes at 74–78 °C with noise, idle
    spares at 34 °C; `hot` overrides a node's samples."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(samples):
        t = T0 + timedelta(seconds=30 * i)
        for n in JOB:
            v = (hot or {}).get(n, [None] * samples)[i]
            rows.append({"Hostname": n, "timestamp": t, "value": v if v is not None else 76 + rng.normal(0, 1.0)})
        for n in SPARES:
            rows.append({"Hostname": n, "timestamp": t, "value": 34 + rng.normal(0, 0.5)})
    return pd.DataFrame(rows)


def only_temps(frame: pd.DataFrame) -> EarlyWarningSettings:
    s = EarlyWarningSettings()
    s.scan.peer_queries = {"gpu_temperature_max_c": "max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)"}
    return s


def test_a_busy_healthy_fleet_with_idle_spares_raises_nothing():
    """Every job node runs hot and busy; the idle spares are 40 °C cooler. Peers are only the job's nodes, so
    neither the busy nodes nor the spares are outliers."""
    frame = temps()
    s = only_temps(frame)
    report = scan(ScanInputs("llm", JOB, {"gpu_temperature_max_c": frame}), T0 + timedelta(minutes=5), s)
    assert report.findings == []
    # the same samples with the spares counted as peers would have flagged both: the exclusion is what holds
    wrong = scan(ScanInputs("llm", JOB + SPARES, {"gpu_temperature_max_c": frame}), T0 + timedelta(minutes=5), s)
    assert {f.node for f in wrong.findings} == set(SPARES)


def test_a_node_running_hotter_than_its_job_is_warned_a_single_spike_is_not():
    # cooling failing: ~20 °C above its peers and climbing to the slowdown temperature. The MAD is floored at 5 %
    # of the median (≈ 3.8 °C here), so it takes about 20 °C to pass z 3.5: a GPU a few degrees warmer than the
    # rest (its place in the chassis) is not an alarm.
    hot = {"gpu004": [77, 98, 99, 99, 100, 100, 100, 101, 101, 101],
           "gpu007": [76, 76, 99, 76, 76, 76, 76, 76, 76, 76]}  # one spike
    frame = temps(hot)
    report = scan(ScanInputs("llm", JOB, {"gpu_temperature_max_c": frame}), T0 + timedelta(minutes=5),
                  only_temps(frame))
    assert [(f.node, f.detector, f.metric) for f in report.findings] == [
        ("gpu004", "peer-outlier", "gpu_temperature_max_c")]
    f = report.findings[0]
    assert f.first_seen == T0 + timedelta(seconds=30) and f.score > 3.5 and 74 < f.baseline < 78


def test_port_states_become_outages_and_a_creeping_port_is_warned():
    """node_infiniband_state_id sampled every 5 s: 4 = ACTIVE. mlx5_0/1 is down for one sample twice (10 s of
    down time in the hour, past half of NCCL's ~7 s); mlx5_1/1 never leaves ACTIVE."""
    rows = []
    for i in range(60):
        t = T0 + timedelta(seconds=5 * i)
        rows.append({"instance": "gpu003:9100", "device": "mlx5_0", "port": "1", "timestamp": t,
                     "value": 1.0 if i in (10, 40) else 4.0})
        rows.append({"instance": "gpu003:9100", "device": "mlx5_1", "port": "1", "timestamp": t, "value": 4.0})
    frame = pd.DataFrame(rows)
    events = port_events(frame)
    assert events[events["port"] == "mlx5_0/1"]["state"].tolist() == ["up", "down", "up", "down", "up"]
    assert events[events["port"] == "mlx5_1/1"]["state"].tolist() == ["up"]
    assert set(events["node"]) == {"gpu003"}  # instance without its :port, as alerts are read
    report = scan(ScanInputs("llm", JOB, {}, ib_states=frame), T0 + timedelta(minutes=5))
    assert [(f.node, f.detector, f.component) for f in report.findings] == [("gpu003", "ib-downtime", "mlx5_0/1")]
    assert any("peer comparison" in n or "no samples" in n for n in report.notes)


def test_what_cannot_be_scanned_is_said_not_hidden():
    report = scan(ScanInputs("llm", JOB[:3], {}), T0)
    assert report.findings == []
    notes = "\n".join(report.notes)
    assert "runs on 3 node(s), fewer than the 8" in notes
    assert "no node_infiniband_state_id series" in notes
    assert "no step-time query is configured" in notes
    md = findings_markdown(report, "llm", posted=0)
    assert "No node is expected to fail soon." in md and "Not scanned:" in md


def test_a_finding_is_an_alert_the_receiver_reads_as_an_early_warning():
    hot = {"gpu004": [77, 98, 99, 99, 100, 100, 100, 101, 101, 101]}
    frame = temps(hot)
    now = T0 + timedelta(minutes=5)
    f = scan(ScanInputs("llm", JOB, {"gpu_temperature_max_c": frame}), now, only_temps(frame)).findings[0]
    alert = finding_alert(f, now, alert_minutes=30)
    assert alert["labels"] == {"alertname": "GpuEarlyWarning", "signal": "early-warning", "severity": "warning",
                               "detector": "peer-outlier", "Hostname": "gpu004", "metric": "gpu_temperature_max_c"}
    assert alert["endsAt"] == (now + timedelta(minutes=30)).isoformat()
    # what Alertmanager's webhook then carries, through the receiver's own parser and classifier
    payload = {"version": "4", "receiver": "gpu-remedy", "status": "firing", "groupLabels": {}, "commonLabels": {},
               "alerts": [{"status": "firing", "labels": alert["labels"], "annotations": alert["annotations"],
                           "startsAt": alert["startsAt"], "endsAt": "0001-01-01T00:00:00Z", "fingerprint": "abc"}]}
    signal = parse_alertmanager(payload).signals[0]
    assert signal.kind is SignalKind.EARLY_WARNING and signal.node == "gpu004"
    verdict = classify(signal)
    assert verdict.path.value == "watch" and verdict.explanation.startswith("peer-outlier expects gpu004")
