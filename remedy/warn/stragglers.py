"""Fail-slow nodes: one slow node stalls every synchronous step of the whole job (seed 002 §fail-slow: gpu074 and
gpu119 never stopped, they slowed the job; Wu et al. saw stragglers in 59% of 512–1,024-GPU jobs).

Compare each node's per-step time with the job's median at the same step; a node `straggler_slowdown` above the
median in k of the last n steps gets a warning.

Input `steps`:
    time               datetime64 tz-aware   when the step (or sampling interval) ended
    job                str
    node               str
    step_time_seconds  float > 0             the node's own compute time per step, before it waits in the
                                             collective (after the all-reduce every rank shows the same time);
                                             for a throughput series pass 1 / throughput
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from remedy.settings.lemon import EarlyWarningSettings
from remedy.warn.findings import Finding, first_persistent, name_col, number_col, time_col, validate

STEP_SCHEMA = pa.DataFrameSchema(
    {
        "time": time_col(),
        "job": name_col(),
        "node": name_col(),
        "step_time_seconds": number_col(pa.Check.gt(0, error="must be positive (seconds)")),
    },
    unique=["time", "job", "node"],
    report_duplicates="exclude_first",
)


def detect_stragglers(steps: pd.DataFrame, settings: EarlyWarningSettings | None = None) -> list[Finding]:
    """One finding per (job, node) that runs persistently slower than its job's median."""
    s = settings or EarlyWarningSettings()
    df = validate(steps, STEP_SCHEMA, "step times")
    if df.empty:
        return []
    for col in ("job", "node"):
        df[col] = df[col].astype("category")
    keys = [df["job"], df["time"]]
    g = df["step_time_seconds"].groupby(keys, observed=True)
    df["median"] = g.transform("median")
    df["peers"] = g.transform("size")
    df["ratio"] = df["step_time_seconds"] / df["median"]
    df = df.sort_values(["job", "node", "time"], kind="stable").reset_index(drop=True)
    flags = (df["ratio"] >= 1 + s.straggler_slowdown) & (df["peers"] >= s.straggler_min_nodes)
    alarms = first_persistent(flags, [df["job"], df["node"]], s.persist_k, s.persist_n)
    out = []
    for label, row in alarms.iterrows():
        r, first = df.loc[label], df.loc[row["first_pos"]]
        start = df.loc[row["start_pos"], "time"]
        out.append(
            Finding(
                detector="straggler",
                node=str(r["node"]),
                metric="step_time_seconds",
                value=float(r["step_time_seconds"]),
                baseline=float(r["median"]),
                score=float(r["ratio"]),
                window_start=start.to_pydatetime(),
                window_end=r["time"].to_pydatetime(),
                first_seen=first["time"].to_pydatetime(),
                component=str(r["job"]),
                detail=f"{(r['ratio'] - 1):.0%} slower than the median of {int(r['peers'])} nodes in ≥ {s.persist_k} "
                f"of the last {s.persist_n} steps; every synchronous step waits for it",
            )
        )
    out.sort(key=lambda f: (f.window_end, f.node))
    return out
