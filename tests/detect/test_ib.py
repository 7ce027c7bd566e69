"""IbDowntimeTracker: cumulative downtime, not flaps (seed 001: NCCL_IB_TIMEOUT's effective default ~7 s)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.detect.ib import IbDowntimeTracker
from remedy.detect.signals import Signal, SignalKind, classify
from remedy.domain.xid import RemediationPath as P
from remedy.settings.signals import SignalThresholds

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def flaps(tracker: IbDowntimeTracker, n: int, length: float, every: float, port: str = "mlx5_0:1") -> list:
    out = []
    for i in range(n):
        start = T0 + timedelta(seconds=i * every)
        out += tracker.observe("gpu-node-17", port, False, start)
        out += tracker.observe("gpu-node-17", port, True, start + timedelta(seconds=length))
    return out


def test_default_budget_is_seven_seconds() -> None:
    t = SignalThresholds()
    assert t.ib_transport_timeout_seconds == 7.0
    assert t.ib_single_outage_seconds == 7.0 and t.ib_cumulative_seconds == 7.0


def test_one_nine_second_outage_trips() -> None:
    tr = IbDowntimeTracker()
    assert tr.observe("gpu-node-17", "mlx5_0:1", False, T0) == []
    out = tr.observe("gpu-node-17", "mlx5_0:1", True, T0 + timedelta(seconds=9))
    assert [s.kind for s in out] == [SignalKind.IB_PORT_DOWN]
    assert out[0].value == pytest.approx(9.0)
    assert out[0].labels["port"] == "mlx5_0:1"
    assert classify(out[0]).path is P.RESTART_APP  # the run's connections are gone: restart from checkpoint


def test_ongoing_outage_trips_on_check_without_new_observations() -> None:
    tr = IbDowntimeTracker()
    tr.observe("n", "p", False, T0)
    assert tr.check(T0 + timedelta(seconds=5)) == []
    out = tr.check(T0 + timedelta(seconds=8))
    assert [s.kind for s in out] == [SignalKind.IB_PORT_DOWN]
    assert tr.check(T0 + timedelta(seconds=12)) == []  # one outage trips once
    assert tr.observe("n", "p", True, T0 + timedelta(seconds=20)) == []


def test_ten_short_flaps_do_not_trip() -> None:
    tr = IbDowntimeTracker()
    assert flaps(tr, 10, 0.3, 60) == []
    st = tr.status("gpu-node-17", "mlx5_0:1", T0 + timedelta(seconds=600))
    assert st.outages == 10 and st.downtime_seconds == pytest.approx(3.0)
    assert st.longest_outage_seconds == pytest.approx(0.3)


def test_many_short_flaps_that_add_up_trip_once() -> None:
    tr = IbDowntimeTracker()
    out = flaps(tr, 30, 0.3, 60)  # 9 s within 30 minutes
    assert [s.kind for s in out] == [SignalKind.IB_DOWNTIME]
    assert out[0].value == pytest.approx(7.2)  # trips on the 24th flap
    assert out[0].labels["outages"] == "24"
    assert classify(out[0]).path is P.REPLACE


def test_flaps_spread_beyond_the_window_do_not_add_up() -> None:
    tr = IbDowntimeTracker()
    assert flaps(tr, 30, 0.3, 600) == []  # one every 10 minutes: at most 6 in any hour = 1.8 s


def test_cumulative_rule_re_arms_after_the_window_drains() -> None:
    tr = IbDowntimeTracker(SignalThresholds(ib_window_seconds=100))
    first = flaps(tr, 10, 1.0, 5)  # 10 s in 50 s
    assert [s.kind for s in first] == [SignalKind.IB_DOWNTIME]
    later = []
    for i in range(10):
        start = T0 + timedelta(seconds=1000 + i * 5)
        later += tr.observe("gpu-node-17", "mlx5_0:1", False, start)
        later += tr.observe("gpu-node-17", "mlx5_0:1", True, start + timedelta(seconds=1))
    assert [s.kind for s in later] == [SignalKind.IB_DOWNTIME]


def test_ports_are_independent_and_a_larger_timeout_is_honoured() -> None:
    tr = IbDowntimeTracker(SignalThresholds(ib_transport_timeout_seconds=20))
    tr.observe("n", "a", False, T0)
    tr.observe("n", "b", False, T0)
    assert tr.observe("n", "a", True, T0 + timedelta(seconds=9)) == []
    assert [s.labels["port"] for s in tr.observe("n", "b", True, T0 + timedelta(seconds=21))] == ["b"]


def test_bad_observations_are_clear_errors() -> None:
    tr = IbDowntimeTracker()
    tr.observe("n", "p", False, T0)
    with pytest.raises(ValueError, match="must be in time order"):
        tr.observe("n", "p", True, T0 - timedelta(seconds=1))
    with pytest.raises(ValueError, match="has no timezone"):
        tr.observe("n", "p", True, datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="needs a node and a port"):
        tr.observe("", "p", True, T0)


def test_running_total_matches_a_brute_force_recount() -> None:
    import random

    rng = random.Random(7)
    t = SignalThresholds(ib_window_seconds=300)
    tr = IbDowntimeTracker(t)
    outages: list[tuple[float, float]] = []
    state = {"armed": True, "trips": 0}

    def expect(at: float, got: list, ongoing: float | None) -> None:
        lo = at - t.ib_window_seconds
        spans = outages + ([(ongoing, at)] if ongoing is not None else [])
        inside = [(max(s, lo), e) for s, e in spans if e > lo or (ongoing is not None and s == ongoing)]
        total = sum(e - s for s, e in inside)
        assert tr.downtime("n", "p", at) == pytest.approx(total)
        trip = state["armed"] and total >= t.ib_cumulative_seconds and len(inside) >= 2
        assert [s.kind for s in got if s.kind is SignalKind.IB_DOWNTIME] == ([SignalKind.IB_DOWNTIME] if trip else []), at
        if trip:
            assert got[-1].value == pytest.approx(total)
            state["armed"], state["trips"] = False, state["trips"] + 1
        elif total < t.ib_cumulative_seconds:
            state["armed"] = True

    now = 0.0
    for _ in range(400):
        now += rng.uniform(1, 40)
        length = rng.choice([0.2, 0.5, 1.0, 2.0])
        expect(now, tr.observe("n", "p", False, now), ongoing=now)
        outages.append((now, now + length))
        now += length
        expect(now, tr.observe("n", "p", True, now), ongoing=None)
    assert state["trips"] >= 3  # the sequence exercises trip, re-arm, trip again


def test_folds_alertmanager_port_down_alerts() -> None:
    from remedy.detect.alertmanager import parse_alertmanager

    def alert(status: str, start: str, end: str) -> dict:
        return {"status": status, "labels": {"alertname": "InfinibandPortDown", "instance": "gpu-node-18:9100",
                                             "device": "mlx5_0", "port": "1"},
                "annotations": {}, "startsAt": start, "endsAt": end, "fingerprint": "f1"}

    def payload(*alerts: dict) -> dict:
        return {"version": "4", "receiver": "gpu-remedy", "status": alerts[0]["status"], "alerts": list(alerts)}

    tr = IbDowntimeTracker()
    (firing,) = parse_alertmanager(payload(alert("firing", "2026-11-21T10:00:00Z", "0001-01-01T00:00:00Z"))).signals
    assert firing.ended_at is None and tr.observe_signal(firing) == []
    (resolved,) = parse_alertmanager(payload(alert("resolved", "2026-11-21T10:00:00Z", "2026-11-21T10:00:09Z"))).signals
    out = tr.observe_signal(resolved)
    assert [(s.kind, s.node, s.labels["port"], s.value) for s in out] == [
        (SignalKind.IB_PORT_DOWN, "gpu-node-18", "mlx5_0:1", 9.0)]
    # a resolved alert whose firing we never saw still counts its whole outage
    tr2 = IbDowntimeTracker()
    assert [s.value for s in tr2.observe_signal(resolved)] == [9.0]
    with pytest.raises(ValueError, match="folds ib-port-down signals"):
        tr.observe_signal(Signal(node="n", kind=SignalKind.LOSS_NAN, at=T0))
