"""Burn-in at fleet scale: 64 nodes burned in concurrently vs one node, on the cluster simulator.

Runs the real `burn_in` flow (real Prefect server from the test harness, real Kubernetes client over HTTP to the
simulator, SQLite ledger). The baseline is one node burned in alone in the same run; the target is a 64-node
batch taking about as long as its slowest node, i.e. a ratio far below 64. Medians over repeats.

    .venv/bin/python bench/burn_in.py [--nodes 64] [--level standard] [--time-scale 0.05] [--repeat 3]

Seen here (2 shared cores, load ~9, Nov 2026): 1 node 41.9 s (39.4 s of it is the Jobs' simulated run time),
64 nodes 64.5 s: ratio 1.54, 41.6x faster than one after another. The extra ~23 s is CPU on two shared cores:
64 worker threads polling their Jobs every 0.2 s, the simulator answering them in the same process, the
Kubernetes client's 16-connection pool (more threads than connections: connections are discarded and reopened),
and ~8 ledger writes plus one task run per node. Below time scale ~0.05 the scaled Job deadlines (a 60 s ib
deadline is 0.3 s at 0.005) expire under that load and healthy nodes fail: a simulator artefact.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # flows/ and tasks/ live at the repo root

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64, help="nodes in the concurrent batch")
    ap.add_argument("--level", default="standard", help="validation level (quick, standard, extended)")
    ap.add_argument("--time-scale", type=float, default=0.05,
                    help="real seconds per simulated second; Job deadlines (activeDeadlineSeconds) scale too, so "
                         "below ~0.05 a loaded machine fails healthy nodes on deadlines that are only ms long")
    ap.add_argument("--repeat", type=int, default=3, help="repeats of the one-node baseline")
    ap.add_argument("--batch-repeat", type=int, default=2, help="repeats of the batch")
    args = ap.parse_args()
    if args.nodes < 2:
        raise SystemExit("bench/burn_in.py: --nodes must be at least 2")

    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    from remedy.sim.cluster import build_cluster
    from remedy.sim.server import SimServer

    spares = 4
    cluster = build_cluster(nodes=args.nodes + 1 + spares, spares=spares, time_scale=args.time_scale,
                            training_job=False)
    with SimServer(cluster) as sim, tempfile.TemporaryDirectory() as tmp:
        os.environ["REMEDY_CLUSTER__MODE"] = "simulator"
        os.environ["REMEDY_CLUSTER__SIMULATOR_URL"] = sim.url
        os.environ["REMEDY_DB_URL"] = f"sqlite:///{tmp}/ledger.db"
        from remedy import runtime

        runtime.reset()
        names = sorted(n.name for n in runtime.cluster().list_gpu_nodes() if n.state and n.state.value == "active")
        one, batch = names[0], names[1 : args.nodes + 1]
        for n in [one, *batch]:  # brand-new nodes: no pool label yet
            runtime.cluster().set_labels(n, {"remedy.io/pool": None})

        t = time.perf_counter()
        with prefect_test_harness(server_startup_timeout=120), \
                temporary_settings(updates={"flows.heartbeat_frequency": None}):
            server_s = time.perf_counter() - t
            from flows.burn_in import burn_in

            def run(nodes: list[str]) -> float:
                t = time.perf_counter()
                out = burn_in(nodes=nodes, level=args.level)
                took = time.perf_counter() - t
                bad = {n: f"{r['status']}: {r.get('why', '')[:120]}" for n, r in out["nodes"].items()
                       if r["status"] != "spare"}
                if bad:
                    raise SystemExit(f"bench/burn_in.py: nodes did not pass: {bad}")
                return took

            run([one])  # warm-up: imports, first flow registration
            singles = [run([one]) for _ in range(args.repeat)]
            batches = [run(batch) for _ in range(args.batch_repeat)]

    from remedy.health import suite_for

    sim_seconds = _suite_sim_seconds(args.level)
    t1, tn = statistics.median(singles), statistics.median(batches)
    rows = [
        ("prefect test server start", server_s, ""),
        (f"1 node, {args.level} (baseline)", t1, "1.00"),
        (f"{args.nodes} nodes concurrently", tn, f"{tn / t1:.2f}"),
        (f"{args.nodes} nodes one after another (= {args.nodes} x baseline, estimate)", args.nodes * t1,
         f"{args.nodes:.2f}"),
    ]
    print(f"burn-in bench: level {args.level} ({len([s for s in suite_for(args.level) if not s.multi_node])} "
          f"single-node checks, {sim_seconds:g} simulated s = {sim_seconds * args.time_scale:.2f} real s of Jobs), "
          f"time scale {args.time_scale}, repeats {args.repeat}/{args.batch_repeat}")
    print(f"{'case':<62} {'median s':>9} {'vs 1 node':>10}")
    for name, secs, ratio in rows:
        print(f"{name:<62} {secs:>9.2f} {ratio:>10}")
    print(f"singles: {', '.join(f'{s:.2f}' for s in singles)}; batches: {', '.join(f'{s:.2f}' for s in batches)}")
    print(f"speed-up over serial: {args.nodes * t1 / tn:.1f}x")


def _suite_sim_seconds(level: str) -> float:
    """Simulated run time of the level's single-node Jobs (remedy.sim.checks' durations)."""
    from remedy.health import suite_for
    from remedy.settings.health import HealthCheckSettings

    per = {"nvml-probe": 5.0, "ib": 2.0, "fio": 60.0, "nccl": 60.0, "stress": HealthCheckSettings().stress_seconds}
    dcgm = {"dcgm-diag-r1": 60.0, "dcgm-diag-r2": 600.0, "dcgm-diag-r3": 1800.0, "dcgm-diag-r4": 5400.0}
    return sum(dcgm.get(s.id, per.get(s.check, 0.0)) for s in suite_for(level) if not s.multi_node)


if __name__ == "__main__":
    main()
