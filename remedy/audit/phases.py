"""Save / load / training phases from cluster I/O, as seed 002 §4.2.1 defines them.

In priority order: save (cluster NFS write > 20 GB/s), load (cluster mean GPU use < 50% and cluster NFS
read > 2 GB/s), otherwise training. Consecutive save samples are one checkpoint; their lengths give δ
(remedy.audit.cadence) and their spacing the current checkpoint interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from statistics import median

import pandas as pd

from remedy.audit.cadence import CadenceError, save_duration_from_samples
from remedy.errors import RemedyError
from remedy.settings.audit import NfsAuditSettings


class IoSeriesError(RemedyError):
    """A cluster I/O time series that does not fit the expected columns and ranges."""

SAVE, LOAD, TRAINING = "save", "load", "training"


@lru_cache(maxsize=1)
def io_schema():
    import pandera.pandas as pa

    nonneg = pa.Check.ge(0)
    return pa.DataFrameSchema(
        {
            "timestamp": pa.Column("datetime64[ns, UTC]"),
            "nfs_write_bytes_per_s": pa.Column(float, nonneg),
            "nfs_read_bytes_per_s": pa.Column(float, nonneg),
            "gpu_util_pct": pa.Column(float, [nonneg, pa.Check.le(100)]),
        },
        checks=pa.Check(lambda df: df["timestamp"].is_monotonic_increasing, error="timestamps must increase"),
        strict=False,
        coerce=True,
    )


def classify_phases(series: pd.DataFrame, settings: NfsAuditSettings | None = None) -> pd.DataFrame:
    """The validated series plus a `phase` column (save | load | training)."""
    s = settings or NfsAuditSettings()
    import pandera.errors

    try:
        df = io_schema().validate(series.copy())
    except pandera.errors.SchemaError as exc:
        raise IoSeriesError(f"cluster I/O series: {str(exc).splitlines()[0]}") from None
    save = df["nfs_write_bytes_per_s"] > s.save_write_bytes_per_s
    load = (df["gpu_util_pct"] < s.load_gpu_util_below_pct) & (df["nfs_read_bytes_per_s"] > s.load_read_bytes_per_s)
    df["phase"] = TRAINING
    df.loc[load, "phase"] = LOAD
    df.loc[save, "phase"] = SAVE  # save wins over load
    return df


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    phase: str
    start: pd.Timestamp
    end: pd.Timestamp  # timestamp of the last sample in the span
    samples: int


def phase_spans(classified: pd.DataFrame) -> list[PhaseSpan]:
    out: list[PhaseSpan] = []
    if classified.empty:
        return out
    phases = classified["phase"].tolist()
    times = classified["timestamp"].tolist()
    start = 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            out.append(PhaseSpan(phases[start], times[start], times[i - 1], i - start))
            start = i
    return out


@dataclass(frozen=True, slots=True)
class SaveProfile:
    saves: int
    mean_samples: float  # N̄ of seed 002 Table 10
    delta_s: float
    interval_s: float | None  # median start-to-start spacing of saves; None with fewer than two


def save_profile(classified: pd.DataFrame, settings: NfsAuditSettings | None = None) -> SaveProfile:
    s = settings or NfsAuditSettings()
    saves = [p for p in phase_spans(classified) if p.phase == SAVE]
    if not saves:
        raise CadenceError("no checkpoint saves in the series (no sample above the save write threshold)")
    mean = sum(p.samples for p in saves) / len(saves)
    gaps = [(b.start - a.start).total_seconds() for a, b in zip(saves, saves[1:])]
    return SaveProfile(len(saves), mean, save_duration_from_samples(mean, s.sample_seconds), median(gaps) if gaps else None)
