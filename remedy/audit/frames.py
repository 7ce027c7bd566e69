"""pandas views of the audit, validated by pandera schemas (one row per node/mount/op, per node/mount).

pandera costs ~2 s to import here, so it is imported only when a frame is built.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from remedy.audit.rpc import MountAudit

OP_COLUMNS = (
    "node", "device", "mountpoint", "nfs_version", "op", "ops", "interval_s", "rate_per_s", "slot_wait_ms",
    "network_server_ms", "execute_ms", "slot_wait_share", "bytes_per_s", "timeouts",
)  # fmt: skip
MOUNT_COLUMNS = (
    "node", "device", "mountpoint", "nfs_version", "nconnect", "protocol", "interval_s", "sends_per_s",
    "avg_backlog", "avg_in_flight", "max_slots_seen", "slot_limit", "slot_table_full", "bytes_per_s",
    "link_utilization", "verdict",
)  # fmt: skip


@lru_cache(maxsize=1)
def schemas():
    """(op schema, mount schema). Latency columns are null when an op had no requests."""
    import pandera.pandas as pa

    nonneg = pa.Check.ge(0)
    ops = pa.DataFrameSchema(
        {
            "node": pa.Column(str),
            "device": pa.Column(str),
            "mountpoint": pa.Column(str),
            "nfs_version": pa.Column(str),
            "op": pa.Column(str, pa.Check.str_matches(r"^[A-Z0-9_]+$")),
            "ops": pa.Column("int64", nonneg),
            "interval_s": pa.Column(float, pa.Check.gt(0)),
            "rate_per_s": pa.Column(float, nonneg),
            "slot_wait_ms": pa.Column(float, nonneg, nullable=True),
            "network_server_ms": pa.Column(float, nonneg, nullable=True),
            "execute_ms": pa.Column(float, nonneg, nullable=True),
            "slot_wait_share": pa.Column(float, [nonneg, pa.Check.le(1.0 + 1e-9)], nullable=True),
            "bytes_per_s": pa.Column(float, nonneg),
            "timeouts": pa.Column("int64", nonneg),
        },
        strict=True,
        coerce=True,
    )
    mounts = pa.DataFrameSchema(
        {
            "node": pa.Column(str),
            "device": pa.Column(str),
            "mountpoint": pa.Column(str),
            "nfs_version": pa.Column(str),
            "nconnect": pa.Column("int64", pa.Check.ge(1)),
            "protocol": pa.Column(str),
            "interval_s": pa.Column(float, pa.Check.gt(0)),
            "sends_per_s": pa.Column(float, nonneg),
            "avg_backlog": pa.Column(float, nonneg, nullable=True),
            "avg_in_flight": pa.Column(float, nonneg, nullable=True),
            "max_slots_seen": pa.Column(float, nonneg, nullable=True),
            "slot_limit": pa.Column("int64", pa.Check.ge(1)),
            "slot_table_full": pa.Column(bool),
            "bytes_per_s": pa.Column(float, nonneg),
            "link_utilization": pa.Column(float, nonneg),
            "verdict": pa.Column(
                str, pa.Check.isin(["rpc-slot-starvation", "link-saturated", "slow-server", "healthy", "idle"])
            ),
        },
        strict=True,
        coerce=True,
    )
    return ops, mounts


def ops_frame(audits: list[MountAudit]) -> pd.DataFrame:
    rows = [
        (a.node, a.device, a.mountpoint, a.nfs_version, o.op, o.ops, a.interval_seconds, o.rate_per_s,
         o.slot_wait_ms, o.network_server_ms, o.execute_ms, o.slot_wait_share, o.bytes_per_s, o.timeouts)
        for a in audits for o in a.ops
    ]  # fmt: skip
    return schemas()[0].validate(pd.DataFrame(rows, columns=list(OP_COLUMNS)))


def mounts_frame(audits: list[MountAudit]) -> pd.DataFrame:
    rows = [
        (a.node, a.device, a.mountpoint, a.nfs_version, a.nconnect, a.transport.protocol, a.interval_seconds,
         a.transport.sends_per_s, a.transport.avg_backlog, a.transport.avg_in_flight, a.transport.max_slots_seen,
         a.transport.slot_limit, a.transport.slot_table_full, a.bytes_per_s, a.link_utilization, a.verdict.kind)
        for a in audits
    ]  # fmt: skip
    return schemas()[1].validate(pd.DataFrame(rows, columns=list(MOUNT_COLUMNS)))
