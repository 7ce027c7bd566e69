#!/usr/bin/env python3
"""Where a test run's time and CPU went: the record tests/conftest.py writes (docs/testing.md).

    scripts/test-report.py [RECORD ...] [--top N]

RECORD: the merged JSON (default .pytest_cache/d/remedy/cpu.json, or $REMEDY_TEST_CPU_JSON), or its `.parts`
directory from a run cut short (one JSON-lines file per pytest process). Several records (e.g. one per tier) are
added up. Prints the top N tests by CPU and by wall, each tier's CPU, the processes and the long-lived servers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def load(path: Path) -> dict:
    if path.is_dir():
        merged: dict = {"tests": [], "servers": [], "processes": []}
        for part in sorted(path.glob("*.jsonl")):
            for line in part.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                merged[{"test": "tests", "server": "servers", "process": "processes"}[rec.pop("kind")]].append(rec)
        return merged
    return json.loads(path.read_text())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*", type=Path)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    paths = args.records or [Path(os.environ.get("REMEDY_TEST_CPU_JSON", ".pytest_cache/d/remedy/cpu.json"))]
    tests, servers, processes = [], [], []
    for path in paths:
        if not path.exists():
            print(f"test-report: no record at {path} (run pytest first)", file=sys.stderr)
            return 2
        rec = load(path)
        tests += rec["tests"]
        servers += rec["servers"]
        processes += rec["processes"]

    def cpu(t: dict) -> float:
        return t["cpu"] + t["children"] + t.get("servers", 0.0)

    def table(title: str, rows: list[dict]) -> None:
        print(f"\n{title}")
        print(f"{'CPU s':>8} {'self':>7} {'child':>7} {'server':>7} {'wall s':>8}  {'tier':7} test")
        for t in rows:
            print(f"{cpu(t):8.1f} {t['cpu']:7.1f} {t['children']:7.1f} {t.get('servers', 0.0):7.1f} {t['wall']:8.1f}  "
                  f"{t['tier']:7} {t['nodeid']}")

    table(f"top {args.top} tests by CPU (self: the pytest process; child: processes it started and reaped; server: "
          "what the session's servers used meanwhile, e.g. the Prefect harness running its flows)",
          sorted(tests, key=cpu, reverse=True)[:args.top])
    table(f"top {args.top} tests by wall", sorted(tests, key=lambda t: t["wall"], reverse=True)[:args.top])

    print("\nby tier")
    print(f"{'tier':8} {'tests':>6} {'CPU s':>9} {'wall s':>9}  (wall summed over tests; workers overlap)")
    tiers = sorted({t["tier"] for t in tests})
    for tier in tiers:
        mine = [t for t in tests if t["tier"] == tier and not t["nodeid"].startswith("(")]
        every = [t for t in tests if t["tier"] == tier]
        print(f"{tier:8} {len(mine):6d} {sum(map(cpu, every)):9.1f} {sum(t['wall'] for t in every):9.1f}")

    in_tests = sum(map(cpu, tests))
    proc_cpu = sum(p["cpu"] + p["children"] for p in processes)
    detached = sum(s["cpu"] for s in servers if s["detached"])
    print("\nprocesses (pytest controller and workers)")
    for p in processes:
        load_avg = " ".join(f"{x:.1f}" for x in p.get("load", []))
        print(f"  {p['worker']:6} wall {p['wall']:8.1f} s  CPU {p['cpu']:8.1f} s + children {p['children']:8.1f} s"
              f"  load at end {load_avg}")
    print("\nlong-lived servers, CPU at the session's end (child: started by the pytest process and counted in its "
          "children at teardown; detached: counted only here)")
    for s in sorted(servers, key=lambda s: s["cpu"], reverse=True):
        print(f"  {s['cpu']:8.1f} s  {s['worker']:6} {'detached' if s['detached'] else 'child   '} {s['name']}")
    print(f"\nCPU in all: {proc_cpu + detached:.1f} s = pytest processes and their children {proc_cpu:.1f} s"
          f" + detached servers {detached:.1f} s; of it in tests (setup+call+teardown) {in_tests:.1f} s,"
          f" start-up and collection {proc_cpu + detached - in_tests:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
