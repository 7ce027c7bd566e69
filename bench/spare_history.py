"""select_spare's cleanest-record read, inside the breaker lock (every decision that spends a spare waits on it):
each ready spare's failures in the lemon lookback window. Before: every incident of the window read and counted in
Python; now: one grouped query over the candidate spares (Ledger.fault_counts). Same ledger, same run.

    .venv/bin/python bench/spare_history.py [--incidents 2000,20000] [--spares 40] [--repeats 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from remedy.domain.model import Incident, is_fault
from remedy.ledger import Ledger

NODES = 1000
LOOKBACK_DAYS = 73  # lemon.lookback_days' default


def ledger_with(n: int, workdir: str) -> Ledger:
    led = Ledger(f"sqlite:///{workdir}/ledger-{n}.db")
    led.migrate()
    now, rng = datetime.now(timezone.utc), random.Random(n)
    for _ in range(n):
        at = now - timedelta(minutes=rng.uniform(0, LOOKBACK_DAYS * 24 * 60))
        led.open_incident(Incident(node=f"gpu{rng.randrange(NODES):04d}", signal="xid", xid=79, gpu=rng.randrange(8),
                                   first_seen=at, last_seen=at), window_seconds=600)
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
    with tempfile.TemporaryDirectory() as work:
        for n in (int(x) for x in args.incidents.split(",")):
            led = ledger_with(n, work)
            since = datetime.now(timezone.utc) - timedelta(days=LOOKBACK_DAYS)
            before = Counter(i.node for i in led.incidents(since=since) if is_fault(i))
            now = led.fault_counts(spares, since)
            assert all(before.get(s, 0) == now.get(s, 0) for s in spares), "the two reads disagree"
            old_ms = median_ms(lambda: Counter(i.node for i in led.incidents(since=since) if is_fault(i)),
                               args.repeats)
            new_ms = median_ms(lambda: led.fault_counts(spares, since), args.repeats)
            print(f"| {n:,} | {len(spares)} | {old_ms:.1f} ms | {new_ms:.2f} ms | {old_ms / new_ms:.0f}× |")
            led.close()


if __name__ == "__main__":
    main()
