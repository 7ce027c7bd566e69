"""The NFS audit's quantities from Prometheus (node_exporter's mountstats collector), as pandera-checked frames.

node_exporter exports the kernel's per-op sums in seconds: `node_mountstats_nfs_operations_queue_time_seconds_total`
(slot wait), `..._response_time_seconds_total` (network + server), `..._request_time_seconds_total` (execute)
and `..._requests_total`; per transport `node_mountstats_nfs_transport_{sends,backlog_queue}_total` and the
gauge `..._maximum_rpc_slots`. Seed 002 §4.2.5 built its Figure 10 from exactly these.
Note: node_exporter 1.5 keeps only the last `xprt:` line of an nconnect mount (seen here), so transport
numbers from Prometheus describe one connection; the mountstats parser sees them all.
"""

from __future__ import annotations

import time
from datetime import datetime
from functools import lru_cache

import httpx
import pandas as pd

from remedy.errors import RemedyError

OP = "node_mountstats_nfs_operations"
XPRT = "node_mountstats_nfs_transport"
MOUNT_LABELS = ["instance", "export", "protocol"]


class PrometheusUnavailable(RemedyError):
    """Prometheus did not answer (connection refused, timeout, HTTP 5xx)."""


class PrometheusQueryError(RemedyError):
    """Prometheus answered with an error for the query (bad PromQL, bad range…)."""


@lru_cache(maxsize=1)
def schemas():
    """(op latency schema, transport schema). Per-request times are null when there were no requests."""
    import pandera.pandas as pa

    nonneg = pa.Check.ge(0)
    labels = {k: pa.Column(str) for k in MOUNT_LABELS}
    ops = pa.DataFrameSchema(
        {
            **labels,
            "operation": pa.Column(str),
            "timestamp": pa.Column("datetime64[ns, UTC]"),
            "requests_per_s": pa.Column(float, nonneg),
            "slot_wait_ms": pa.Column(float, nonneg, nullable=True),
            "network_server_ms": pa.Column(float, nonneg, nullable=True),
            "execute_ms": pa.Column(float, nonneg, nullable=True),
            "slot_wait_share": pa.Column(float, [nonneg, pa.Check.le(1.0 + 1e-9)], nullable=True),
            "bytes_per_s": pa.Column(float, nonneg),
        },
        strict=True,
        coerce=True,
    )
    transport = pa.DataFrameSchema(
        {
            **labels,
            "timestamp": pa.Column("datetime64[ns, UTC]"),
            "sends_per_s": pa.Column(float, nonneg),
            "avg_backlog": pa.Column(float, nonneg, nullable=True),
            "max_slots": pa.Column(float, nonneg),
        },
        strict=True,
        coerce=True,
    )
    return ops, transport


def _ts(value: datetime | float | None) -> str | None:
    if value is None:
        return None
    return f"{value.timestamp():.3f}" if isinstance(value, datetime) else f"{float(value):.3f}"


class PrometheusSource:
    """Reads from Prometheus's HTTP API (`/api/v1/query`, `/api/v1/query_range`)."""

    def __init__(self, url: str, *, timeout: float = 10.0, client: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self._client = client or httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def _get(self, path: str, params: dict) -> list[dict]:
        try:
            r = self._client.get(self.url + path, params={k: v for k, v in params.items() if v is not None})
        except httpx.HTTPError as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url} did not answer: {exc}") from None
        if r.status_code >= 500:
            raise PrometheusUnavailable(f"Prometheus at {self.url} answered HTTP {r.status_code}")
        try:
            body = r.json()
        except ValueError:
            raise PrometheusUnavailable(f"Prometheus at {self.url} answered HTTP {r.status_code} without JSON") from None
        if body.get("status") != "success":
            raise PrometheusQueryError(
                f"Prometheus rejected {params.get('query')!r}: {body.get('errorType', '?')}: {body.get('error', '')}"
            )
        result: list[dict] = body["data"]["result"]
        return result

    @staticmethod
    def _frame(result: list[dict]) -> pd.DataFrame:
        rows = []
        for series in result:
            labels = series.get("metric", {})
            points = series.get("values") or [series["value"]]
            for t, v in points:
                rows.append({**labels, "timestamp": float(t), "value": float(v)})
        if not rows:
            return pd.DataFrame(columns=["timestamp", "value"])
        df = pd.DataFrame(rows)
        df["timestamp"] = pd.to_datetime(df["timestamp"], unit="s", utc=True)
        return df

    def query(self, promql: str, at: datetime | float | None = None) -> pd.DataFrame:
        """Instant query → long frame: one column per label, `timestamp`, `value`."""
        return self._frame(self._get("/api/v1/query", {"query": promql, "time": _ts(at)}))

    def query_range(
        self, promql: str, start: datetime | float, end: datetime | float, step_seconds: float
    ) -> pd.DataFrame:
        if step_seconds <= 0:
            raise PrometheusQueryError(f"step must be positive, got {step_seconds}")
        params = {"query": promql, "start": _ts(start), "end": _ts(end), "step": f"{step_seconds:g}"}
        return self._frame(self._get("/api/v1/query_range", params))

    def _rates(self, queries: dict[str, str], keys: list[str], at) -> pd.DataFrame:
        # One evaluation time for every query, so the results join on their timestamp; join on every label
        # (job, mountaddr…) so two series that differ only in a label we do not report never cross-multiply.
        at = time.time() if at is None else at
        merged: pd.DataFrame | None = None
        for name, promql in queries.items():
            df = self.query(promql, at).drop(columns="__name__", errors="ignore")
            for k in keys:
                if k not in df:
                    df[k] = ""
            labels = [c for c in df.columns if c not in ("timestamp", "value")]
            df = df.fillna({c: "" for c in labels}).rename(columns={"value": name})
            if merged is None:
                merged = df
            else:
                on = [c for c in labels if c in merged.columns] + ["timestamp"]
                merged = merged.merge(df, on=on, how="inner")
        return merged

    def nfs_op_latency(self, window: str = "1m", at: datetime | float | None = None) -> pd.DataFrame:
        """Per instance/export/op over `window`: request rate and per-request slot wait / network+server / total."""
        keys = [*MOUNT_LABELS, "operation"]
        df = self._rates(
            {
                "req": f"rate({OP}_requests_total[{window}])",
                "queue": f"rate({OP}_queue_time_seconds_total[{window}])",
                "rtt": f"rate({OP}_response_time_seconds_total[{window}])",
                "exe": f"rate({OP}_request_time_seconds_total[{window}])",
                "sent": f"rate({OP}_sent_bytes_total[{window}])",
                "recv": f"rate({OP}_received_bytes_total[{window}])",
            },
            keys,
            at,
        )
        busy = df["req"] > 0
        out = df[[*keys, "timestamp"]].copy()
        out["requests_per_s"] = df["req"].astype(float)
        for col, src in (("slot_wait_ms", "queue"), ("network_server_ms", "rtt"), ("execute_ms", "exe")):
            out[col] = (df[src] / df["req"].where(busy) * 1000.0).astype(float)
        total = pd.concat([df["exe"], df["queue"] + df["rtt"]], axis=1).max(axis=1)
        out["slot_wait_share"] = (df["queue"] / total.where(busy & (total > 0))).astype(float)
        out["bytes_per_s"] = (df["sent"] + df["recv"]).astype(float)
        return schemas()[0].validate(out.reset_index(drop=True))

    def nfs_transport(self, window: str = "1m", at: datetime | float | None = None) -> pd.DataFrame:
        """Per instance/export: sends/s, mean backlog per send (requests waiting for a slot), slot high-water."""
        df = self._rates(
            {
                "sends": f"rate({XPRT}_sends_total[{window}])",
                "bklog": f"rate({XPRT}_backlog_queue_total[{window}])",
                "max_slots": f"{XPRT}_maximum_rpc_slots",
            },
            MOUNT_LABELS,
            at,
        )
        out = df[[*MOUNT_LABELS, "timestamp"]].copy()
        out["sends_per_s"] = df["sends"].astype(float)
        out["avg_backlog"] = (df["bklog"] / df["sends"].where(df["sends"] > 0)).astype(float)
        out["max_slots"] = df["max_slots"].astype(float)
        return schemas()[1].validate(out.reset_index(drop=True))

    def cluster_io_series(
        self,
        start: datetime | float,
        end: datetime | float,
        step_seconds: float = 30.0,
        window: str = "1m",
        gpu_util_query: str = "avg(DCGM_FI_DEV_GPU_UTIL)",
    ) -> pd.DataFrame:
        """Cluster NFS write/read bytes/s and mean GPU use over time: the input of remedy.audit.phases."""
        queries = {
            "nfs_write_bytes_per_s": f"sum(rate({OP}_sent_bytes_total{{operation=\"WRITE\"}}[{window}]))",
            "nfs_read_bytes_per_s": f"sum(rate({OP}_received_bytes_total{{operation=\"READ\"}}[{window}]))",
            "gpu_util_pct": gpu_util_query,
        }
        merged: pd.DataFrame | None = None
        for name, promql in queries.items():
            df = self.query_range(promql, start, end, step_seconds)
            df = (df if not df.empty else pd.DataFrame(columns=["timestamp", "value"]))[["timestamp", "value"]]
            df = df.rename(columns={"value": name})
            merged = df if merged is None else merged.merge(df, on="timestamp", how="inner")
        assert merged is not None  # three queries above
        return merged.sort_values("timestamp").reset_index(drop=True)
