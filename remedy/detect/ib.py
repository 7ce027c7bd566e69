"""InfiniBand: count cumulative downtime, not flaps (seed 001).

NCCL's IB transport gives a downed port about `ib_transport_timeout_seconds` (~7 s with NCCL_IB_TIMEOUT's
default and retries) before it tears the connection down. So one long outage kills a run as surely as many
short ones add up to. `IbDowntimeTracker` folds port up/down observations (from node_exporter's
`node_infiniband_state_id`, a port-state poller, or alerts) into outages per node/port and reports:

- `ib-port-down` with the outage length when one outage reaches the single-outage budget;
- `ib-downtime` with the window's total when two or more outages sum to the cumulative budget.

Each budget trips once per crossing (an outage trips once; the cumulative rule re-arms when the window's
total falls back below budget). Plain Python, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from remedy.detect.signals import Signal, SignalKind
from remedy.domain.durations import human_duration
from remedy.settings.signals import SignalThresholds


def _seconds(at: datetime | float) -> float:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError(f"IB observation time {at.isoformat()} has no timezone; use UTC-aware datetimes")
        return at.timestamp()
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise ValueError(f"IB observation time must be a datetime or epoch seconds, got {at!r}")
    return float(at)


def _as_datetime(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


@dataclass
class _Port:
    outages: list[tuple[float, float]] = field(default_factory=list)  # closed (start, end), oldest first
    closed_total: float = 0.0  # sum of (end - start) over `outages`
    down_since: float | None = None
    last_at: float | None = None
    single_tripped: bool = False  # the current outage already reported
    cumulative_tripped: bool = False


@dataclass(frozen=True)
class IbPortStatus:
    node: str
    port: str
    down: bool
    downtime_seconds: float  # within the window, ongoing outage included
    outages: int  # outages overlapping the window
    longest_outage_seconds: float


def cumulative_signal(node: str, port: str, total: float, outages: int, at: datetime | float,
                      window_seconds: float) -> Signal:
    """The `ib-downtime` signal for a port whose outages in the window add up to `total` seconds."""
    return Signal(
        node=node, kind=SignalKind.IB_DOWNTIME, value=round(total, 6), at=_as_datetime(_seconds(at)),
        labels={"port": port, "rule": "ib-cumulative-downtime", "outages": str(outages)}, source="ib-tracker",
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


def port_key(labels: dict[str, str]) -> str:
    """The port an `ib-port-down` alert is about: node_exporter's `device:port`, or whichever of the two it has."""
    device, port = labels.get("device", ""), labels.get("port", "")
    return f"{device}:{port}" if device and port else (port or device)


class IbDowntimeTracker:
    """Fold IB port up/down observations into cumulative downtime per (node, port) within a window."""

    def __init__(self, thresholds: SignalThresholds | None = None) -> None:
        self.t = thresholds or SignalThresholds()
        self._ports: dict[tuple[str, str], _Port] = {}

    # -- input ---------------------------------------------------------------------------
    def observe(self, node: str, port: str, up: bool, at: datetime | float) -> list[Signal]:
        """Record the port's state at `at`; return the signals this observation trips (often none)."""
        if not node or not port:
            raise ValueError(f"IB observation needs a node and a port, got node={node!r} port={port!r}")
        now = _seconds(at)
        p = self._ports.setdefault((node, port), _Port())
        if p.last_at is not None and now < p.last_at:
            raise ValueError(
                f"IB observations for {node} port {port} must be in time order: "
                f"{_as_datetime(now).isoformat()} is before {_as_datetime(p.last_at).isoformat()}"
            )
        p.last_at = now
        out: list[Signal] = []
        if not up and p.down_since is None:
            p.down_since, p.single_tripped = now, False
        elif up and p.down_since is not None:
            out += self._check_single(node, port, p, now)  # the outage's final length
            p.outages.append((p.down_since, now))
            p.closed_total += now - p.down_since
            p.down_since = None
        self._prune(p, now)
        out += self._check_single(node, port, p, now)
        out += self._check_cumulative(node, port, p, now)
        return out

    def observe_signal(self, signal: Signal) -> list[Signal]:
        """Fold an `ib-port-down` signal (e.g. the InfinibandPortDown alert) into the tracker.

        Firing = the port went down at `signal.at`; resolved = it was down from `at` until `ended_at`.
        The port is `device:port` from node_exporter's labels (or `port` alone).
        """
        if signal.kind is not SignalKind.IB_PORT_DOWN:
            raise ValueError(f"IbDowntimeTracker folds ib-port-down signals, got {signal.kind.value}")
        if signal.at is None:
            raise ValueError(f"ib-port-down on {signal.node}: the signal has no time (at)")
        key = port_key(signal.labels)
        if not key:
            raise ValueError(f"ib-port-down on {signal.node}: no port/device label")
        p = self._ports.get((signal.node, key))
        start = _seconds(signal.at)
        out: list[Signal] = []
        if p is None or (p.down_since is None and (p.last_at is None or start >= p.last_at)):
            out += self.observe(signal.node, key, False, start)
        if signal.resolved:
            if signal.ended_at is None:
                raise ValueError(f"resolved ib-port-down on {signal.node} {key}: no end time (ended_at)")
            out += self.observe(signal.node, key, True, signal.ended_at)
        return out

    def check(self, at: datetime | float) -> list[Signal]:
        """Re-evaluate every port at `at` (an ongoing outage grows without new observations)."""
        now = _seconds(at)
        out: list[Signal] = []
        for (node, port), p in sorted(self._ports.items()):
            if p.last_at is not None and now < p.last_at:
                continue  # never evaluate before what we already saw
            self._prune(p, now)
            out += self._check_single(node, port, p, now)
            out += self._check_cumulative(node, port, p, now)
        return out

    # -- queries -------------------------------------------------------------------------
    def status(self, node: str, port: str, at: datetime | float) -> IbPortStatus:
        now = _seconds(at)
        p = self._ports.get((node, port), _Port())
        spans = self._spans(p, now)
        return IbPortStatus(
            node=node,
            port=port,
            down=p.down_since is not None,
            downtime_seconds=sum(e - s for s, e in spans),
            outages=len(spans),
            longest_outage_seconds=max((e - s for s, e in self._whole_spans(p, now)), default=0.0),
        )

    def downtime(self, node: str, port: str, at: datetime | float) -> float:
        return self.status(node, port, at).downtime_seconds

    # -- internals -----------------------------------------------------------------------
    def _whole_spans(self, p: _Port, now: float) -> list[tuple[float, float]]:
        lo = now - self.t.ib_window_seconds
        spans = [(s, e) for s, e in p.outages if e > lo]
        if p.down_since is not None:
            spans.append((p.down_since, now))
        return spans

    def _spans(self, p: _Port, now: float) -> list[tuple[float, float]]:
        lo = now - self.t.ib_window_seconds
        return [(max(s, lo), e) for s, e in self._whole_spans(p, now)]

    def _check_single(self, node: str, port: str, p: _Port, now: float) -> list[Signal]:
        if p.down_since is None or p.single_tripped:
            return []
        length = now - p.down_since
        if length < self.t.ib_single_outage_seconds:
            return []
        p.single_tripped = True
        return [Signal(
            node=node, kind=SignalKind.IB_PORT_DOWN, value=round(length, 6), at=_as_datetime(now),
            labels={"port": port, "rule": "ib-single-outage"}, source="ib-tracker",
            raw=f"{port} down since {_as_datetime(p.down_since).isoformat()} ({human_duration(length)})",
        )]

    def _check_cumulative(self, node: str, port: str, p: _Port, now: float) -> list[Signal]:
        # After _prune every closed outage ends inside the window; only the oldest can start before it.
        lo = now - self.t.ib_window_seconds
        total, n = p.closed_total, len(p.outages)
        if p.outages and p.outages[0][0] < lo:
            total -= lo - p.outages[0][0]
        if p.down_since is not None:
            total += now - max(p.down_since, lo)
            n += 1
        if total < self.t.ib_cumulative_seconds:
            p.cumulative_tripped = False  # re-arm once the window's total falls below budget
            return []
        # One outage alone is the single-outage rule's business (seed 001: an isolated flap is not an
        # unhealthy port); the cumulative rule is about several adding up.
        if p.cumulative_tripped or n < 2:
            return []
        p.cumulative_tripped = True
        return [cumulative_signal(node, port, total, n, now, self.t.ib_window_seconds)]

    def _prune(self, p: _Port, now: float) -> None:
        lo = now - self.t.ib_window_seconds
        drop = 0
        while drop < len(p.outages) and p.outages[drop][1] <= lo:
            p.closed_total -= p.outages[drop][1] - p.outages[drop][0]
            drop += 1
        if drop:
            del p.outages[:drop]
        if not p.outages:
            p.closed_total = 0.0  # no float drift carried across empty windows
