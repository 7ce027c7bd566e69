import pandas as pd
import pytest

from remedy.audit.phases import IoSeriesError, classify_phases, phase_spans, save_profile
from remedy.settings.audit import NfsAuditSettings

GB = 1e9


def _series(rows):
    t0 = pd.Timestamp("2025-10-25T03:00:00Z")
    return pd.DataFrame(
        {
            "timestamp": [t0 + pd.Timedelta(seconds=30 * i) for i in range(len(rows))],
            "nfs_write_bytes_per_s": [w * GB for w, _, _ in rows],
            "nfs_read_bytes_per_s": [r * GB for _, r, _ in rows],
            "gpu_util_pct": [g for _, _, g in rows],
        }
    )


def test_seed_definitions_and_priority():
    rows = [
        (0, 230, 5),  # load: GPU idle, read 230 GB/s (seed: session start)
        (0, 3, 40),  # load
        (0, 1.9, 10),  # read below 2 GB/s → training
        (0, 50, 60),  # GPU busy → training even with heavy read
        (43, 0, 99),  # save: write 43 GB/s
        (21, 5, 10),  # save wins over load
        (19.9, 0, 99),  # just below 20 GB/s → training
    ]
    df = classify_phases(_series(rows))
    assert df["phase"].tolist() == ["load", "load", "training", "training", "save", "save", "training"]
    spans = phase_spans(df)
    assert [(s.phase, s.samples) for s in spans] == [("load", 2), ("training", 2), ("save", 2), ("training", 1)]


def test_save_profile_gives_delta_and_interval():
    train = [(0.1, 0, 99)] * 8
    rows = train + [(40, 0, 90)] * 2 + train + [(35, 0, 90)] + train + [(30, 0, 90)] * 2 + train
    prof = save_profile(classify_phases(_series(rows)))
    assert prof.saves == 3 and prof.mean_samples == pytest.approx(5 / 3)
    assert prof.delta_s == pytest.approx(20.0)  # (N̄ − 1) × 30 s
    assert prof.interval_s == pytest.approx(30 * 9.5)  # starts at samples 8, 18, 27 → gaps 10 and 9 samples


def test_thresholds_come_from_settings():
    df = classify_phases(_series([(15, 0, 99)]), NfsAuditSettings(save_write_bytes_per_s=10e9))
    assert df["phase"].tolist() == ["save"]


def test_bad_series_is_rejected_with_the_column_named():
    bad = _series([(1, 1, 150)])
    with pytest.raises(IoSeriesError, match="gpu_util_pct"):
        classify_phases(bad)
    missing = _series([(1, 1, 50)]).drop(columns=["nfs_read_bytes_per_s"])
    with pytest.raises(IoSeriesError, match="nfs_read_bytes_per_s"):
        classify_phases(missing)
