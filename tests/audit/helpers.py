"""Snapshots that encode seed 002 Table 13 through the kernel's counters (rendered by remedy.audit.synth)."""

from __future__ import annotations

from remedy.audit.synth import MountSpec, OpCounters, XprtCounters, render_mountstats

LINK_BYTES_PER_S = 200e9 / 8  # 200 Gbps RoCE per node (seed 002 §4.2.5)


def op(ops: int, slot_ms: float, net_ms: float, total_ms: float, sent: int = 0, recv: int = 0) -> OpCounters:
    return OpCounters(ops=ops, bytes_sent=sent, bytes_recv=recv, queue_ms=round(slot_ms * ops),
                      rtt_ms=round(net_ms * ops), execute_ms=round(total_ms * ops))  # fmt: skip


def base_spec(age: int, base_ops: int = 1000) -> MountSpec:
    """Counters accumulated before the interval: modest, healthy traffic."""
    return MountSpec(
        "10.20.0.5:/ckpt", "/ckpt", vers="4.1", age=age,
        ops={"WRITE": op(base_ops, 2, 5, 7, sent=base_ops << 20), "READ": op(base_ops, 1, 3, 4, recv=base_ops << 20),
             "GETATTR": op(base_ops // 2, 0, 1, 1)},
        xprts=[XprtCounters(sends=3 * base_ops, req_u=6 * base_ops, bklog_u=10 * base_ops, max_slots=128)],
    )  # fmt: skip


def add(a: OpCounters, b: OpCounters) -> OpCounters:
    return OpCounters(*(x + y for x, y in zip(vars(a).values(), vars(b).values())))


def table13_pair(kind: str, seconds: int = 30, base_ops: int = 1000) -> tuple[str, str]:
    """(before, after) texts: one 30 s sample of a save (WRITE) or a load (READ) as the seed measured it."""
    before = base_spec(1000, base_ops)
    if kind == "WRITE":  # ~600 req/s/node, 1,495 + 126 = 1,621 ms, link 1.4% used
        burst = op(600 * seconds, 1495, 126, 1621, sent=int(0.014 * LINK_BYTES_PER_S * seconds))
    else:  # ~5,400 req/s/node, 31.5 + 27.3 → 59.1 ms (percentages in the seed use 59.1), link 10.4% used
        burst = op(5400 * seconds, 31.5, 27.3, 59.1, recv=int(0.104 * LINK_BYTES_PER_S * seconds))
    after_ops = dict(before.ops)
    after_ops[kind] = add(before.ops[kind], burst)
    sends, x = burst.ops, before.xprts[0]
    after = MountSpec(
        before.device, before.mountpoint, vers=before.vers, age=1000 + seconds, ops=after_ops,
        xprts=[XprtCounters(sends=x.sends + sends, req_u=x.req_u + 128 * sends, bklog_u=x.bklog_u + 900 * sends,
                            max_slots=128)],
    )  # fmt: skip
    return render_mountstats([before]), render_mountstats([after])
