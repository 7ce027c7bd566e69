"""The early-warning scan's domain half (remedy.warn.scan.scan) at fleet size: what one `warning-scan` run spends
after Prometheus has answered. Inputs as the flow reads them by default: 5 peer metrics at 30-s steps and one
InfiniBand port per node at 5-s steps over the 60-min window; every node healthy (the common case), plus one run
with 1 % of nodes planted hot and 1 % with a port down 10 s, to show the findings cost nothing extra.

    .venv/bin/python bench/warning_scan.py [--nodes 125,1000,2048] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from remedy.settings.lemon import EarlyWarningSettings
from remedy.warn.scan import ScanInputs, scan

T0 = datetime(2026, 11, 27, tzinfo=UTC)


def inputs(n: int, planted: bool, seed: int = 0) -> ScanInputs:
    s = EarlyWarningSettings()
    window = timedelta(minutes=s.scan.window_minutes)
    nodes = [f"gpu{i:04d}" for i in range(n)]
    ts = pd.date_range(T0, T0 + window, freq=f"{s.scan.step_seconds:g}s", inclusive="left")
    rng = np.random.default_rng(seed)
    hot = set(nodes[:: 100]) if planted else set()
    peers = {}
    for metric in s.scan.peer_queries:
        values = 76 + rng.normal(0, 1, (n, len(ts)))
        for i, node in enumerate(nodes):
            if node in hot:
                values[i, len(ts) // 2:] += 30
        peers[metric] = pd.DataFrame({"Hostname": np.repeat(nodes, len(ts)), "timestamp": np.tile(ts, n),
                                      "value": values.ravel()})
    ib_ts = pd.date_range(T0, T0 + window, freq=f"{s.scan.ib_step_seconds:g}s", inclusive="left")
    state = np.full((n, len(ib_ts)), 4.0)
    if planted:
        state[1::100, 100:102] = 1.0  # 10 s down
    ib = pd.DataFrame({"instance": np.repeat([f"{x}:9100" for x in nodes], len(ib_ts)), "device": "mlx5_0",
                       "port": "1", "timestamp": np.tile(ib_ts, n), "value": state.ravel()})
    return ScanInputs("llm-pretrain", nodes, peers, ib_states=ib)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="125,1000,2048")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    now = T0 + timedelta(minutes=EarlyWarningSettings().scan.window_minutes)
    print(f"{'nodes':>6} {'planted':>8} {'rows':>10} {'median s':>9} {'findings':>9}")
    for n in (int(x) for x in args.nodes.split(",")):
        for planted in (False, True):
            data = inputs(n, planted)
            rows = sum(len(f) for f in data.peer_series.values()) + len(data.ib_states)
            times, found = [], 0
            for _ in range(args.repeats):
                t = time.perf_counter()
                found = len(scan(data, now).findings)
                times.append(time.perf_counter() - t)
            print(f"{n:>6} {'yes' if planted else 'no':>8} {rows:>10,} {statistics.median(times):>9.2f} {found:>9}")


if __name__ == "__main__":
    main()
