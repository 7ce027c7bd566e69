"""InfiniBand: count cumulative downtime, not flaps (seed 001).

NCCL's IB transport gives a downed port about `ib_transport_timeout_seconds` (~7 s with NCCL_IB_TIMEOUT's
default and retries) before it tears the connection down. So one long outage kills a run as surely as many
short ones add up to. Two rules:

- `ib-port-down` with the outage length: one outage reaching the single-outage budget (the alert's own verdict,
  remedy.detect.signals.classify);
- `ib-downtime` with the window's total, when two or more outages sum to the cumulative budget: the port's
  outages are kept in the ledger (remedy.ledger.ib_ports.fold_port_alert), so the ones every receiver saw, before
  and after a restart, add up. It trips once per crossing and re-arms when the window's total falls back below.

This module is the arithmetic and the reading of a port alert (`ib_port_of`), plain Python, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from remedy.detect.signals import Signal, SignalKind
from remedy.domain.durations import human_duration


def _seconds(at: datetime | float) -> float:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError(f"IB observation time {at.isoformat()} has no timezone; use UTC-aware datetimes")
        return at.timestamp()
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise ValueError(f"IB observation time must be a datetime or epoch seconds, got {at!r}")
    return float(at)


@dataclass(frozen=True)
class IbPortOutage:
    """One outage of one port as an `ib-port-down` alert reports it: down from `started_at` until `ended_at`
    (None: still down)."""

    node: str
    port: str
    started_at: datetime
    ended_at: datetime | None


def port_key(labels: dict[str, str]) -> str:
    """The port an `ib-port-down` alert is about: node_exporter's `device:port`, or whichever of the two it has."""
    device, port = labels.get("device", ""), labels.get("port", "")
    return f"{device}:{port}" if device and port else (port or device)


def ib_port_of(signal: Signal) -> IbPortOutage:
    """The outage an `ib-port-down` signal reports (firing: the port went down at `at`; resolved: it was down from
    `at` until `ended_at`). ValueError, one line, when it cannot be one: another kind, no time, no port label, a
    resolve with no end or ending before it starts."""
    if signal.kind is not SignalKind.IB_PORT_DOWN:
        raise ValueError(f"IB port outages come from ib-port-down signals, got {signal.kind.value}")
    if signal.at is None:
        raise ValueError(f"ib-port-down on {signal.node}: the signal has no time (at)")
    port = port_key(signal.labels)
    if not port:
        raise ValueError(f"ib-port-down on {signal.node}: no port/device label")
    _seconds(signal.at)  # aware, or a clear error
    end = None
    if signal.resolved:
        if signal.ended_at is None:
            raise ValueError(f"resolved ib-port-down on {signal.node} {port}: no end time (ended_at)")
        _seconds(signal.ended_at)
        if signal.ended_at < signal.at:
            raise ValueError(f"ib-port-down on {signal.node} {port}: ends ({signal.ended_at.isoformat()}) before it "
                             f"starts ({signal.at.isoformat()})")
        end = signal.ended_at
    return IbPortOutage(signal.node, port, signal.at, end)


def cumulative_signal(node: str, port: str, total: float, outages: int, at: datetime | float,
                      window_seconds: float) -> Signal:
    """The `ib-downtime` signal for a port whose outages in the window add up to `total` seconds."""
    return Signal(
        node=node, kind=SignalKind.IB_DOWNTIME, value=round(total, 6),
        at=datetime.fromtimestamp(_seconds(at), tz=UTC),
        labels={"port": port, "rule": "ib-cumulative-downtime", "outages": str(outages)}, source="ib-ports",
        raw=f"{port}: {human_duration(total)} down in {outages} outage(s) within {human_duration(window_seconds)}",
    )


def window_downtime(spans: list[tuple[float, float | None]], at: float, window_seconds: float) -> tuple[float, int]:
    """Seconds down within (at - window, at] and how many outages overlap it. A span is (went down, came back up);
    None = still down at `at`. Spans that start after `at` are not yet seen at `at`."""
    lo = at - window_seconds
    total, n = 0.0, 0
    for start, end in spans:
        stop = at if end is None else min(end, at)
        if start > at or stop <= lo:
            continue
        total += stop - max(start, lo)
        n += 1
    return total, n
