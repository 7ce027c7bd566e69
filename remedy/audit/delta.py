"""Two mountstats snapshots → counter deltas over the interval, wrap-aware.

Kernel counters are `unsigned long` (32 bits on 32-bit kernels, 64 on 64-bit) or `unsigned long long`.
A counter that went down wrapped: below 2**32 it is taken as a 32-bit wrap, else as a 64-bit wrap. A
remount also zeroes the counters; it is told apart by the mount's `age:` going backwards and reported as
an error rather than silently read as a wrap.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from remedy.audit.mountstats import Mountstats, MountstatsError, NfsMount, OpStats, Transport, zero_op
from remedy.domain.durations import human_duration

_U32 = 2**32
_U64 = 2**64


def counter_delta(before: int, after: int) -> tuple[int, bool]:
    """after − before for a monotonically increasing counter; (delta, wrapped)."""
    if after >= before:
        return after - before, False
    modulus = _U32 if before < _U32 else _U64
    return after + modulus - before, True


@dataclass(slots=True)
class MountDelta:
    """What one mount did during the interval (every counter is a difference)."""

    mount: NfsMount  # the later snapshot (its options, identity)
    interval_seconds: float
    ops: dict[str, OpStats]
    transports: list[Transport]
    events: dict[str, int]
    bytes: dict[str, int]
    wrapped: list[str] = field(default_factory=list)  # which counters wrapped, for the report
    lifetime: bool = False  # True when there was no earlier snapshot: averages since mount


# Transport fields that are counters (port is an identity, max_slots a high-water mark, idle_time a gauge).
_XPRT_COUNTERS = ("bind_count", "connect_count", "connect_time", "sends", "recvs", "bad_xids", "req_u", "bklog_u",
                  "sending_u", "pending_u")  # fmt: skip


def _diff_transport(before: Transport, after: Transport, label: str, wrapped: list[str]) -> Transport:
    changes: dict = {}
    for name in _XPRT_COUNTERS:
        a, b = getattr(after, name), getattr(before, name)
        if a is not None and b is not None:
            changes[name], w = counter_delta(b, a)
            if w:
                wrapped.append(f"{label}.{name}")
    if after.rdma:
        changes["rdma"] = _diff_dict(before.rdma, after.rdma, label, wrapped)
    return replace(after, **changes)


def _diff_op(before: OpStats | None, after: OpStats, wrapped: list[str]) -> OpStats:
    if before is None or after is before:  # new op, or both the shared all-zero record
        return after
    if after == before:  # an op idle during the interval, compared in C
        return zero_op(after.op, after.errors is not None)
    out: list = [after.op]
    for i, (a, b) in enumerate(zip(after[1:9], before[1:9]), 1):  # the eight counters; errors below
        if a >= b:
            out.append(a - b)
        else:
            d, _ = counter_delta(b, a)
            out.append(d)
            wrapped.append(f"{after.op}.{OpStats._fields[i]}")
    e_a, e_b = after.errors, before.errors
    out.append(e_a if e_a is None or e_b is None else counter_delta(e_b, e_a)[0])
    return OpStats(*out)


def _diff_dict(before: dict[str, int], after: dict[str, int], label: str, wrapped: list[str]) -> dict[str, int]:
    out = {k: a - before.get(k, 0) for k, a in after.items()}
    if min(out.values(), default=0) >= 0:  # nothing wrapped: the common case, without a call per counter
        return out
    for k, a in after.items():
        out[k], w = counter_delta(before.get(k, 0), a)
        if w:
            wrapped.append(f"{label}.{k}")
    return out


def diff_mount(before: NfsMount, after: NfsMount, interval_seconds: float | None = None) -> MountDelta:
    where = f"{after.device} on {after.mountpoint}"
    if before.age_seconds is not None and after.age_seconds is not None and after.age_seconds < before.age_seconds:
        raise MountstatsError(
            f"{where}: remounted between snapshots (age went from {human_duration(before.age_seconds)} to {human_duration(after.age_seconds)}); "
            "take both snapshots from the same mount"
        )
    if interval_seconds is None:
        if before.age_seconds is None or after.age_seconds is None:
            raise MountstatsError(f"{where}: no age: line; give the interval between snapshots explicitly")
        interval_seconds = float(after.age_seconds - before.age_seconds)
    if interval_seconds <= 0:
        raise MountstatsError(
            f"{where}: the snapshots are {human_duration(interval_seconds)} apart; take them at least 1 s apart "
            "or pass --interval-seconds"
        )
    if len(before.transports) != len(after.transports):
        raise MountstatsError(
            f"{where}: transport count changed between snapshots ({len(before.transports)} → "
            f"{len(after.transports)}); the mount was re-established"
        )
    wrapped: list[str] = []
    earlier = before.ops
    ops = {name: _diff_op(earlier.get(name), op, wrapped) for name, op in after.ops.items()}
    transports = [
        _diff_transport(b, a, f"xprt[{i}]", wrapped) for i, (b, a) in enumerate(zip(before.transports, after.transports))
    ]
    return MountDelta(
        mount=after,
        interval_seconds=float(interval_seconds),
        ops=ops,
        transports=transports,
        events=_diff_dict(before.events, after.events, "events", wrapped),
        bytes=_diff_dict(before.bytes, after.bytes, "bytes", wrapped),
        wrapped=wrapped,
    )


def lifetime_delta(mount: NfsMount) -> MountDelta:
    """One snapshot: everything since mount, over `age:` seconds."""
    if not mount.age_seconds:
        raise MountstatsError(
            f"{mount.device} on {mount.mountpoint}: age is {human_duration(mount.age_seconds)}, so rates since mount are "
            "undefined; give an earlier snapshot (--before)"
        )
    return MountDelta(
        mount=mount,
        interval_seconds=float(mount.age_seconds),
        ops=dict(mount.ops),
        transports=list(mount.transports),
        events=dict(mount.events),
        bytes=dict(mount.bytes),
        lifetime=True,
    )


def diff_mountstats(
    before: Mountstats | None, after: Mountstats, interval_seconds: float | None = None
) -> list[MountDelta]:
    """Pair mounts by (device, mountpoint). A mount absent from `before` is new: its whole life is in the interval."""
    if not after.mounts:
        kinds = ", ".join(sorted(after.skipped_fstypes)) or "none"
        raise MountstatsError(
            f"{after.source}: no NFS mounts found ({after.skipped} other mounts skipped: {kinds})"
        )
    if before is None:
        return [lifetime_delta(m) for m in after.mounts]
    earlier = before.by_key()
    if not any(m.key in earlier for m in after.mounts):
        raise MountstatsError(
            f"{before.source} and {after.source} share no NFS mount (compare snapshots of the same node)"
        )
    return [
        diff_mount(earlier[m.key], m, interval_seconds) if m.key in earlier else lifetime_delta(m)
        for m in after.mounts
    ]
