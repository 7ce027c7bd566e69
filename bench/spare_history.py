"""select_spare's cleanest-record read, inside the breaker lock (every decision that spends a spare waits on it):
each ready spare's failures in the lemon lookback window. Before: every incident of the window read and counted in
Python; now: one grouped query over the candidate spares (Ledger.fault_counts). Same ledger, same run.

A second table: triage's read of a detector's record on each early warning (remedy.warn.record). Before: every
incident of the window, filtered in Python; now: the warnings and the warned nodes' failures (Ledger.warning_history).
One incident in 20 is an early warning.

    .venv/bin/python bench/spare_history.py [--incidents 2000,20000] [--spares 40] [--repeats 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from remedy.detect.signals import is_early_warning
from remedy.domain.model import Incident, IncidentStatus, is_fault
from remedy.ledger import Ledger

NODES = 1000
LOOKBACK_DAYS = 73  # lemon.lookback_days' default


def ledger_with(n: int, workdir: str) -> Ledger:
    led = Ledger(f"sqlite:///{workdir}/ledger-{n}.db")
    led.migrate()
    now, rng = datetime.now(UTC), random.Random(n)
    for k in range(n):
        at = now - timedelta(minutes=rng.uniform(0, LOOKBACK_DAYS * 24 * 60))
        node = f"gpu{rng.randrange(NODES):04d}"
        if k % 20 == 0:
            led.open_incident(Incident(node=node, signal="early-warning", first_seen=at, last_seen=at,
                                       evidence={"labels": {"detector": "thermal"}}), window_seconds=600)
        else:
            led.open_incident(Incident(node=node, signal="xid", xid=79, gpu=rng.randrange(8), first_seen=at,
                                       last_seen=at), window_seconds=600)
    return led


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--incidents", default="2000,20000")
    p.add_argument("--spares", type=int, default=40)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    spares = [f"gpu{k:04d}" for k in range(args.spares)]
    print(f"| incidents in {LOOKBACK_DAYS} d ({NODES} nodes) | spares | read all, count (before) | grouped query (now) "
          "| ratio |")
    print("|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in (int(x) for x in args.incidents.split(",")):
            led = ledger_with(n, work)
            since = datetime.now(UTC) - timedelta(days=LOOKBACK_DAYS)
            before = Counter(i.node for i in led.incidents(since=since) if is_fault(i))
            now = led.fault_counts(spares, since)
            assert all(before.get(s, 0) == now.get(s, 0) for s in spares), "the two reads disagree"
            old_ms = median_ms(lambda led=led, since=since: Counter(
                i.node for i in led.incidents(since=since) if is_fault(i)), args.repeats)
            new_ms = median_ms(lambda led=led, since=since: led.fault_counts(spares, since), args.repeats)
            print(f"| {n:,} | {len(spares)} | {old_ms:.1f} ms | {new_ms:.2f} ms | {old_ms / new_ms:.0f}× |")
            rows.append((n, *warning_history_ms(led, since, args.repeats)))
            led.close()
    print()
    print(f"| incidents in {LOOKBACK_DAYS} d | early warnings | read all, filter (before) | warning_history (now) | ratio |")
    print("|---|---|---|---|---|")
    for n, warnings, old_ms, new_ms in rows:
        print(f"| {n:,} | {warnings:,} | {old_ms:.1f} ms | {new_ms:.1f} ms | {old_ms / new_ms:.1f}× |")


def warning_history_ms(led: Ledger, since: datetime, repeats: int) -> tuple[int, float, float]:
    """(warnings, before ms, now ms): what tasks.triage._detector_record read before, and reads now."""
    def before():
        warnings, failures = [], {}
        for i in led.incidents(since=since):
            if is_early_warning(i.signal, i.xid):
                warnings.append(i)
            elif is_fault(i) and i.status is not IncidentStatus.IGNORED:
                failures.setdefault(i.node, []).append(i.first_seen)
        return warnings, failures

    old_w, old_f = before()
    new_w, new_f = led.warning_history(since)
    warned = {w.node for w in old_w}
    assert [w.id for w in old_w] == [w.id for w in new_w], "the two reads disagree on the warnings"
    assert {k: v for k, v in old_f.items() if k in warned} == new_f, "the two reads disagree on the failures"
    return len(new_w), median_ms(before, repeats), median_ms(lambda: led.warning_history(since), repeats)


if __name__ == "__main__":
    main()
