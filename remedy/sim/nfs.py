"""Every simulated node's NFS checkpoint mount, as node_exporter's mountstats collector exports it.

Served at `/metrics/nfs` on the simulator, one scrape for the whole fleet: each series carries `instance="<node>"`,
so a Prometheus that scrapes it with `honor_labels: true` stores what it would store scraping node_exporter on every
node (relabelled to the node name). Names, labels and units are node_exporter 1.5's (`node_mountstats_nfs_*`:
seconds, bytes, counts; compared against the real exporter in tests/sim/test_nfs_metrics.py).

The counters grow with wall-clock time at a per-node rate: a node running the training job writes its checkpoint
shards, an idle one only checks attributes. Counters are accumulated (never recomputed from scratch), so a node that
turns starved (`remedy sim inject nfs-slot-starvation`) or goes idle keeps them monotonic, as the kernel's are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

EXPORT = "10.20.0.5:/ckpt"  # the checkpoint export every node mounts (nfs4.1 over TCP)
MOUNTADDR = EXPORT.split(":")[0]
MAX_SLOTS = 64  # sunrpc.tcp_max_slot_table_entries as most distributions ship it
WRITE_BYTES = 1 << 20  # wsize


@dataclass(frozen=True)
class OpRate:
    """Per second of wall-clock time: requests, and per request the kernel's three times (seconds) and bytes."""

    requests: float
    queue_s: float  # waiting for an RPC slot
    rtt_s: float  # network + server
    sent: int
    received: int

    @property
    def execute_s(self) -> float:
        return self.queue_s + self.rtt_s + 0.00005  # plus the client's own handling


# Healthy: WRITE waits ~0.05 ms for a slot and 2 ms on the wire. Starved: seed 002 Table 13's save, 1,495 ms waiting
# for one of the 64 slots and 126 ms on the wire (so raising slots, not the link, is the fix).
BUSY = {"WRITE": OpRate(20.0, 0.00005, 0.002, WRITE_BYTES + 200, 160),
        "GETATTR": OpRate(2.0, 0.00001, 0.0004, 180, 260)}
IDLE = {"WRITE": OpRate(0.0, 0.0, 0.0, 0, 0), "GETATTR": OpRate(0.5, 0.00001, 0.0004, 180, 260)}
STARVED = {"WRITE": OpRate(20.0, 1.495, 0.126, WRITE_BYTES + 200, 160), **{k: v for k, v in BUSY.items()
                                                                        if k != "WRITE"}}


@dataclass
class Counters:
    ops: dict[str, list[float]] = field(default_factory=dict)  # op -> [requests, queue, rtt, execute, sent, recv]
    sends: float = 0.0
    backlog: float = 0.0
    at: float = 0.0


def _advance(c: Counters, rates: dict[str, OpRate], now: float, starved: bool) -> None:
    dt = max(0.0, now - c.at)
    c.at = now
    for op, r in rates.items():
        row = c.ops.setdefault(op, [0.0] * 6)
        n = r.requests * dt
        for i, per in enumerate((1.0, r.queue_s, r.rtt_s, r.execute_s, r.sent, r.received)):
            row[i] += n * per
        c.sends += n
        # backlog_queue counts requests that found every slot taken: most of them when starved
        c.backlog += n * (0.9 if starved else 0.001) * (MAX_SLOTS if starved else 1)


def render(cluster: Cluster) -> str:
    """node_exporter's `node_mountstats_nfs_*` text for every node of the cluster (Prometheus text format 0.0.4)."""
    now = time.monotonic()
    with cluster.lock:
        store = cluster.nfs_counters
        rows: list[tuple[str, Counters]] = []
        for node in sorted(cluster.health):
            health = cluster.health[node]
            c = store.get(node)
            if c is None:
                c = store[node] = Counters(at=cluster.booted)
            busy = any(p["metadata"].get("namespace") == "training" and p.get("status", {}).get("phase") == "Running"
                       for p in cluster.index.on_node(node))
            starved = health.nfs_slot_starved
            rates = STARVED if starved else BUSY if busy else IDLE
            _advance(c, rates, now, starved)
            if node in cluster.rebooting or health.not_ready:  # a node that is down is not scraped
                continue
            rows.append((node, Counters({k: list(v) for k, v in c.ops.items()}, c.sends, c.backlog, c.at)))
    return _text(rows)


OP_METRICS = (  # (name, help, column of Counters.ops)
    ("requests_total", "Number of requests performed for a given operation.", 0),
    ("transmissions_total", "Number of times an actual RPC request has been transmitted for a given operation.", 0),
    ("queue_time_seconds_total", "Duration all requests spent queued for transmission for a given operation before "
     "they were sent, in seconds.", 1),
    ("response_time_seconds_total", "Duration all requests took to get a reply back after a request for a given "
     "operation was transmitted, in seconds.", 2),
    ("request_time_seconds_total", "Duration all requests took from when a request was enqueued to when it was "
     "completely handled for a given operation, in seconds.", 3),
    ("sent_bytes_total", "Number of bytes sent for a given operation, including RPC headers and payload.", 4),
    ("received_bytes_total", "Number of bytes received for a given operation, including RPC headers and payload.", 5),
)


def _text(rows: list[tuple[str, Counters]]) -> str:
    out: list[str] = []
    mount = f'export="{EXPORT}",mountaddr="{MOUNTADDR}",protocol="tcp"'
    for suffix, help_, col in OP_METRICS:
        name = f"node_mountstats_nfs_operations_{suffix}"
        out.append(f"# HELP {name} {help_}\n# TYPE {name} counter\n")
        for node, c in rows:
            for op in sorted(c.ops):
                value = c.ops[op][col]
                out.append(f'{name}{{instance="{node}",{mount},operation="{op}"}} '
                           f"{round(value) if col in (0, 4, 5) else round(value, 6)}\n")
    transport = (
        ("sends_total", "counter", "Number of RPC requests for this mount sent to the NFS server.",
         lambda c: round(c.sends)),
        ("receives_total", "counter", "Number of RPC responses for this mount received from the NFS server.",
         lambda c: round(c.sends)),
        ("backlog_queue_total", "counter", "Total number of items added to the RPC backlog queue.",
         lambda c: round(c.backlog)),
        ("maximum_rpc_slots", "gauge", "Maximum number of simultaneously active RPC requests ever used.",
         lambda c: MAX_SLOTS),
    )
    for suffix, kind, help_, value in transport:
        name = f"node_mountstats_nfs_transport_{suffix}"
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")
        out.extend(f'{name}{{instance="{node}",{mount}}} {value(c)}\n' for node, c in rows)
    return "".join(out)
