"""InfiniBand port downtime approaching the transport timeout (seed 001).

Databricks lost a 7-hour run to one port that went down once: NCCL_IB_TIMEOUT's effective default (~7 s with
retries) tears the connection down long before the PyTorch watchdog notices. "The signal that matters for training
impact is cumulative downtime, not flap count." So: per port, add up down time inside a sliding window and warn
when it reaches `ib_warn_fraction` × the transport timeout; the longest single outage is reported too. The timeout
and the window are read from `SignalThresholds` (signals.ib_transport_timeout_seconds, signals.ib_window_seconds),
where the replace-the-node rule at the full timeout lives: one fact, one place.

Input `port_events` (state changes, as from the port's link-state log or `ib_port_state` scrapes):
    time   datetime64 tz-aware
    node   str
    port   str           e.g. "mlx5_0/1"
    state  "down" | "up"  the state the port entered at `time`
A port still down at `now` counts as down until `now`. Repeated states are idempotent (down, down = one outage).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pandera.pandas as pa

from remedy.domain.durations import human_duration
from remedy.settings.lemon import EarlyWarningSettings
from remedy.settings.signals import SignalThresholds
from remedy.warn.findings import Finding, SeriesError, name_col, time_col, validate

PORT_SCHEMA = pa.DataFrameSchema(
    {
        "time": time_col(),
        "node": name_col(),
        "port": name_col(),
        "state": pa.Column(str, pa.Check.isin(["down", "up"]), nullable=False, coerce=True),
    }
)


def down_intervals(events: pd.DataFrame, now: datetime) -> dict[tuple[str, str], list[tuple[datetime, datetime]]]:
    """(node, port) → [(down_at, up_at)] from validated events; an outage still open at `now` ends at `now`."""
    out: dict[tuple[str, str], list[tuple[datetime, datetime]]] = {}
    for (node, port), g in events.sort_values(["node", "port", "time"], kind="stable").groupby(["node", "port"]):
        spans, down_at = [], None
        for t, state in zip(g["time"], g["state"]):
            t = t.to_pydatetime(warn=False)
            if t > now:
                raise SeriesError(f"port events: {node} {port} has an event at {t.isoformat()}, after now={now.isoformat()}")
            if state == "down" and down_at is None:
                down_at = t
            elif state == "up" and down_at is not None:
                spans.append((down_at, t))
                down_at = None
        if down_at is not None:
            spans.append((down_at, now))
        out[(str(node), str(port))] = spans
    return out


def detect_ib_downtime(
    port_events: pd.DataFrame,
    now: datetime,
    settings: EarlyWarningSettings | None = None,
    signals: SignalThresholds | None = None,
) -> list[Finding]:
    """One finding per port whose cumulative down time in any window reached the warning fraction of the timeout."""
    s = settings or EarlyWarningSettings()
    sig = signals or SignalThresholds()
    timeout = sig.ib_transport_timeout_seconds
    if now.tzinfo is None:
        raise SeriesError(f"port events: now must be timezone-aware, got {now!r}")
    df = validate(port_events, PORT_SCHEMA, "port events")
    window = timedelta(seconds=sig.ib_window_seconds)
    limit = s.ib_warn_fraction * timeout
    out = []
    for (node, port), spans in down_intervals(df, now).items():
        for i, (down, up) in enumerate(spans):
            # Down time already in the window when this outage starts (earlier outages that have not aged out).
            before = sum(
                (min(u, down) - max(d, down - window)).total_seconds() for d, u in spans[:i] if u > down - window
            )
            duration = (up - down).total_seconds()
            if before + duration < limit:
                continue
            crossed = down + timedelta(seconds=max(0.0, limit - before))
            in_window = [(d, u) for d, u in spans[: i + 1] if u > crossed - window]
            longest = max((u - d).total_seconds() for d, u in in_window)
            total = before + duration  # down time in the window once this outage is over (or until now)
            detail = (
                f"crossed {human_duration(limit)}; {len(in_window)} outage(s), longest {human_duration(longest)}, "
                f"{human_duration(total)} down within {human_duration(sig.ib_window_seconds)} "
                f"(NCCL_IB_TIMEOUT ≈ {human_duration(timeout)})"
            )
            if duration >= timeout:
                detail += f"; this outage lasted {human_duration(duration)}: past the timeout, NCCL connections are gone"
            out.append(
                Finding(
                    detector="ib-downtime",
                    node=node,
                    metric="ib_port_down_seconds",
                    value=total,
                    baseline=timeout,
                    score=total / timeout,
                    window_start=crossed - window,
                    window_end=crossed,
                    first_seen=in_window[0][0],
                    component=port,
                    detail=detail,
                )
            )
            break  # one warning per port: the first time it crossed
    out.sort(key=lambda f: (f.window_end, f.node, f.component))
    return out
