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
    """Per group (rows already sorted by time inside each group): position of the first row where at least k of the
    last n rows are flagged, and the position of the earliest flagged row in that window.

    Returns a frame indexed by the rows that raised an alarm, with `first_pos` (row label of the episode's first
    flagged sample) and `start_pos` (first row of the n-sample window). One spike is not an alarm when k > 1.
    """
    f = flags.astype(int)
    counts = f.groupby(groups, sort=False).transform(lambda s: s.rolling(n, min_periods=1).sum())
    alarm = counts >= k
    if not alarm.any():
        return pd.DataFrame({"first_pos": pd.Series(dtype="int64"), "start_pos": pd.Series(dtype="int64")})
    first_alarm = alarm[alarm].groupby([g[alarm] for g in groups], sort=False).head(1)
    rows = []
    idx = flags.index
    for label in first_alarm.index:
        pos = idx.get_loc(label)
        window = flags.iloc[max(0, pos - n + 1) : pos + 1]
        # Stay inside this row's group: earlier rows may belong to the previous group.
        same = np.ones(len(window), dtype=bool)
        for g in groups:
            same &= (g.iloc[max(0, pos - n + 1) : pos + 1] == g.iloc[pos]).to_numpy()
        flagged = window[same & window.to_numpy()]
        rows.append((label, flagged.index[0], window.index[same][0]))
    return pd.DataFrame(
        {"first_pos": [r[1] for r in rows], "start_pos": [r[2] for r in rows]}, index=[r[0] for r in rows]
    )
