"""Simulator + Kubernetes adapter at fleet scale: 2,048 GPU nodes.

Measures, through the official client over HTTP: listing all GPU nodes (target < 1 s), cordoning 100 nodes,
draining 100 nodes (30 s grace period scaled to 0.3 s by the simulator's time scale). Medians over repeats; the
baseline is a bare `GET /version` round trip measured in the same run.

    .venv/bin/python bench/sim_scale.py [--nodes 2048] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.config import load_settings
from remedy.sim.cluster import build_cluster
from remedy.sim.server import SimServer


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()

    t = time.perf_counter()
    cluster = build_cluster(nodes=args.nodes, spares=max(3, args.nodes // 20), time_scale=0.01)
    build_s = time.perf_counter() - t
    with SimServer(cluster) as sim:
        settings = load_settings(cluster={"simulator_url": sim.url})
        k = KubernetesCluster(settings)
        from kubernetes import client as k8s

        version = k8s.VersionApi(k.api)
        baseline = timed(version.get_code, args.repeat * 4)  # one small request through the same client
        nodes = k.list_gpu_nodes()
        assert len(nodes) == args.nodes, len(nodes)
        listing = timed(k.list_gpu_nodes, args.repeat)
        active = [n.name for n in nodes if n.state and n.state.value == "active"][: args.batch]

        t = time.perf_counter()
        per_cordon = timed_each(lambda name: k.cordon(name, reason="bench", by="bench"), active)
        cordon_total = time.perf_counter() - t

        t = time.perf_counter()
        per_drain = timed_each(lambda name: k.drain(name, grace_period_seconds=30, deadline_seconds=30), active)
        drain_total = time.perf_counter() - t

    rows = [
        ("build simulated cluster", build_s, None, 1),
        ("GET /version via client (baseline)", statistics.median(baseline), None, len(baseline)),
        (f"list {args.nodes} GPU nodes", statistics.median(listing), statistics.median(listing) / statistics.median(baseline), args.repeat),
        (f"cordon 1 node (median of {len(active)})", statistics.median(per_cordon), statistics.median(per_cordon) / statistics.median(baseline), len(active)),
        (f"cordon {len(active)} nodes (total)", cordon_total, None, 1),
        (f"drain 1 node incl. 0.3 s grace (median of {len(active)})", statistics.median(per_drain), None, len(active)),
        (f"drain {len(active)} nodes (total)", drain_total, None, 1),
    ]
    print(f"\nsim_scale: {args.nodes} nodes × 8 GPUs, official kubernetes client over HTTP\n")
    print(f"{'measurement':<48}{'median s':>12}{'× baseline':>12}{'n':>6}")
    for name, sec, ratio, n in rows:
        print(f"{name:<48}{sec:>12.4f}{(f'{ratio:.0f}' if ratio else ''):>12}{n:>6}")
    verdict = "OK" if statistics.median(listing) < 1.0 else "OVER TARGET"
    print(f"\nlisting target < 1 s: {verdict}")


def timed_each(fn, items) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t)
    return out


if __name__ == "__main__":
    main()
