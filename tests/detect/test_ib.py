"""InfiniBand: cumulative downtime, not flaps (seed 001: NCCL_IB_TIMEOUT's effective default ~7 s), through the
path the receiver takes: `ib_port_of` reads a port alert, `fold_port_alert` keeps its outage in a ledger (SQLite in
tmp_path) and judges the port's window. The in-memory tracker these tests once drove is gone: nothing but tests
used it, and the ledger's fold is what runs (tests/receiver/test_ib_ledger.py: across receivers and restarts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from remedy.detect.ib import IbPortOutage, ib_port_of
from remedy.detect.signals import Signal, SignalKind, classify
from remedy.domain.xid import RemediationPath as P
from remedy.ledger import Ledger
from remedy.ledger.ib_ports import fold_port_alert
from remedy.settings.signals import SignalThresholds

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
NODE = "gpu-node-17"


@pytest.fixture
def led(tmp_path):
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        ledger.migrate()
        yield ledger


def alert(start: datetime, end: datetime | None = None, *, port: str = "1", node: str = NODE) -> Signal:
    """An InfinibandPortDown alert as parsed: firing (no end) or resolved (down from start to end)."""
    return Signal(node=node, kind=SignalKind.IB_PORT_DOWN, at=start, labels={"device": "mlx5_0", "port": port},
                  resolved=end is not None, ended_at=end, source="alertmanager")


def flaps(led, n: int, length: float, every: float, t: SignalThresholds | None = None, *, offset: float = 0.0,
          port: str = "1") -> list:
    """n outages of `length` s every `every` s, each folded as its firing then its resolved alert; the signals
    the folds tripped."""
    t = t or SignalThresholds()
    out = []
    for i in range(n):
        start = T0 + timedelta(seconds=offset + i * every)
        for sig in (alert(start, port=port), alert(start, start + timedelta(seconds=length), port=port)):
            fold = fold_port_alert(led, sig, t, now=sig.ended_at or sig.at)
            out += [fold.tripped] if fold.tripped else []
    return out


def test_default_budget_is_seven_seconds() -> None:
    t = SignalThresholds()
    assert t.ib_transport_timeout_seconds == 7.0
    assert t.ib_single_outage_seconds == 7.0 and t.ib_cumulative_seconds == 7.0


def test_one_nine_second_outage_is_the_single_outage_rule_not_the_cumulative_one(led) -> None:
    fold = fold_port_alert(led, alert(T0, T0 + timedelta(seconds=9)), SignalThresholds(), now=T0)
    assert (fold.port, fold.downtime_seconds, fold.outages, fold.tripped) == ("mlx5_0:1", 9.0, 1, None)
    lasted = Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, value=fold.downtime_seconds, labels={"port": fold.port})
    assert classify(lasted).path is P.RESTART_APP  # the run's connections are gone: restart from checkpoint


def test_an_outage_still_going_on_counts_up_to_now(led) -> None:
    fold = fold_port_alert(led, alert(T0), SignalThresholds(), now=T0 + timedelta(seconds=8))
    assert fold.downtime_seconds == pytest.approx(8.0) and fold.outages == 1 and fold.tripped is None


def test_ten_short_flaps_do_not_trip(led) -> None:
    assert flaps(led, 10, 0.3, 60) == []
    last = fold_port_alert(led, alert(T0 + timedelta(seconds=540), T0 + timedelta(seconds=540.3)),
                           SignalThresholds(), now=T0)  # the last one sent again: changes nothing
    assert last.outages == 10 and last.downtime_seconds == pytest.approx(3.0) and last.tripped is None


def test_many_short_flaps_that_add_up_trip_once(led) -> None:
    out = flaps(led, 30, 0.3, 60)  # 9 s within 30 minutes
    assert [s.kind for s in out] == [SignalKind.IB_DOWNTIME]
    assert out[0].value == pytest.approx(7.2)  # trips on the 24th flap
    assert out[0].labels["outages"] == "24" and out[0].labels["port"] == "mlx5_0:1"
    assert classify(out[0]).path is P.REPLACE


def test_flaps_spread_beyond_the_window_do_not_add_up(led) -> None:
    assert flaps(led, 30, 0.3, 600) == []  # one every 10 minutes: at most 6 in any hour = 1.8 s


def test_cumulative_rule_re_arms_after_the_window_drains(led) -> None:
    t = SignalThresholds(ib_window_seconds=100)
    assert [s.kind for s in flaps(led, 10, 1.0, 5, t)] == [SignalKind.IB_DOWNTIME]  # 10 s in 50 s
    assert [s.kind for s in flaps(led, 10, 1.0, 5, t, offset=1000)] == [SignalKind.IB_DOWNTIME]


def test_ports_are_independent_and_a_larger_timeout_is_honoured(led) -> None:
    t = SignalThresholds(ib_transport_timeout_seconds=20)
    assert flaps(led, 3, 3.0, 10, t, port="1") == []  # 9 s < 20 s
    assert flaps(led, 3, 3.0, 10, t, port="2") == []  # another port's 9 s do not add to the first's
    assert [s.labels["port"] for s in flaps(led, 5, 3.0, 10, t, offset=40, port="2")] == ["mlx5_0:2"]


def test_a_port_alert_is_read_once_with_clear_errors() -> None:
    assert ib_port_of(alert(T0, T0 + timedelta(seconds=3))) == IbPortOutage(NODE, "mlx5_0:1", T0,
                                                                            T0 + timedelta(seconds=3))
    assert ib_port_of(alert(T0)).ended_at is None
    only_port = Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, at=T0, labels={"port": "2"})
    assert ib_port_of(only_port).port == "2"
    bad = {
        "come from ib-port-down signals": Signal(node=NODE, kind=SignalKind.LOSS_NAN, at=T0),
        "has no time": Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, labels={"port": "1"}),
        "no port/device label": Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, at=T0),
        "no end time": Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, at=T0, labels={"port": "1"}, resolved=True),
        "ends .* before it starts": alert(T0, T0 - timedelta(seconds=1)),
        "has no timezone": alert(datetime(2026, 1, 1)),
    }
    for message, signal in bad.items():
        with pytest.raises(ValueError, match=message):
            ib_port_of(signal)


def test_nothing_is_written_for_an_alert_that_is_no_port_outage(led) -> None:
    from remedy.ledger.ib_ports import port_outages

    with pytest.raises(ValueError, match="no port/device label"):
        fold_port_alert(led, Signal(node=NODE, kind=SignalKind.IB_PORT_DOWN, at=T0), SignalThresholds(), now=T0)
    assert port_outages(led, NODE, "mlx5_0:1") == []


def test_running_total_matches_a_brute_force_recount(led) -> None:
    import random

    rng = random.Random(7)
    t = SignalThresholds(ib_window_seconds=300)
    outages: list[tuple[float, float]] = []
    state = {"armed": True, "trips": 0}

    def expect(at: float, fold) -> None:
        lo = at - t.ib_window_seconds
        inside = [(max(s, lo), min(e, at)) for s, e in outages if e > lo and s <= at]
        total = sum(e - s for s, e in inside)
        assert fold.downtime_seconds == pytest.approx(total, abs=1e-5)
        trip = state["armed"] and total >= t.ib_cumulative_seconds and len(inside) >= 2
        assert (fold.tripped is not None) == trip, at
        if trip:
            assert fold.tripped.value == pytest.approx(total, abs=1e-5)
            state["armed"], state["trips"] = False, state["trips"] + 1
        elif total < t.ib_cumulative_seconds:
            state["armed"] = True

    now = 0.0
    for _ in range(120):
        now += rng.uniform(1, 60)  # ~10 outages a window, around the budget: it trips, re-arms, trips
        length = rng.choice([0.2, 0.5, 1.0, 2.0])
        start, end = T0 + timedelta(seconds=now), T0 + timedelta(seconds=now + length)
        outages.append((now, now + length))
        expect(now + length, fold_port_alert(led, alert(start, end), t, now=end))
        now += length
    assert state["trips"] >= 2  # the sequence exercises trip, re-arm, trip again


def test_folds_alertmanager_port_down_alerts(led) -> None:
    from remedy.detect.alertmanager import parse_alertmanager

    def payload(status: str, start: str, end: str) -> dict:
        a = {"status": status, "labels": {"alertname": "InfinibandPortDown", "instance": "gpu-node-18:9100",
                                          "device": "mlx5_0", "port": "1"},
             "annotations": {}, "startsAt": start, "endsAt": end, "fingerprint": "f1"}
        return {"version": "4", "receiver": "gpu-remedy", "status": status, "alerts": [a]}

    (firing,) = parse_alertmanager(payload("firing", "2026-11-21T10:00:00Z", "0001-01-01T00:00:00Z")).signals
    assert firing.ended_at is None
    assert fold_port_alert(led, firing, SignalThresholds(), now=T0 + timedelta(seconds=2)).downtime_seconds == 2.0
    (resolved,) = parse_alertmanager(payload("resolved", "2026-11-21T10:00:00Z", "2026-11-21T10:00:09Z")).signals
    fold = fold_port_alert(led, resolved, SignalThresholds(), now=T0 + timedelta(seconds=30))
    assert (fold.node, fold.port, fold.downtime_seconds, fold.outages) == ("gpu-node-18", "mlx5_0:1", 9.0, 1)
