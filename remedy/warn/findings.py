"""What every early-warning detector returns, and the input checks they share.

A finding is warning-level: drain at the next checkpoint or keep watching (RemediationPath.WATCH), never an
immediate replacement. It carries the evidence an operator needs to agree: the value, the baseline it was compared
with, the score, the window and when the anomaly was first seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd
import pandera.pandas as pa

from remedy.errors import RemedyError


class SeriesError(RemedyError, ValueError):
    """A detector's input table is malformed; the message names the table, the column and the problem."""


@dataclass(frozen=True)
class Finding:
    detector: str  # peer-outlier | remap-acceleration | straggler | ib-downtime
    node: str
    metric: str
    value: float  # the node's value when the warning was raised
    baseline: float  # what it was compared with (peer median, own past rate, threshold)
    score: float  # robust z, rate ratio, slowdown ratio, fraction of the timeout
    window_start: datetime
    window_end: datetime  # = when the warning was raised
    first_seen: datetime  # first anomalous sample of the episode
    component: str = ""  # "GPU 2", "mlx5_0/1", or the job id for peer detectors
    detail: str = ""
    level: str = "warning"

    @property
    def raised_at(self) -> datetime:
        return self.window_end


TZ_AWARE = pa.Check(lambda s: isinstance(s.dtype, pd.DatetimeTZDtype), error="must be timezone-aware datetimes (UTC)")
NON_EMPTY = pa.Check(lambda s: s.astype(str).str.len() > 0, error="must be non-empty names")


def time_col() -> pa.Column:
    return pa.Column(checks=TZ_AWARE, nullable=False)


def name_col() -> pa.Column:
    return pa.Column(str, checks=NON_EMPTY, nullable=False, coerce=True)


def number_col(*checks: pa.Check) -> pa.Column:
    return pa.Column(float, checks=[pa.Check(lambda s: np.isfinite(s), error="must be finite"), *checks],
                     nullable=False, coerce=True)


def validate(df: pd.DataFrame, schema: pa.DataFrameSchema, what: str) -> pd.DataFrame:
    """Validate with pandera; raise SeriesError with one line naming the table and the first problem."""
    if not isinstance(df, pd.DataFrame):
        raise SeriesError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in schema.columns if c not in df.columns]
    if missing:
        raise SeriesError(f"{what}: missing column(s) {', '.join(missing)} (have: {', '.join(map(str, df.columns))})")
    try:
        out = schema.validate(df.loc[:, list(schema.columns)].copy())
    except (pa.errors.SchemaError, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SeriesError(f"{what}: {first[:300]}") from None
    return out.reset_index(drop=True)


def first_persistent(flags: pd.Series, groups: list[pd.Series], k: int, n: int) -> pd.DataFrame:
    """Per group: the first row where at least k of the group's last n rows are flagged.

    Rows must be sorted so each group is contiguous and in time order, with a 0..len−1 RangeIndex. Returns a frame
    indexed by the rows that raised an alarm, with `first_pos` (the episode's first flagged row) and `start_pos`
    (first row of the n-row window). One spike is not an alarm when k > 1.
    """
    f = flags.to_numpy(dtype=bool)
    m = len(f)
    empty = pd.DataFrame({"first_pos": pd.Series(dtype="int64"), "start_pos": pd.Series(dtype="int64")})
    if m == 0:
        return empty
    pos = np.arange(m)
    # Groups are contiguous, so a group starts wherever any key differs from the row before.
    new_group = np.zeros(m, dtype=bool)
    new_group[0] = True
    for g in groups:
        v = g.to_numpy()
        new_group[1:] |= v[1:] != v[:-1]
    codes = np.cumsum(new_group)
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    win_start = np.maximum(pos - n + 1, group_start)
    csum = np.r_[0, np.cumsum(f)]
    counts = csum[pos + 1] - csum[win_start]
    alarm = counts >= k
    if not alarm.any():
        return empty
    alarm_rows = pos[alarm]
    first_alarm = alarm_rows[np.r_[True, codes[alarm_rows][1:] != codes[alarm_rows][:-1]]]
    first_pos = []
    for i in first_alarm:
        w = win_start[i]
        first_pos.append(int(w + np.argmax(f[w : i + 1])))
    return pd.DataFrame({"first_pos": first_pos, "start_pos": win_start[first_alarm]}, index=first_alarm)
