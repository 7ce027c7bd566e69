"""Early-warning detectors on hand-built series (numbers checked by hand) and on seeded traces with planted faults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from remedy.settings.lemon import EarlyWarningSettings
from remedy.settings.signals import SignalThresholds
from remedy.warn import (
    SeriesError,
    detect_ib_downtime,
    detect_peer_outliers,
    detect_remap_acceleration,
    detect_stragglers,
)
from remedy.warn.simulate import ib_trace, peer_trace, remap_trace, step_trace

T0 = datetime(2025, 10, 20, tzinfo=UTC)
NODES = [f"gpu{i:03d}" for i in range(9)]


def peer_frame(outlier_values: list[float], metric: str = "node_intr_total") -> pd.DataFrame:
    """9 nodes; eight sit at 98..102, gpu008 takes the given values; one row per 30 s sample."""
    base = [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 100.0]
    rows = []
    for i, v in enumerate(outlier_values):
        t = T0 + timedelta(seconds=30 * i)
        for node, value in zip(NODES, base + [v]):
            rows.append({"time": t, "job": "job-1", "node": node, "metric": metric, "value": value})
    return pd.DataFrame(rows)


def test_peer_outlier_score_by_hand_and_persistence() -> None:
    # Values at each time: 98 99 100 100 100 100 101 102 150 → median 100; |dev| 2 1 0 0 0 0 1 2 50 → MAD 1.
    # MAD floor = 0.05 × |median| = 5 > 1, so z = 0.6745 × (150 − 100) / 5 = 6.745.
    s = EarlyWarningSettings(peer_min_nodes=8)
    (f,) = detect_peer_outliers(peer_frame([100, 150, 100, 150, 150, 100]), s)
    assert f.node == "gpu008" and f.score == pytest.approx(6.745)
    assert f.value == 150 and f.baseline == 100
    # k = 3 of n = 5: outliers at samples 1, 3, 4 → raised at sample 4, first seen at sample 1, window from sample 0.
    assert f.raised_at == T0 + timedelta(seconds=120)
    assert f.first_seen == T0 + timedelta(seconds=30)
    assert f.window_start == T0
    assert "above 8 peers" in f.detail and f.component == "job-1"
    # Below the peers counts too (gpu071: interrupts fell to ~1/3 of the peers').
    (low,) = detect_peer_outliers(peer_frame([30, 30, 30]), s)
    assert low.score == pytest.approx(0.6745 * (30 - 100) / 5) and "below" in low.detail


def test_one_spike_is_not_an_alarm() -> None:
    s = EarlyWarningSettings(peer_min_nodes=8)
    assert detect_peer_outliers(peer_frame([100, 500, 100, 100, 100, 500, 100, 100, 100, 500]), s) == []
    # Two spikes in five samples is still under k = 3.
    assert detect_peer_outliers(peer_frame([100, 500, 500, 100, 100, 100, 100]), s) == []
    # And too few peers means no comparison at all.
    assert detect_peer_outliers(peer_frame([150] * 6), EarlyWarningSettings(peer_min_nodes=10)) == []


def lead_times(trace, findings) -> list[float]:
    """Minutes between each planted fault's warning and its failure; fails the test if any fault is missed."""
    leads = []
    for fault in trace.faults:
        hits = [f for f in findings if f.node == fault.node and f.metric == fault.metric]
        assert hits, f"planted fault on {fault.node} {fault.metric} not found"
        assert hits[0].raised_at >= fault.onset, "warned before the precursor even began"
        leads.append((fault.failure - hits[0].raised_at).total_seconds() / 60)
    return leads


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_peer_detector_finds_planted_precursors_and_nothing_else(seed: int) -> None:
    trace = peer_trace(seed, nodes=30, hours=3, faults=2)
    findings = detect_peer_outliers(trace.frame)
    leads = lead_times(trace, findings)
    print(f"peer seed {seed}: lead times {[round(x, 1) for x in leads]} min")
    assert all(x > 0 for x in leads)
    assert {f.node for f in findings} == {f.node for f in trace.faults}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_fleets_raise_nothing(seed: int) -> None:
    assert detect_peer_outliers(peer_trace(100 + seed, nodes=30, hours=3, faults=0).frame) == []
    assert detect_stragglers(step_trace(100 + seed, faults=0).frame) == []
    assert detect_remap_acceleration(remap_trace(100 + seed, nodes=8, faults=0).frame) == []
    ib = ib_trace(100 + seed, faults=0)
    assert detect_ib_downtime(ib.frame, ib.end) == []


def test_stragglers_by_hand_and_planted() -> None:
    rows = []
    for i in range(6):
        for n, node in enumerate(NODES[:5]):
            slow = node == "gpu004" and i >= 2
            rows.append({"time": T0 + timedelta(minutes=i), "job": "j", "node": node,
                         "step_time_seconds": 1.3 if slow else 1.0 + 0.01 * n})
    # Median of 1.00 1.01 1.02 1.03 1.30 is 1.02 → ratio 1.3 / 1.02 = 1.2745 ≥ 1.15 from minute 2; k = 3 → minute 4.
    (f,) = detect_stragglers(pd.DataFrame(rows))
    assert f.node == "gpu004" and f.score == pytest.approx(1.3 / 1.02)
    assert f.raised_at == T0 + timedelta(minutes=4) and f.first_seen == T0 + timedelta(minutes=2)
    assert "27% slower" in f.detail
    for seed in (0, 1):
        trace = step_trace(seed)
        findings = detect_stragglers(trace.frame)
        leads = lead_times(trace, findings)
        print(f"straggler seed {seed}: lead times {[round(x, 1) for x in leads]} min")
        assert all(x > 0 for x in leads) and {f.node for f in findings} == {f.node for f in trace.faults}


def remap_frame(daily: list[int], node: str = "gpu124", gpu: int = 2) -> pd.DataFrame:
    return pd.DataFrame({
        "time": [T0 + timedelta(days=d) for d in range(len(daily))],
        "node": node, "gpu": gpu, "correctable_remaps": np.cumsum(daily).astype(float),
    })


def test_remap_acceleration_gpu124_shape() -> None:
    # 1 remap/day for 40 days, then 30/day (> 200 in a week, as gpu124 did from 28 October).
    (f,) = detect_remap_acceleration(remap_frame([1] * 40 + [30] * 10))
    # Day 41: recent 7 d = 1·5 + 30·2 = 65 ≥ 40; baseline = 7/week; ratio 65/7 = 9.3 ≥ 4. Day 40 had 36 < 40.
    assert f.raised_at == T0 + timedelta(days=41)
    assert f.value == 65 and f.baseline == pytest.approx(7.0) and f.score == pytest.approx(65 / 7)
    assert f.first_seen == T0 + timedelta(days=40) and f.component == "GPU 2"
    # A GPU that has always been busy at 8/day (56/week) is not accelerating.
    assert detect_remap_acceleration(remap_frame([8] * 60)) == []
    # A counter reset (GPU swapped, counter back to 0) is not a burst, and not a negative rate either.
    swapped = remap_frame([1] * 30 + [0] * 10)
    swapped.loc[30:, "correctable_remaps"] = np.arange(10, dtype=float)
    assert detect_remap_acceleration(swapped) == []
    # Under a week of history before the recent window: no baseline yet, no verdict.
    assert detect_remap_acceleration(remap_frame([0] * 5 + [40] * 8)) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_remap_detector_warns_days_ahead_on_planted_gpus(seed: int) -> None:
    trace = remap_trace(seed, nodes=8)
    findings = detect_remap_acceleration(trace.frame)
    leads = lead_times(trace, findings)
    print(f"remap seed {seed}: lead times {[round(x / 1440, 1) for x in leads]} days")
    assert all(x > 24 * 60 for x in leads)  # more than a day of warning
    assert {(f.node, f.component) for f in findings} == {(f.node, f.component) for f in trace.faults}


def port_frame(spans: list[tuple[float, float]], port: str = "mlx5_0/1") -> pd.DataFrame:
    rows = []
    for down, dur in spans:
        rows.append({"time": T0 + timedelta(seconds=down), "node": "gpu007", "port": port, "state": "down"})
        rows.append({"time": T0 + timedelta(seconds=down + dur), "node": "gpu007", "port": port, "state": "up"})
    return pd.DataFrame(rows)


def test_ib_cumulative_downtime_by_hand() -> None:
    end = T0 + timedelta(hours=12)
    # 1.0 + 1.5 s down, then a third outage: 2.5 s already in the window, warn at 3.5 s (= 0.5 × 7 s) → 1.0 s into it.
    (f,) = detect_ib_downtime(port_frame([(0, 1.0), (600, 1.5), (1200, 2.0)]), end)
    assert f.raised_at == T0 + timedelta(seconds=1201)
    assert f.value == pytest.approx(4.5) and f.baseline == 7.0 and f.score == pytest.approx(4.5 / 7)
    assert f.first_seen == T0 and f.component == "mlx5_0/1"
    # The same three outages 1.5 h apart never share the 1 h window (signals.ib_window_seconds), so never add up.
    apart = port_frame([(0, 1.0), (1.5 * 3600, 1.5), (3 * 3600, 2.0)])
    assert detect_ib_downtime(apart, end) == []
    # 40 min apart, the last two do: 1.5 + 2.0 = 3.5 s reaches the threshold at the very end of the third outage.
    (edge,) = detect_ib_downtime(port_frame([(0, 1.0), (2400, 1.5), (4801, 2.0)]), end)
    assert edge.raised_at == T0 + timedelta(seconds=4803) and "2 outage(s)" in edge.detail
    # A longer window (from SignalThresholds, the one place it lives) brings the 1.5 h-apart outages together.
    (wide,) = detect_ib_downtime(apart, end, signals=SignalThresholds(ib_window_seconds=4 * 3600))
    assert wide.raised_at == T0 + timedelta(seconds=3 * 3600 + 1)
    # One long outage is enough (seed 001: a single flap crashed a 7-hour run); past 7 s it says so.
    (long,) = detect_ib_downtime(port_frame([(100, 8.0)]), end)
    assert long.raised_at == T0 + timedelta(seconds=103.5) and "past the timeout" in long.detail
    # A port still down at `now` counts until now.
    open_ = pd.DataFrame([{"time": T0, "node": "gpu007", "port": "mlx5_1/1", "state": "down"}])
    (f_open,) = detect_ib_downtime(open_, T0 + timedelta(seconds=5))
    assert f_open.value == pytest.approx(5.0)
    assert detect_ib_downtime(open_, T0 + timedelta(seconds=3)) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_ib_detector_warns_before_the_fatal_outage(seed: int) -> None:
    trace = ib_trace(seed)
    findings = detect_ib_downtime(trace.frame, trace.end)
    leads = lead_times(trace, findings)
    print(f"ib seed {seed}: lead times {[round(x, 1) for x in leads]} min")
    assert all(x > 0 for x in leads)
    assert {(f.node, f.component) for f in findings} == {(f.node, f.component) for f in trace.faults}


def test_bad_input_names_the_table_and_column() -> None:
    good = peer_frame([100, 100, 100])
    with pytest.raises(SeriesError, match="peer samples: missing column\\(s\\) value"):
        detect_peer_outliers(good.drop(columns="value"))
    with pytest.raises(SeriesError, match="peer samples: .*time.*timezone-aware"):
        detect_peer_outliers(good.assign(time=good["time"].dt.tz_localize(None)))
    with pytest.raises(SeriesError, match="peer samples: .*value.*finite"):
        detect_peer_outliers(good.assign(value=np.inf))
    with pytest.raises(SeriesError, match="expected a pandas DataFrame"):
        detect_peer_outliers([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(SeriesError, match="step times: .*step_time_seconds.*positive"):
        detect_stragglers(pd.DataFrame({"time": [T0], "job": ["j"], "node": ["a"], "step_time_seconds": [-1.0]}))
    with pytest.raises(SeriesError, match="remap counters: .*correctable_remaps.*negative"):
        detect_remap_acceleration(remap_frame([1, 1]).assign(correctable_remaps=-1.0))
    with pytest.raises(SeriesError, match="port events: .*state"):
        detect_ib_downtime(port_frame([(0, 1)]).assign(state="flapping"), T0 + timedelta(hours=1))
    with pytest.raises(SeriesError, match="after now"):
        detect_ib_downtime(port_frame([(0, 1)]), T0)
    with pytest.raises(SeriesError, match="peer samples: .*duplicate|peer samples: .*unique"):
        detect_peer_outliers(pd.concat([good, good.iloc[:1]]))
    # Empty (but well-formed) input is simply nothing to report.
    assert detect_peer_outliers(good.iloc[:0]) == []
