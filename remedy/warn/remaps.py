"""Correctable-remap acceleration: the gpu124 pattern (seed 002 §4.1.2).

gpu124's GPU 2 accumulated correctable row remaps slowly for weeks, then from about 28 October went past 200 in one
week, reached 254, and on 17 November the GPU vanished from the host, with no XID and no uncorrectable remap on the
way. The count itself is "auto-corrected" and harmless by NVIDIA's book; the change of rate is the warning.

For every sample time t of a GPU's counter: recent = increase over (t − remap_recent_days, t]; baseline = weekly rate
over the remap_baseline_days before that (at least the floor). Warn when recent ≥ remap_min_increase and the recent
weekly rate ≥ remap_acceleration_ratio × baseline. Counter drops are treated as resets (GPU swapped / driver reload):
the new value counts as fresh increase, like Prometheus increase().

Input `remaps`:
    time                datetime64 tz-aware
    node                str
    gpu                 int ≥ 0   GPU index on the node
    correctable_remaps  float ≥ 0 cumulative counter (DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa

from remedy.domain.durations import days
from remedy.settings.lemon import EarlyWarningSettings
from remedy.warn.findings import Finding, name_col, number_col, time_col, validate

REMAP_SCHEMA = pa.DataFrameSchema(
    {
        "time": time_col(),
        "node": name_col(),
        "gpu": pa.Column(int, pa.Check.ge(0), nullable=False, coerce=True),
        "correctable_remaps": number_col(pa.Check.ge(0, error="a counter cannot be negative")),
    },
    unique=["time", "node", "gpu"],
    report_duplicates="exclude_first",
)

DAY_NS = 86_400 * 10**9


def _increase_series(values: np.ndarray) -> np.ndarray:
    """Cumulative increase with counter resets handled (a drop means the counter restarted from 0)."""
    inc = np.diff(values, prepend=values[0])
    inc = np.where(inc < 0, values, inc)
    return np.cumsum(inc)


def detect_remap_acceleration(remaps: pd.DataFrame, settings: EarlyWarningSettings | None = None) -> list[Finding]:
    """One finding per (node, GPU) at the first sample where the remap rate has clearly accelerated."""
    s = settings or EarlyWarningSettings()
    df = validate(remaps, REMAP_SCHEMA, "remap counters")
    if df.empty:
        return []
    df = df.sort_values(["node", "gpu", "time"], kind="stable")
    recent_ns = int(s.remap_recent_days * DAY_NS)
    base_ns = int(s.remap_baseline_days * DAY_NS)
    out = []
    for (node, gpu), g in df.groupby(["node", "gpu"], sort=True):
        t = g["time"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").astype("int64")
        c = _increase_series(g["correctable_remaps"].to_numpy(dtype=float))
        # Counter value at the last sample at or before t − recent, and at or before t − recent − baseline.
        i_r = np.searchsorted(t, t - recent_ns, side="right") - 1
        i_b = np.searchsorted(t, t - recent_ns - base_ns, side="right") - 1
        has_recent = i_r >= 0
        i_b = np.where(i_b >= 0, i_b, 0)  # shorter history: the baseline starts at the first sample
        i_r_safe = np.where(has_recent, i_r, 0)
        base_span_days = (t[i_r_safe] - t[i_b]) / DAY_NS
        recent = c - c[i_r_safe]
        base_weekly = np.where(base_span_days > 0, (c[i_r_safe] - c[i_b]) / np.maximum(base_span_days, 1e-9) * 7, 0.0)
        base_weekly = np.maximum(base_weekly, s.remap_baseline_floor_per_week)
        recent_weekly = recent / s.remap_recent_days * 7
        ratio = recent_weekly / base_weekly
        # A baseline needs at least one recent-window's worth of history before the recent window.
        enough = has_recent & (base_span_days >= s.remap_recent_days)
        fire = enough & (recent >= s.remap_min_increase) & (ratio >= s.remap_acceleration_ratio)
        if not fire.any():
            continue
        i = int(np.argmax(fire))
        # First seen: the first sample in the recent window whose step already ran above the accelerated rate.
        steps = np.diff(c, prepend=c[0])
        dt_days = np.diff(t, prepend=t[0]) / DAY_NS
        fast = (steps > 0) & (steps >= s.remap_acceleration_ratio * base_weekly[i] / 7 * np.maximum(dt_days, 1e-9))
        window = np.arange(i_r_safe[i] + 1, i + 1)
        first = int(window[fast[window]][0]) if fast[window].any() else i
        times = g["time"].to_numpy()
        out.append(
            Finding(
                detector="remap-acceleration",
                node=str(node),
                metric="correctable_remaps",
                value=float(recent[i]),
                baseline=float(base_weekly[i] * s.remap_recent_days / 7),
                score=float(ratio[i]),
                window_start=pd.Timestamp(times[i_r_safe[i]]).to_pydatetime(),
                window_end=pd.Timestamp(times[i]).to_pydatetime(),
                first_seen=pd.Timestamp(times[first]).to_pydatetime(),
                component=f"GPU {int(gpu)}",
                detail=f"{recent[i]:.0f} correctable remaps in {days(s.remap_recent_days)} vs {base_weekly[i]:.1f}/week "
                f"before ({ratio[i]:.1f}×); counter now {g['correctable_remaps'].iloc[i]:.0f} (gpu124 pattern)",
            )
        )
    out.sort(key=lambda f: (f.window_end, f.node, f.component))
    return out
