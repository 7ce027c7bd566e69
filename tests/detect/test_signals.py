"""classify(): one rule per signal kind, thresholds from SignalThresholds."""

from __future__ import annotations

from datetime import UTC, datetime, timezone

import pytest

from remedy.config import RemedySettings
from remedy.detect.signals import Severity, Signal, SignalKind, classify
from remedy.domain.xid import RemediationPath as P
from remedy.settings.signals import SignalThresholds

T = SignalThresholds()


def sig(kind: SignalKind, **kw) -> Signal:
    return Signal(node="gpu-node-17", kind=kind, **kw)


def test_every_kind_has_a_rule() -> None:
    for kind in SignalKind:
        extra = {"xid": 79} if kind is SignalKind.XID else {}
        v = classify(sig(kind, **extra), T)
        assert isinstance(v.path, P) and v.rule and v.explanation


def test_thresholds_are_part_of_the_config_model() -> None:
    s = RemedySettings(signals={"ib_transport_timeout_seconds": 20})
    assert s.signals.ib_single_outage_seconds == 20
    assert SignalThresholds.model_fields["remap_rows_per_bank_limit"].default == 8
    for name, f in SignalThresholds.model_fields.items():
        assert f.description and len(f.description) > 20, name


def test_throttle_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="throttle_replace_seconds must be >= signals.throttle_warn_seconds"):
        SignalThresholds(throttle_warn_seconds=1000, throttle_replace_seconds=10)


def test_xid_goes_through_the_catalog() -> None:
    v = classify(sig(SignalKind.XID, xid=79, gpu=3), T)
    assert (v.path, v.severity, v.rule) == (P.REBOOT, Severity.CRITICAL, "xid-catalog")
    assert "GPU 3" in v.explanation
    assert classify(sig(SignalKind.XID, xid=94), T).path is P.RESTART_APP
    assert classify(sig(SignalKind.XID, xid=31), T).severity is Severity.WARNING


def test_unknown_xid_escalates() -> None:
    v = classify(sig(SignalKind.XID, xid=4242), T)
    assert (v.path, v.rule) == (P.ESCALATE, "xid-unknown")


def test_recurring_79_stops_retrying() -> None:
    assert classify(sig(SignalKind.XID, xid=79), T, recurrences=1).path is P.REBOOT
    v = classify(sig(SignalKind.XID, xid=79), T, recurrences=2)
    assert (v.path, v.rule) == (P.REPLACE, "xid-recurrence")
    assert classify(sig(SignalKind.XID, xid=79), SignalThresholds(xid_recurrence_limit=3), recurrences=2).path is P.REBOOT
    with pytest.raises(ValueError, match="recurrences must be >= 1"):
        classify(sig(SignalKind.XID, xid=79), T, recurrences=0)


def test_xid_154_uses_the_action_in_the_message() -> None:
    raw = "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    assert classify(sig(SignalKind.XID, xid=154, raw=raw), T).path is P.RESET_GPU
    assert classify(sig(SignalKind.XID, xid=154), T).path is P.ESCALATE


def test_remaps() -> None:
    assert classify(sig(SignalKind.ROW_REMAP_FAILURE, value=1), T).path is P.REPLACE
    assert classify(sig(SignalKind.ROW_REMAP_FAILURE, value=0), T).path is P.IGNORE
    assert classify(sig(SignalKind.ROW_REMAP_PENDING, value=1), T).path is P.RESET_GPU
    assert classify(sig(SignalKind.UNCORRECTABLE_REMAP, value=3), T).path is P.WATCH
    assert classify(sig(SignalKind.CORRECTABLE_REMAP, value=254), T).severity is Severity.INFO


@pytest.mark.parametrize("kind", [SignalKind.HW_SLOWDOWN, SignalKind.THERMAL_THROTTLE, SignalKind.POWER_BRAKE])
def test_throttle_watch_then_replace(kind: SignalKind) -> None:
    assert classify(sig(kind, value=30), T).severity is Severity.INFO
    assert (classify(sig(kind, value=120), T).path, classify(sig(kind, value=120), T).severity) == (P.WATCH, Severity.WARNING)
    assert classify(sig(kind), T).path is P.WATCH  # duration unknown: watch, never replace on a single bit
    v = classify(sig(kind, value=T.throttle_replace_seconds), T)
    assert (v.path, v.severity) == (P.REPLACE, Severity.CRITICAL)
    assert classify(sig(kind, value=899.9), T).path is P.WATCH


def test_pcie_below_max_is_a_warning_to_replace() -> None:
    v = classify(sig(SignalKind.PCIE_DEGRADED, gpu=7, labels={"pcie_width": "8", "pcie_max_width": "16"}), T)
    assert (v.path, v.severity) == (P.REPLACE, Severity.WARNING)
    assert "pcie_width=8" in v.explanation


def test_nvlink_rates_follow_dcgm_limits() -> None:
    crc = {"counter": "crc"}
    assert classify(sig(SignalKind.NVLINK_ERROR, value=100.0, labels=crc), T).path is P.RESET_GPU
    assert classify(sig(SignalKind.NVLINK_ERROR, value=99.0, labels=crc), T).path is P.WATCH
    assert classify(sig(SignalKind.NVLINK_ERROR, value=0.0, labels=crc), T).path is P.IGNORE
    assert classify(sig(SignalKind.NVLINK_ERROR, value=1, labels={"counter": "replay"}), T).path is P.RESET_GPU
    assert classify(sig(SignalKind.NVLINK_ERROR, labels=crc), T).rule == "nvlink-errors-rate-unknown"


def test_ib_rules() -> None:
    assert classify(sig(SignalKind.IB_PORT_DOWN, value=9.0), T).path is P.RESTART_APP
    assert classify(sig(SignalKind.IB_PORT_DOWN, value=0.3), T).path is P.WATCH
    assert classify(sig(SignalKind.IB_DOWNTIME, value=7.0), T).path is P.REPLACE
    assert classify(sig(SignalKind.IB_DOWNTIME, value=3.0), T).path is P.WATCH


def test_job_symptoms_isolate() -> None:
    assert classify(sig(SignalKind.NCCL_TIMEOUT), T).path is P.ISOLATE
    assert classify(sig(SignalKind.LOSS_NAN), T).path is P.ISOLATE


def test_not_ready() -> None:
    assert classify(sig(SignalKind.NODE_NOT_READY, value=299), T).path is P.WATCH
    assert classify(sig(SignalKind.NODE_NOT_READY, value=300), T).path is P.REPLACE


def test_unknown_and_resolved() -> None:
    assert classify(sig(SignalKind.UNKNOWN, labels={"alertname": "Foo"}), T).path is P.ESCALATE
    v = classify(sig(SignalKind.ROW_REMAP_FAILURE, value=1, resolved=True), T)
    assert (v.path, v.rule) == (P.IGNORE, "alert-resolved")


def test_signal_validation_is_clear() -> None:
    with pytest.raises(ValueError, match="the XID code is missing"):
        Signal(node="n", kind=SignalKind.XID)
    with pytest.raises(ValueError, match="node must be a non-empty string"):
        Signal(node="", kind=SignalKind.LOSS_NAN)
    with pytest.raises(ValueError, match="unknown signal kind 'bogus'"):
        Signal(node="n", kind="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gpu must be a non-negative integer"):
        Signal(node="n", kind=SignalKind.HW_SLOWDOWN, gpu=-1)
    assert Signal(node="n", kind="xid", xid=13).kind is SignalKind.XID  # type: ignore[arg-type]
    assert Signal(node="n", kind=SignalKind.HW_SLOWDOWN, value=float("nan")).value is None


def test_to_dict_round_trips_through_json() -> None:
    import json

    s = sig(SignalKind.XID, xid=79, gpu=3, at=datetime(2026, 11, 21, tzinfo=UTC))
    d = json.loads(json.dumps(s.to_dict()))
    assert d["kind"] == "xid" and d["at"] == "2026-11-21T00:00:00+00:00"
