"""Prefect on SQLite under concurrent writers: plain `prefect server start` against remedy's server (one API writer at
a time + 503 replay, remedy/platform/prefect_server.py). Prints one table.

Each operation is what starting a flow run costs the API: create the run, set it RUNNING, create a task run, sent
through Prefect's own client (`SyncPrefectClient`, so its 503 back-off of 2, 4, 8 … s applies), from N threads at
once. Latency is per operation; the ratio is remedy's server against plain in the same run.

    .venv/bin/python bench/prefect_sqlite_writes.py [--ops 200] [--threads 4 16]

Measured here 2026-11-22 (2 shared cores, quiet machine), 200 operations:
    4 threads:  plain p50 74 ms / p95 2.80 s / max 16.0 s;  remedy p50 169 ms / p95 248 ms / max 601 ms
    16 threads: plain p50 78 ms / p95 14.4 s / max 62.6 s;  remedy p50 873 ms / p95 1.12 s / max 1.35 s
Plain's median is lower because the writers that lost a race sleep on the client and leave the server to the
winners; its tail is the 2 s back-off. Remedy's server takes the writes in turn: no loser, no sleep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def start_runs(api: str, threads: int, ops: int) -> list[float]:
    from prefect.client.orchestration import SyncPrefectClient

    with SyncPrefectClient(api) as setup:
        flow_id = setup.request("POST", "/flows/", json={"name": "bench-writes"}).json()["id"]

    def one(i: int) -> float:
        with SyncPrefectClient(api) as client:
            t = time.monotonic()
            run = client.request("POST", "/flow_runs/", json={
                "flow_id": flow_id, "name": f"bench-{i}", "state": {"type": "PENDING"}}).json()["id"]
            client.request("POST", "/flow_runs/{id}/set_state", path_params={"id": run},
                           json={"state": {"type": "RUNNING"}})
            client.request("POST", "/task_runs/", json={
                "flow_run_id": run, "task_key": "bench", "dynamic_key": "0", "name": "bench",
                "state": {"type": "PENDING"}})
            return time.monotonic() - t

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(ops)))


def main() -> int:
    from tests.fixtures.prefect import prefect_server_process

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--threads", type=int, nargs="+", default=[4, 16])
    args = ap.parse_args()
    rows = []
    for threads in args.threads:
        medians = {}
        for name, plain in (("prefect server start", True), ("remedy server", False)):
            home = Path(tempfile.mkdtemp(prefix="bench-sqlite-writes-"))
            with prefect_server_process(home, plain=plain) as api:
                t0 = time.monotonic()
                lat = start_runs(api, threads, args.ops)
                wall = time.monotonic() - t0
            medians[name] = (statistics.median(lat), pct(lat, 95), max(lat))
            rows.append((f"{name}, {threads} threads", len(lat), *medians[name], wall))
        (m0, p0, x0), (m1, p1, x1) = medians.values()
        rows.append((f"    remedy / plain, {threads} threads", args.ops, m1 / m0, p1 / p0, x1 / x0, float("nan")))
    print(f"\n{'Prefect on SQLite: start a run (3 API writes)':<46}{'n':>5}{'median':>10}{'p95':>10}{'max':>10}{'wall':>9}")
    for name, n, med, p95, worst, wall in rows:
        if name.lstrip().startswith("remedy / plain"):
            print(f"{name:<46}{n:>5}{med:>9.2f}×{p95:>9.2f}×{worst:>9.2f}×")
        else:
            print(f"{name:<46}{n:>5}{med * 1000:>8.0f}ms{p95 * 1000:>8.0f}ms{worst * 1000:>8.0f}ms{wall:>8.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
