"""Where an NFS request's time goes, and what to change: the 'bandwidth paradox' check (seed 002 §4.2.5).

Per op, the kernel sums three times per request: queue (task start → transmit, i.e. waiting for one of the
transport's RPC slots), rtt (transmit → reply: network + server) and execute (start → done ≈ queue + rtt).
Seed 002 Table 13: WRITE 1,621 ms = 1,495 ms slot wait (92.2%) + 126 ms network+server while the 200 Gbps
link was 1.4% used. When most of the latency is slot wait and the link is idle, more bandwidth cannot help;
more slots, more connections or fewer simultaneous writers can.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from remedy.audit.delta import MountDelta
from remedy.settings.audit import NfsAuditSettings

DATA_OPS = ("READ", "WRITE", "COMMIT")


class OpLatency(NamedTuple):
    """One op over the interval. Per-request times are None when there were no requests."""

    op: str
    ops: int
    rate_per_s: float
    slot_wait_ms: float | None  # queue_ms / ops
    network_server_ms: float | None  # rtt_ms / ops
    execute_ms: float | None  # execute_ms / ops
    slot_wait_share: float | None  # queue / max(execute, queue + rtt)
    bytes_per_s: float
    timeouts: int
    errors: int | None


@dataclass(frozen=True, slots=True)
class TransportLoad:
    """All `xprt:` lines of one mount together (nconnect gives several)."""

    protocol: str
    connections: int
    sends_per_s: float
    avg_backlog: float | None  # requests waiting for a slot, averaged over sends (bklog_u / sends)
    avg_in_flight: float | None  # requests holding a slot per connection, averaged over sends (req_u / sends)
    max_slots_seen: int | None  # high-water mark of slots in use on the busiest connection
    slot_limit: int
    slot_table_full: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # rpc-slot-starvation | link-saturated | slow-server | healthy | idle
    headline: str
    remedies: tuple[str, ...] = ()


@dataclass(slots=True)
class MountAudit:
    node: str
    device: str
    mountpoint: str
    nfs_version: str
    nconnect: int
    interval_seconds: float
    lifetime: bool
    ops: list[OpLatency]
    transport: TransportLoad
    bytes_per_s: float
    link_utilization: float
    verdict: Verdict
    wrapped: list[str] = field(default_factory=list)

    def op(self, name: str) -> OpLatency | None:
        return next((o for o in self.ops if o.op == name), None)

    def to_dict(self) -> dict:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f not in ("ops", "transport", "verdict")}
        out["ops"] = [o._asdict() for o in self.ops]
        out["transport"] = asdict(self.transport)
        out["verdict"] = asdict(self.verdict)
        return out


def _per(num: float, den: float) -> float | None:
    return num / den if den else None


_idle: dict[tuple[str, int | None], OpLatency] = {}  # shared records of ops with no requests


def op_latencies(delta: MountDelta) -> list[OpLatency]:
    out = []
    secs = delta.interval_seconds
    for s in delta.ops.values():
        if not (s.ops or s.bytes_sent or s.bytes_recv or s.timeouts):
            key = (s.op, s.errors)
            idle = _idle.get(key)
            if idle is None:
                idle = _idle[key] = OpLatency(s.op, 0, 0.0, None, None, None, None, 0.0, 0, s.errors)
            out.append(idle)
            continue
        n = s.ops
        # execute ≥ queue + rtt for a well-formed counter set; taking the larger keeps the share ≤ 1 either way.
        total = max(s.execute_ms, s.queue_ms + s.rtt_ms)
        out.append(
            OpLatency(
                s.op,
                n,
                n / secs,
                s.queue_ms / n if n else None,
                s.rtt_ms / n if n else None,
                s.execute_ms / n if n else None,
                s.queue_ms / total if n and total else (0.0 if n else None),
                (s.bytes_sent + s.bytes_recv) / secs,
                s.timeouts,
                s.errors,
            )
        )
    return out


def transport_load(delta: MountDelta, slot_limit: int) -> TransportLoad:
    xs = delta.transports
    sends = sum(x.sends for x in xs)
    maxes = [x.max_slots for x in xs if x.max_slots is not None]
    max_seen = max(maxes) if maxes else None
    return TransportLoad(
        protocol="+".join(sorted({x.protocol for x in xs})),
        connections=len(xs),
        sends_per_s=sends / delta.interval_seconds,
        avg_backlog=_per(sum(x.bklog_u for x in xs), sends),
        avg_in_flight=_per(sum(x.req_u for x in xs), sends),
        max_slots_seen=max_seen,
        slot_limit=slot_limit,
        slot_table_full=max_seen is not None and max_seen >= slot_limit,
    )


def _remedies(op: str, audit_version: str, transport: TransportLoad, nconnect: int) -> tuple[str, ...]:
    used = (
        f"the busiest connection used {transport.max_slots_seen} of {transport.slot_limit} slots"
        if transport.max_slots_seen is not None
        else f"limit {transport.slot_limit}"
    )
    sysctl = "sunrpc.rdma_slot_table_entries" if transport.protocol == "rdma" else "sunrpc.tcp_max_slot_table_entries"
    out = [f"raise the client RPC slot limit: sysctl {sysctl} ({used}); remount to apply"]
    if audit_version.startswith("4.") and audit_version != "4.0":
        out.append(
            "raise NFSv4.1 session slots: client module option nfs.max_session_slots and the server's session slot count"
        )
    if nconnect == 0:  # unknown (Prometheus does not export the mount options)
        out.append("mount with nconnect (up to 16) so requests spread over more connections, each with its own slots")
    elif nconnect < 16:
        out.append(
            f"mount with nconnect={min(16, max(2, nconnect * 2))} (now {nconnect}) so requests spread over more "
            "connections, each with its own slot table"
        )
    if op == "READ":
        out.append("raise readahead (/sys/class/bdi/<dev>/read_ahead_kb) so each READ carries more data")
    if op in ("WRITE", "COMMIT"):
        out.append("stagger checkpoint writers (write shards in waves, not all ranks at once) so the burst fits the slots")
    return tuple(out)


def _pct(x: float) -> str:
    if 0 < x < 0.0001:
        return "<0.01%"
    return f"{x:.2%}" if x < 0.01 else f"{x:.1%}"


def judge(
    ops: list[OpLatency], transport: TransportLoad, util: float, nfs_version: str, nconnect: int, s: NfsAuditSettings
) -> Verdict:
    busy = [o for o in ops if o.ops >= s.min_ops and o.execute_ms is not None]
    if not busy:
        return Verdict("idle", "idle: no NFS requests in the interval")
    # The op that cost the most request-time is the one the workload waits on.
    worst = max(busy, key=lambda o: o.ops * (o.execute_ms or 0.0))
    share = worst.slot_wait_share or 0.0
    link = f"the storage link is {_pct(util)} used"
    if share >= s.slot_wait_share_starved:
        tail = "; raising bandwidth will not help" if util < s.link_used_low else ""
        return Verdict(
            "rpc-slot-starvation",
            f"RPC slot starvation: {share:.0%} of {worst.op} latency is waiting for a slot "
            f"({worst.slot_wait_ms:,.1f} of {worst.execute_ms:,.1f} ms per request); {link}{tail}",
            _remedies(worst.op, nfs_version, transport, nconnect),
        )
    if util >= s.link_used_saturated:
        return Verdict(
            "link-saturated",
            f"storage link saturated: {_pct(util)} of {s.link_gbps:g} Gbps used; {worst.op} requests are not slot-bound",
            ("add storage bandwidth or spread the I/O over time (stagger checkpoint writers)",),
        )
    if (worst.network_server_ms or 0.0) >= s.slow_rtt_ms:
        return Verdict(
            "slow-server",
            f"slow NFS server or network: {worst.op} spends {worst.network_server_ms:,.1f} ms per request after "
            f"sending ({1 - share:.0%} of its latency); {link}",
            ("look at the NFS server's load and disk latency", "check the storage network for drops and retransmits"),
        )
    return Verdict(
        "healthy",
        f"NFS healthy: {worst.op} takes {worst.execute_ms:,.1f} ms per request, {share:.0%} of it waiting for a "
        f"slot; {link}",
    )


def audit_mount(delta: MountDelta, settings: NfsAuditSettings | None = None, node: str = "") -> MountAudit:
    s = settings or NfsAuditSettings()
    ops = op_latencies(delta)
    transport = transport_load(delta, s.rpc_slot_limit)
    bytes_per_s = sum(o.bytes_per_s for o in ops)
    util = bytes_per_s / (s.link_gbps * 1e9 / 8)
    m = delta.mount
    return MountAudit(
        node=node,
        device=m.device,
        mountpoint=m.mountpoint,
        nfs_version=m.nfs_version,
        nconnect=m.nconnect,
        interval_seconds=delta.interval_seconds,
        lifetime=delta.lifetime,
        ops=ops,
        transport=transport,
        bytes_per_s=bytes_per_s,
        link_utilization=util,
        verdict=judge(ops, transport, util, m.nfs_version, m.nconnect, s),
        wrapped=list(delta.wrapped),
    )


_SEVERITY = {"rpc-slot-starvation": 4, "link-saturated": 3, "slow-server": 2, "healthy": 1, "idle": 0}


def worst_mount(audits: list[MountAudit]) -> MountAudit:
    """The mount an operator should look at first."""
    return max(audits, key=lambda a: (_SEVERITY[a.verdict.kind], a.bytes_per_s))
