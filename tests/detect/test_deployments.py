"""Shipped Prometheus rules, dcgm-exporter counters and Alertmanager config: valid, consistent with the code."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from remedy.detect.alertmanager import ALERTNAME_KINDS
from remedy.detect.dcgm import NVLINK_METRICS, REMAP_METRICS, THROTTLE_METRICS, XID_METRIC
from remedy.detect.signals import SignalKind
from remedy.settings.signals import SignalThresholds

ROOT = Path(__file__).resolve().parents[2] / "deployments"
RULES = ROOT / "prometheus" / "rules.yml"
AM = ROOT / "alertmanager" / "alertmanager.yml"
COUNTERS = ROOT / "dcgm-exporter" / "counters.csv"
T = SignalThresholds()


def tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    msg = f"{name} not found (Debian package prometheus / prometheus-alertmanager; scripts/install.sh --test)"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m, duration
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def test_promtool_check_rules() -> None:
    r = subprocess.run([tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


def test_promtool_rule_unit_tests() -> None:
    r = subprocess.run([tool("promtool"), "test", "rules", str(ROOT / "prometheus" / "rules_test.yml"),
                        str(ROOT / "prometheus" / "rules_test_trends.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_amtool_check_config() -> None:
    r = subprocess.run([tool("amtool"), "check-config", str(AM)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_rule_maps_to_its_signal_kind() -> None:
    for r in rules():
        name = r["alert"]
        assert name in ALERTNAME_KINDS, f"{name}: not in ALERTNAME_KINDS"
        assert SignalKind(r["labels"]["signal"]) is ALERTNAME_KINDS[name], name
    shipped = {ALERTNAME_KINDS[r["alert"]] for r in rules()}
    # Kinds with no exporter metric arrive from logs; everything else has a rule.
    assert shipped == set(SignalKind) - {SignalKind.UNKNOWN, SignalKind.SXID, SignalKind.NCCL_TIMEOUT, SignalKind.LOSS_NAN}
    assert by_alert()["GpuEarlyWarning"]["labels"]["detector"]  # which detector warned: in the triage text


def test_rule_durations_match_the_thresholds() -> None:
    expected = {
        ("hw-slowdown", "warning"): T.throttle_warn_seconds, ("hw-slowdown", "critical"): T.throttle_replace_seconds,
        ("thermal-throttle", "warning"): T.throttle_warn_seconds, ("thermal-throttle", "critical"): T.throttle_replace_seconds,
        ("power-brake", "warning"): T.throttle_warn_seconds, ("power-brake", "critical"): T.throttle_replace_seconds,
        ("pcie-degraded", "warning"): T.pcie_degraded_seconds,
        ("node-not-ready", "critical"): T.node_not_ready_seconds,
    }
    seen = set()
    for r in rules():
        key = (r["labels"]["signal"], r["labels"]["severity"])
        if key in expected:
            seen.add(key)
            assert seconds(r["for"]) == expected[key], key
            assert float(r["annotations"]["value"]) == expected[key], key  # the value classify() compares
    assert seen == set(expected)
    by_name = {r["alert"]: r for r in rules()}
    assert f">= {T.nvlink_crc_errors_per_second:g}" in by_name["GpuNvlinkCrcErrors"]["expr"]
    assert f">= {T.ib_cumulative_seconds:g}" in by_name["InfinibandCumulativeDowntime"]["expr"]
    assert f"[{int(T.ib_window_seconds // 3600)}h:" in by_name["InfinibandCumulativeDowntime"]["expr"]
    from remedy.settings.lemon import EarlyWarningSettings

    w, expr = EarlyWarningSettings(), " ".join(by_name["GpuEarlyWarning"]["expr"].split())
    weeks = w.remap_baseline_days / w.remap_recent_days
    assert f"[{w.remap_recent_days:g}d]) >= {w.remap_min_increase}" in expr  # the detector's own thresholds
    assert f">= {w.remap_acceleration_ratio:g} * clamp_min(" in expr and f"offset {w.remap_recent_days:g}d" in expr
    assert f"[{w.remap_baseline_days:g}d] offset {w.remap_recent_days:g}d) / {weeks:g}, {w.remap_baseline_floor_per_week:g})" in expr


def by_alert() -> dict:
    return {r["alert"]: r for r in rules()}


def test_rules_carry_the_labels_the_receiver_maps() -> None:
    for r in rules():
        text = r["expr"]
        if "DCGM_FI_" in text:
            assert "Hostname" in r["annotations"]["summary"], r["alert"]  # dcgm-exporter series carry Hostname/gpu
        if r["alert"] == "GpuXidError":
            assert r["labels"]["xid"] == "{{ $value }}"


def test_counters_csv_layout_and_coverage() -> None:
    lines = [ln for ln in COUNTERS.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    fields = {}
    for row in csv.reader(lines, skipinitialspace=True):
        assert len(row) == 3, row
        name, kind, help_text = row
        assert re.fullmatch(r"DCGM_FI_[A-Z0-9_]+", name), name
        assert kind in {"gauge", "counter", "label"}, row
        assert help_text.strip(), row
        fields[name] = kind
    assert "# DCGM FIELD, Prometheus metric type, help message" in COUNTERS.read_text()
    used_by_rules = set(re.findall(r"DCGM_FI_[A-Z0-9_]+", RULES.read_text()))
    used_by_code = {XID_METRIC, *REMAP_METRICS, THROTTLE_METRICS[0], *NVLINK_METRICS,
                    "DCGM_FI_DEV_PCIE_LINK_WIDTH", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
                    "DCGM_FI_DEV_PCIE_LINK_GEN", "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "DCGM_FI_DEV_GPU_UTIL"}
    assert used_by_rules <= set(fields), used_by_rules - set(fields)
    assert used_by_code <= set(fields), used_by_code - set(fields)


def test_alertmanager_routes_everything_to_the_receiver() -> None:
    cfg = yaml.safe_load(AM.read_text())
    route = cfg["route"]
    assert route["group_by"] == ["Hostname", "gpu", "alertname"]
    assert seconds(route["group_wait"]) <= 10
    (recv,) = cfg["receivers"]
    assert recv["name"] == route["receiver"]
    (hook,) = recv["webhook_configs"]
    assert hook["url"] == "http://gpu-remedy-receiver:8686/v1/alerts/alertmanager"
    assert hook["send_resolved"] is True
    assert hook["http_config"]["authorization"]["type"] == "Bearer"
    assert hook["http_config"]["authorization"].get("credentials_file") or hook["http_config"]["authorization"].get("credentials")
