"""Peer outliers: a node that drifts away from the other nodes running the same job.

Seed 002 §4.1.2: 60 nodes run one job, so "is this node abnormal?" becomes "how far is it from the 59 peers?".
Its precursor signals: host interrupts (gpu071: ~300K per 30 s at peers, 70–100K on the failing node), runnable
processes (dropped to ~0), NFS GETATTR response time and page-outs (gpu096: spikes at peer level × many).
A sample is an outlier when its robust z-score against the peers' median/MAD at the same timestamp passes
`peer_z_threshold`; a warning needs k of the last n samples (one spike is not an alarm). Both directions count.

Input `samples` (long format, one row per node × metric × timestamp):
    time    datetime64 tz-aware   sample time (seed 002 uses 30 s increments)
    job     str                   job the node runs; peers = same job, same metric, same time
    node    str
    metric  str                   e.g. the names in PEER_SIGNALS (any metric works)
    value   float, finite
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from remedy.settings.lemon import EarlyWarningSettings
from remedy.warn.findings import Finding, first_persistent, name_col, number_col, time_col, validate

# Seed 002's precursor metrics (Prometheus names; counters as 30 s increments).
PEER_SIGNALS = {
    "node_intr_total": "host interrupts per 30 s",
    "node_procs_running": "runnable processes",
    "node_mountstats_nfs_operations_response_time_seconds_total:GETATTR": "NFS GETATTR response time per 30 s",
    "node_vmstat_pgpgout": "page-outs per 30 s",
}

PEER_SCHEMA = pa.DataFrameSchema(
    {"time": time_col(), "job": name_col(), "node": name_col(), "metric": name_col(), "value": number_col()},
    unique=["time", "job", "node", "metric"],
    report_duplicates="exclude_first",
)

MAD_TO_SIGMA = 0.6745  # z = 0.6745·(x − median)/MAD is comparable to a normal z-score (Iglewicz & Hoaglin)


def robust_z(samples: pd.DataFrame, settings: EarlyWarningSettings) -> pd.DataFrame:
    """Add peers, median, mad and z columns to validated samples (per job × metric × time)."""
    df = samples
    keys = [df["job"], df["metric"], df["time"]]
    grouped = df["value"].groupby(keys, observed=True)
    df["peers"] = grouped.transform("size")
    df["median"] = grouped.transform("median")
    absdev = (df["value"] - df["median"]).abs()
    mad = absdev.groupby(keys, observed=True).transform("median")
    # Floor the MAD: identical peers would otherwise turn rounding noise into huge z-scores.
    floor = (df["median"].abs() * settings.peer_mad_floor_fraction).clip(lower=1e-12)
    df["mad"] = mad.where(mad > floor, floor)
    df["z"] = MAD_TO_SIGMA * (df["value"] - df["median"]) / df["mad"]
    return df


def detect_peer_outliers(samples: pd.DataFrame, settings: EarlyWarningSettings | None = None) -> list[Finding]:
    """One finding per (job, metric, node) whose samples stay outside the peer band in k of the last n samples."""
    s = settings or EarlyWarningSettings()
    df = validate(samples, PEER_SCHEMA, "peer samples")
    if df.empty:
        return []
    for col in ("job", "node", "metric"):
        df[col] = df[col].astype("category")  # grouping on categories is several times faster than on strings
    df = robust_z(df, s)
    df = df.sort_values(["job", "metric", "node", "time"], kind="stable").reset_index(drop=True)
    flags = (df["z"].abs() > s.peer_z_threshold) & (df["peers"] >= s.peer_min_nodes)
    alarms = first_persistent(flags, [df["job"], df["metric"], df["node"]], s.persist_k, s.persist_n)
    out = []
    for label, row in alarms.iterrows():
        r, first = df.loc[label], df.loc[row["first_pos"]]
        start = df.loc[row["start_pos"], "time"]
        direction = "above" if r["z"] > 0 else "below"
        out.append(
            Finding(
                detector="peer-outlier",
                node=str(r["node"]),
                metric=str(r["metric"]),
                value=float(r["value"]),
                baseline=float(r["median"]),
                score=float(r["z"]),
                window_start=start.to_pydatetime(),
                window_end=r["time"].to_pydatetime(),
                first_seen=first["time"].to_pydatetime(),
                component=str(r["job"]),
                detail=f"{direction} {int(r['peers']) - 1} peers (robust z {r['z']:.1f}, MAD {r['mad']:.3g}) in ≥ "
                f"{s.persist_k} of the last {s.persist_n} samples",
            )
        )
    out.sort(key=lambda f: (f.window_end, f.node, f.metric))
    return out
