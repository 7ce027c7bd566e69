"""Audit many nodes' mountstats at once (the fleet audit and bench/nfs_audit.py use this).

A fleet audit allocates ~1M small records that all stay alive until the report is built; Python's cyclic
garbage collector would re-scan them again and again while they are made (~30% of the time measured here),
and none of them form cycles, so collection is paused for the batch and restored afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from remedy.audit.delta import diff_mountstats
from remedy.audit.mountstats import MountstatsError, parse_mountstats
from remedy.audit.rpc import MountAudit, audit_mount
from remedy.settings.audit import NfsAuditSettings

if TYPE_CHECKING:
    import pandas as pd


@contextmanager
def gc_paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def audit_fleet(
    snapshots: Iterable[tuple[str, str | None, str]],
    settings: NfsAuditSettings | None = None,
    interval_seconds: float | None = None,
) -> tuple[list[MountAudit], dict[str, str]]:
    """(node, earlier text or None, later text) per node → (audits, {node: error}).

    A node whose files cannot be read is reported in the error map with its one-line reason, not dropped
    silently and not allowed to stop the rest of the fleet.
    """
    s = settings or NfsAuditSettings()
    audits: list[MountAudit] = []
    errors: dict[str, str] = {}
    with gc_paused():
        for node, before, after in snapshots:
            try:
                b = parse_mountstats(before, f"{node} (earlier)") if before is not None else None
                deltas = diff_mountstats(b, parse_mountstats(after, node), interval_seconds)
            except MountstatsError as exc:
                errors[node] = str(exc)
                continue
            audits.extend(audit_mount(d, s, node=node) for d in deltas)
    return audits, errors


def audits_from_prometheus(ops: pd.DataFrame, transports: pd.DataFrame, settings: NfsAuditSettings | None = None,
                           window_seconds: float = 60.0) -> list[MountAudit]:
    """Verdicts per (instance, export) from PrometheusSource.nfs_op_latency / nfs_transport frames.

    Prometheus carries no mount options, so the NFS version and nconnect are unknown here (advice stays generic).
    """
    import math

    from remedy.audit.rpc import OpLatency, TransportLoad, Verdict, judge

    s = settings or NfsAuditSettings()
    link = s.link_gbps * 1e9 / 8
    xprt = {(r.instance, r.export): r for r in transports.itertuples(index=False)}
    out: list[MountAudit] = []

    def _num(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    for (instance, export), group in ops.groupby(["instance", "export"], sort=True):
        lat = [
            OpLatency(r.operation, round(r.requests_per_s * window_seconds), r.requests_per_s, _num(r.slot_wait_ms),
                      _num(r.network_server_ms), _num(r.execute_ms), _num(r.slot_wait_share), r.bytes_per_s, 0, None)
            for r in group.itertuples(index=False)
        ]  # fmt: skip
        x = xprt.get((instance, export))
        max_slots = int(x.max_slots) if x is not None else None
        load = TransportLoad(
            protocol=str(group["protocol"].iloc[0]), connections=1, sends_per_s=float(x.sends_per_s) if x is not None else 0.0,
            avg_backlog=_num(x.avg_backlog) if x is not None else None, avg_in_flight=None, max_slots_seen=max_slots,
            slot_limit=s.rpc_slot_limit, slot_table_full=max_slots is not None and max_slots >= s.rpc_slot_limit,
        )  # fmt: skip
        bytes_per_s = float(group["bytes_per_s"].sum())
        util = bytes_per_s / link
        verdict: Verdict = judge(lat, load, util, "", 0, s)
        out.append(MountAudit(node=str(instance), device=str(export), mountpoint="", nfs_version="", nconnect=0,
                              interval_seconds=window_seconds, lifetime=False, ops=lat, transport=load,
                              bytes_per_s=bytes_per_s, link_utilization=util, verdict=verdict))  # fmt: skip
    return out
