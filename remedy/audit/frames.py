"""pandas views of the audit, validated by pandera schemas (one row per node/mount/op, per node/mount).

pandera costs ~2 s to import here, so it is imported only when a frame is built.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from remedy.audit.rpc import MountAudit, OpLatency

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
    from remedy.audit.fleet import gc_paused

    with gc_paused():  # see remedy.audit.fleet: ~3M short-lived objects, no cycles
        return _ops_frame(audits)


def _ops_frame(audits: list[MountAudit]) -> pd.DataFrame:
    # Built column by column (OpLatency is a NamedTuple: zip(*) transposes in C) and mount labels repeated
    # with numpy: ~300k rows for a 2,048-node fleet, where a list of row dicts is several times slower.
    import numpy as np

    counts = [len(a.ops) for a in audits]
    fields = list(zip(*(o for a in audits for o in a.ops))) or [()] * len(OpLatency._fields)
    by_name = dict(zip(OpLatency._fields, fields))

    def repeat(attr: str) -> np.ndarray:
        return np.repeat(np.array([getattr(a, attr) for a in audits], dtype=object), counts)

    cols = {
        "node": repeat("node"), "device": repeat("device"), "mountpoint": repeat("mountpoint"),
        "nfs_version": repeat("nfs_version"), "op": by_name["op"], "ops": by_name["ops"],
        "interval_s": np.repeat(np.array([a.interval_seconds for a in audits], dtype=float), counts),
        "rate_per_s": by_name["rate_per_s"], "slot_wait_ms": by_name["slot_wait_ms"],
        "network_server_ms": by_name["network_server_ms"], "execute_ms": by_name["execute_ms"],
        "slot_wait_share": by_name["slot_wait_share"], "bytes_per_s": by_name["bytes_per_s"],
        "timeouts": by_name["timeouts"],
    }  # fmt: skip
    df = pd.DataFrame({k: pd.Series(v, dtype=_DTYPES[k]) for k, v in cols.items()}, columns=list(OP_COLUMNS))
    return schemas()[0].validate(df)


_DTYPES = {
    "node": object, "device": object, "mountpoint": object, "nfs_version": object, "op": object, "ops": "int64",
    "interval_s": "float64", "rate_per_s": "float64", "slot_wait_ms": "float64", "network_server_ms": "float64",
    "execute_ms": "float64", "slot_wait_share": "float64", "bytes_per_s": "float64", "timeouts": "int64",
}  # fmt: skip


def mounts_frame(audits: list[MountAudit]) -> pd.DataFrame:
    rows = [
        (a.node, a.device, a.mountpoint, a.nfs_version, a.nconnect, a.transport.protocol, a.interval_seconds,
         a.transport.sends_per_s, a.transport.avg_backlog, a.transport.avg_in_flight, a.transport.max_slots_seen,
         a.transport.slot_limit, a.transport.slot_table_full, a.bytes_per_s, a.link_utilization, a.verdict.kind)
        for a in audits
    ]  # fmt: skip
    return schemas()[1].validate(pd.DataFrame(rows, columns=list(MOUNT_COLUMNS)))
