"""The Prometheus source against a real Prometheus scraping a real node_exporter that reads our mountstats."""

from __future__ import annotations

import time

import pytest

from remedy.audit.fleet import audits_from_prometheus
from remedy.audit.phases import classify_phases
from remedy.audit.prometheus import PrometheusQueryError, PrometheusSource, PrometheusUnavailable
from remedy.cli import main
from remedy.settings.audit import NfsAuditSettings
from tests.fixtures.prometheus import (
    free_port,
    mountinfo_for,
    run_node_exporter,
    run_prometheus,
    scrape_config,
    write_procfs,
)

from .helpers import table13_pair

pytestmark = pytest.mark.servers


def _wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _samples(src: PrometheusSource, metric: str, window: str) -> int:
    df = src.query(f'count_over_time({metric}{{operation="WRITE"}}[{window}])')
    return 0 if df.empty else int(df["value"].max())


def test_table13_through_node_exporter_and_prometheus(tmp_path, capsys):
    # Large earlier totals keep Prometheus' rate() extrapolation identical for every counter of the mount.
    before, after = table13_pair("WRITE", base_ops=10**7)
    procfs = write_procfs(tmp_path / "proc", before, mountinfo_for([("10.20.0.5:/ckpt", "/ckpt", "nfs4")]))
    with run_node_exporter(procfs) as ne, run_prometheus(scrape_config(ne), tmp_path) as prom:
        src = PrometheusSource(prom)
        metric = "node_mountstats_nfs_operations_requests_total"
        _wait_for(lambda: _samples(src, metric, "5s") >= 4, what="4 scrapes of the earlier snapshot")
        write_procfs(procfs, after)
        changed = time.time()
        _wait_for(lambda: src.query(f'{metric}{{operation="WRITE"}}')["value"].max() > 10**7 + 1,
                  what="the later snapshot to be scraped")  # fmt: skip
        # Evaluate every query at one instant whose 6 s window holds samples from before and after the change.
        at = changed + 3.0
        time.sleep(max(0.0, at + 0.5 - time.time()))

        ops = src.nfs_op_latency(window="6s", at=at)
        w = ops[ops.operation == "WRITE"].iloc[0]
        assert w.export == "10.20.0.5:/ckpt" and w.protocol == "tcp"
        assert w.slot_wait_ms == pytest.approx(1495, rel=1e-6)
        assert w.network_server_ms == pytest.approx(126, rel=1e-6)
        assert w.execute_ms == pytest.approx(1621, rel=1e-6)
        assert f"{w.slot_wait_share:.1%}" == "92.2%"
        assert w.requests_per_s > 0
        idle = ops[ops.operation == "NULL"].iloc[0]
        assert idle.requests_per_s == 0 and idle.slot_wait_ms != idle.slot_wait_ms  # NaN, not a division error

        transports = src.nfs_transport(window="6s", at=at)
        xprt = transports.iloc[0]
        assert xprt.max_slots == 128 and xprt.avg_backlog == pytest.approx(900 * 18000 / 18000, rel=1e-6)
        assert w.bytes_per_s > 0

        [audit] = audits_from_prometheus(ops, transports, window_seconds=6)
        assert audit.device == "10.20.0.5:/ckpt" and audit.verdict.kind == "rpc-slot-starvation"
        assert audit.verdict.headline.startswith("RPC slot starvation: 92% of WRITE latency is waiting for a slot")
        assert any("sunrpc.tcp_max_slot_table_entries" in r and "128 of 128" in r for r in audit.verdict.remedies)

        series = src.cluster_io_series(at - 6, at + 0.5, step_seconds=1, window="6s",
                                       gpu_util_query="vector(99)")  # fmt: skip
        assert list(series.columns) == ["timestamp", "nfs_write_bytes_per_s", "nfs_read_bytes_per_s", "gpu_util_pct"]
        assert series["nfs_write_bytes_per_s"].max() > 0 and (series["gpu_util_pct"] == 99).all()
        # the same series feeds the phase classifier (threshold scaled down to one node's burst)
        phases = classify_phases(series, NfsAuditSettings(save_write_bytes_per_s=1e8))["phase"].tolist()
        assert phases[0] == "training" and phases[-1] == "save"

        # the CLI reads the same moment
        assert main(["audit", "nfs", "--prometheus", prom, "--window", "6s", "--at", f"{at:.3f}"]) == 1  # starved: a finding
        out = capsys.readouterr().out
        assert "10.20.0.5:/ckpt (tcp) over 6 s" in out and "RPC slot starvation: 92% of WRITE latency" in out

        with pytest.raises(PrometheusQueryError, match="bad_data"):
            src.query("rate(node_mountstats_nfs_operations_requests_total[")


def test_unreachable_prometheus_is_a_clear_error(capsys):
    src = PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout=1)
    with pytest.raises(PrometheusUnavailable, match="did not answer"):
        src.nfs_op_latency()
    assert main(["audit", "nfs", "--prometheus", src.url, "--at", "yesterday"]) == 2
    assert "--at: not an ISO time" in capsys.readouterr().err
    assert main(["audit", "nfs", "--prometheus", src.url]) == 2
    assert "did not answer" in capsys.readouterr().err
