"""NFS / checkpoint-I/O audit thresholds (issue 7). Composed into remedy.config.RemedySettings.

Defaults come from seed 002 §4.2 (Lablup, 60-node B200 training on NFS over 200 Gbps RoCE).
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class NfsAuditSettings(BaseModel):
    """NFS / checkpoint-I/O audit thresholds (issue 7)."""

    link_gbps: float = Field(
        200.0,
        gt=0,
        description="Storage link speed per node in Gbit/s; utilization is measured against it "
        "(seed 002 §4.2.5: 200 Gbps RoCE = 25 GB/s per node).",
    )
    rpc_slot_limit: int = Field(
        128,
        ge=1,
        description="Configured RPC slots per transport (sunrpc.tcp_max_slot_table_entries or the NFSv4.1 "
        "session slots); seed 002 §4.2.5 observed 128 in mountstats.",
    )
    slot_wait_share_starved: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="Share of per-request latency spent waiting for an RPC slot (queue/execute) above which an "
        "op is called slot-starved (seed 002 Table 13: WRITE 92.2%, READ 53.3%).",
    )
    link_used_low: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Link utilization below which more bandwidth cannot be the fix (seed 002: 1.4% on save, "
        "10.4% on load, peak 14.7%).",
    )
    link_used_saturated: float = Field(
        0.8, gt=0, le=1, description="Link utilization above which the link itself is the bottleneck."
    )
    slow_rtt_ms: float = Field(
        100.0,
        gt=0,
        description="Per-request network+server time (rtt/ops) above which the server or network is called slow "
        "(seed 002 Table 13: WRITE 126 ms, READ 27.3 ms).",
    )
    min_ops: int = Field(
        1, ge=1, description="Ops of one kind in the interval below which that op is not judged (too few to average)."
    )
    save_write_bytes_per_s: float = Field(
        20e9,
        gt=0,
        description="Cluster NFS write rate above which a sample is a checkpoint save (seed 002 §4.2.1: 20 GB/s).",
    )
    load_read_bytes_per_s: float = Field(
        2e9,
        gt=0,
        description="Cluster NFS read rate above which, with low GPU use, a sample is a load (seed 002 §4.2.1: 2 GB/s).",
    )
    load_gpu_util_below_pct: float = Field(
        50.0,
        gt=0,
        le=100,
        description="Cluster mean GPU utilization below which high NFS read is a load (seed 002 §4.2.1: 50%).",
    )
    sample_seconds: float = Field(
        30.0, gt=0, description="Sampling period of the I/O time series (seed 002: Prometheus at 30 s)."
    )
    mtbf_hours: float = Field(
        56.2,
        gt=0,
        description="Job mean time between failures when the ledger has too little history "
        "(seed 002 §4.2.2: 1,294 h of training / 23 abnormal ends).",
    )
    prometheus_url: str = Field(
        "http://127.0.0.1:9090", description="Prometheus that scrapes node_exporter's mountstats collector on every node."
    )
    window: str = Field(
        "5m", description="PromQL rate window for the fleet audit (10× the scrape interval or more is a safe choice)."
    )
    archive_prefix: str = Field("audits/nfs", description="S3 key prefix for archived NFS audit reports.")
