"""InfiniBand port outages in the ledger: cumulative downtime that survives restarts and is shared by receivers.

The receiver folds `ib-port-down` alerts (firing = the port went down at startsAt; resolved = it came back at
endsAt) into one row per outage here. Each fold then sums the port's downtime in the window
(`signals.ib_window_seconds`) from the rows, so the outages two receivers saw, or one receiver saw before a
restart, add up (deployments/prometheus/rules.yml promises it). The cumulative budget trips once per crossing:
the "already reported" mark is per port in `ib_ports`, set and cleared in the same transaction that counts, so
two receivers folding the last flap at once report it once.

Writers serialise per port: SQLite's `BEGIN IMMEDIATE` (every ledger write), PostgreSQL's transaction-scoped
advisory lock on the port (remedy.ledger.claims does the same for caps).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, or_, select, text, update

from remedy.detect.ib import cumulative_signal, ib_port_of, window_downtime
from remedy.detect.signals import Signal
from remedy.ledger import schema
from remedy.settings.signals import SignalThresholds

# Closed outages this long before the newest fold are dropped: two windows, so a late re-send still finds its row.
_KEEP_WINDOWS = 2


@dataclass(frozen=True)
class IbFold:
    """What one port up/down alert did: the port's downtime and outages in the window at `at`, and the
    `ib-downtime` signal when this fold crossed the cumulative budget (None otherwise, or already reported)."""

    node: str
    port: str
    at: datetime
    downtime_seconds: float
    outages: int
    tripped: Signal | None


def _lock_key(node: str, port: str) -> int:
    digest = hashlib.sha256(f"remedy-ib|{node}|{port}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def fold_port_alert(ledger, signal: Signal, thresholds: SignalThresholds, *, now: datetime) -> IbFold:
    """Record one `ib-port-down` alert's outage and judge the port's cumulative downtime.

    Firing: the outage starts at `signal.at` and is still going on: judged at `now` (or its start, if later), so a
    port down right now counts up to now. Resolved: it ran from `signal.at` to `signal.ended_at` (judged then). A
    re-send changes nothing; a new outage while an older one is still open closes the older one where the new one
    starts (the resolve was lost: counted as one continuous outage). ValueError (nothing written) when the signal
    is no port outage (remedy.detect.ib.ib_port_of: the one reading of a port alert)."""
    outage = ib_port_of(signal)
    node, port, start, end = outage.node, outage.port, outage.started_at, outage.ended_at
    at = end if end is not None else max(start, now)
    window = thresholds.ib_window_seconds
    o, p = schema.ib_port_outages.c, schema.ib_ports.c
    mine = and_(o.node == node, o.port == port)
    with ledger._write() as conn:  # noqa: SLF001 - the ledger's own write transaction (BEGIN IMMEDIATE on SQLite)
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(node, port)})
        row = conn.execute(select(o.id, o.ended_at).where(mine, o.started_at == start)).first()
        if row is None:
            # an older outage still open: its resolve was lost; it lasted until this one began at the latest
            conn.execute(update(schema.ib_port_outages)
                         .where(mine, o.started_at < start, o.ended_at.is_(None))
                         .values(ended_at=start, updated_at=now))
            conn.execute(schema.ib_port_outages.insert().values(
                node=node, port=port, started_at=start, ended_at=end, updated_at=now))
        elif end is not None and (row.ended_at is None or end < row.ended_at):
            conn.execute(update(schema.ib_port_outages).where(o.id == row.id).values(ended_at=end, updated_at=now))
        lo = at - timedelta(seconds=window)
        spans = [(s.timestamp(), None if e is None else e.timestamp()) for s, e in conn.execute(
            select(o.started_at, o.ended_at).where(mine, o.started_at <= at, or_(o.ended_at.is_(None), o.ended_at > lo)))]
        total, n = window_downtime(spans, at.timestamp(), window)
        state = conn.execute(select(p.cumulative_tripped, p.tripped_by)
                             .where(p.node == node, p.port == port)).first()
        was_tripped = bool(state[0]) if state is not None else False
        tripped_by = state[1] if state is not None else None
        tripped: Signal | None = None
        if total < thresholds.ib_cumulative_seconds:
            now_tripped, tripped_by = False, None  # re-armed: the window's total fell back below budget
        elif n >= 2 and (not was_tripped or tripped_by == start):
            # one outage alone is the single-outage rule's business (seed 001); the budget is about several. The
            # alert that crossed it, sent again (a re-send after the incident could not be written, the other
            # receiver of an HA pair), yields the same escalation again: the ledger records it once.
            now_tripped, tripped_by = True, start
            tripped = cumulative_signal(node, port, total, n, at, window)
        else:
            now_tripped = was_tripped
        if state is None:
            conn.execute(schema.ib_ports.insert().values(node=node, port=port, cumulative_tripped=now_tripped,
                                                         tripped_by=tripped_by, updated_at=now))
        elif now_tripped != was_tripped or tripped_by != state[1]:
            conn.execute(update(schema.ib_ports).where(p.node == node, p.port == port)
                         .values(cumulative_tripped=now_tripped, tripped_by=tripped_by, updated_at=now))
        conn.execute(delete(schema.ib_port_outages).where(
            mine, o.ended_at.is_not(None), o.ended_at < at - timedelta(seconds=_KEEP_WINDOWS * window)))
    return IbFold(node, port, at, round(total, 6), n, tripped)


def port_outages(ledger, node: str, port: str) -> list[tuple[datetime, datetime | None]]:
    """The outages kept for one port, oldest first: (went down, came back up or None while down)."""
    o = schema.ib_port_outages.c
    with ledger._read() as conn:  # noqa: SLF001 - the ledger's own read transaction
        return [(r.started_at, r.ended_at) for r in conn.execute(
            select(o.started_at, o.ended_at).where(o.node == node, o.port == port).order_by(o.started_at))]


__all__ = ["IbFold", "fold_port_alert", "port_outages"]
