"""Benchmark: parse + analyse mountstats for a 2,048-node fleet (target ≤ 5 s for the whole audit).

Each node has three NFS mounts (NFSv4.1 checkpoints with nconnect=4, NFSv4.2 data, NFSv3 home), two
snapshots 30 s apart. Prints the median of N runs per stage, the per-node cost, and the ratio to a baseline
measured in the same run (splitting the same text into fields: the floor any parser pays).

    .venv/bin/python bench/nfs_audit.py [--nodes 2048] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from remedy.audit.delta import diff_mountstats
from remedy.audit.fleet import audit_fleet
from remedy.audit.frames import ops_frame
from remedy.audit.mountstats import parse_mountstats
from remedy.audit.rpc import audit_mount
from remedy.audit.synth import MountSpec, OpCounters, XprtCounters, render_mountstats


def _ops(rng: random.Random) -> dict[str, OpCounters]:
    out = {}
    for name in ("READ", "WRITE", "COMMIT", "GETATTR", "LOOKUP", "ACCESS", "OPEN", "CLOSE", "SEQUENCE"):
        n = rng.randint(1, 1000)
        q, r = n * rng.randint(0, 1500), n * rng.randint(1, 130)
        out[name] = OpCounters(n, n * 300, n * 200, q, r, q + r)
    return out


def _grow(ops: dict[str, OpCounters], factor: int) -> dict[str, OpCounters]:
    return {k: OpCounters(*(v * factor for v in vars(o).values())) for k, o in ops.items()}


def _node(rng: random.Random, i: int) -> tuple[str, str]:
    """(before, after) for one node: the later snapshot has every counter doubled, 30 s later."""
    others = [("proc", "/proc", "proc"), ("sysfs", "/sys", "sysfs"), ("tmpfs", "/dev/shm", "tmpfs")]
    texts = []
    ops = [_ops(rng) for _ in range(3)]
    for age, k in ((1000, 1), (1030, 2)):
        specs = [
            MountSpec(f"10.0.0.{i % 250}:/ckpt", "/ckpt", vers="4.1", age=age, ops=_grow(ops[0], k),
                      xprts=[XprtCounters(port=700 + c, sends=1000 * k, req_u=50000 * k, bklog_u=9000 * k,
                                          max_slots=128) for c in range(4)]),
            MountSpec("10.0.1.1:/data", "/data", vers="4.2", age=age, ops=_grow(ops[1], k),
                      xprts=[XprtCounters(sends=500 * k, req_u=1000 * k, max_slots=64)]),
            MountSpec("10.0.2.1:/home", "/home", vers="3", age=age, ops=_grow(ops[2], k),
                      xprts=[XprtCounters(sends=100 * k, req_u=100 * k, max_slots=16)]),
        ]  # fmt: skip
        texts.append(render_mountstats(specs, others))
    return texts[0], texts[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    rng = random.Random(7)
    pairs = [_node(rng, i) for i in range(args.nodes)]
    before, after = [b for b, _ in pairs], [a for _, a in pairs]
    nbytes = sum(map(len, before)) + sum(map(len, after))

    def baseline():
        for text in before + after:
            for line in text.splitlines():
                line.split()

    def parse():
        return [(parse_mountstats(b, f"n{i}"), parse_mountstats(a, f"n{i}")) for i, (b, a) in enumerate(zip(before, after))]

    parsed = parse()

    def analyse():
        return [audit_mount(d, node=f"n{i}") for i, (b, a) in enumerate(parsed) for d in diff_mountstats(b, a)]

    audits = analyse()

    def frame():
        return ops_frame(audits)

    def whole():
        audits, errors = audit_fleet((f"n{i}", b, a) for i, (b, a) in enumerate(zip(before, after)))
        assert not errors and len(audits) == 3 * args.nodes
        return audits

    frame()  # pay pandera's import outside the timings
    stages = [("baseline: split lines+fields", baseline), ("parse (2 snapshots)", parse),
              ("diff + analyse", analyse), ("ops DataFrame + pandera", frame),
              ("whole audit: audit_fleet()", whole)]  # fmt: skip
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name, fn in stages:
        w, c = [], []
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            w.append(time.perf_counter() - t0)
            c.append(time.process_time() - c0)
        wall[name], cpu[name] = statistics.median(w), statistics.median(c)

    # The machine is shared: wall time includes waiting for a core, CPU time does not. Both are printed.
    print(f"nodes={args.nodes} mounts={len(audits)} text={nbytes / 1e6:.1f} MB runs={args.runs} (medians)")
    print(f"{'stage':<30} {'wall s':>8} {'cpu s':>8} {'cpu µs/node':>12} {'cpu × baseline':>15}")
    base = cpu["baseline: split lines+fields"]
    for name in wall:
        print(f"{name:<30} {wall[name]:>8.3f} {cpu[name]:>8.3f} {cpu[name] / args.nodes * 1e6:>12.0f} "
              f"{cpu[name] / base:>15.1f}")
    for label, d in (("wall", wall), ("cpu", cpu)):
        total = d["whole audit: audit_fleet()"] + d["ops DataFrame + pandera"]
        print(f"target ({label}): audit_fleet + frame ≤ 5 s → {total:.2f} s {'OK' if total <= 5.0 else 'OVER'}")


if __name__ == "__main__":
    main()
