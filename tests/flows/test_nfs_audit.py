"""nfs_audit end to end: real Prometheus + node_exporter (Table 13 WRITE sample), moto S3, Slack stub, Prefect."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from tests.audit.helpers import table13_pair
from tests.fixtures.prometheus import mountinfo_for, run_node_exporter, run_prometheus, scrape_config, write_procfs

pytestmark = [pytest.mark.prefect, pytest.mark.servers]


def _wait(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def starved_node(tmp_path):
    """A Prometheus whose only node just went through the seed's checkpoint save (WRITE 1,495 + 126 ms)."""
    from remedy.audit.prometheus import PrometheusSource

    before, after = table13_pair("WRITE", base_ops=10**7)
    procfs = write_procfs(tmp_path / "proc", before, mountinfo_for([("10.20.0.5:/ckpt", "/ckpt", "nfs4")]))
    with run_node_exporter(procfs) as ne, run_prometheus(scrape_config(ne), tmp_path) as prom:
        src = PrometheusSource(prom)
        metric = 'node_mountstats_nfs_operations_requests_total{operation="WRITE"}'
        _wait(lambda: not src.query(f"count_over_time({metric}[10s]) >= 3").empty, "3 scrapes before the save")
        write_procfs(procfs, after)
        _wait(lambda: (src.query(metric)["value"] > 10**7 + 1).any(), "the save to be scraped")
        _wait(lambda: not src.query(f"count_over_time({metric}[10s]) >= 6").empty, "more scrapes after")
        yield prom


@pytest.fixture
def configured(monkeypatch, starved_node, aws_endpoint, slack_stub):
    from remedy import runtime

    monkeypatch.setenv("REMEDY_NFS__PROMETHEUS_URL", starved_node)
    monkeypatch.setenv("REMEDY_NFS__WINDOW", "30s")
    monkeypatch.setenv("REMEDY_AWS__ENDPOINT_URL", aws_endpoint)
    monkeypatch.setenv("REMEDY_AWS__ARCHIVE_BUCKET", "audit-archive")
    monkeypatch.setenv("REMEDY_SLACK__BASE_URL", slack_stub.base_url)
    monkeypatch.setenv("REMEDY_SLACK__BOT_TOKEN", "xoxb-test")
    runtime.reset()
    yield aws_endpoint, slack_stub
    runtime.reset()


def test_starved_node_is_archived_and_reported(prefect_server, configured):
    from flows.nfs_audit import nfs_audit

    aws_endpoint, slack = configured
    result = nfs_audit()
    assert result["mounts"] == 1 and len(result["starved"]) == 1 and result["starved"][0].endswith("10.20.0.5:/ckpt")

    bucket, key = result["archive"].removeprefix("s3://").split("/", 1)
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=aws_endpoint)
    report = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    [mount] = report["mounts"]
    write = next(o for o in mount["ops"] if o["op"] == "WRITE")
    assert round(write["slot_wait_ms"]) == 1495 and round(write["network_server_ms"]) == 126
    assert mount["verdict"]["kind"] == "rpc-slot-starvation"

    [post] = slack.calls_to("chat.postMessage")
    assert "92% of WRITE latency is waiting for a slot" in post.body["text"] and result["archive"] in post.body["text"]
    assert result["slack"]["posted"] is True


def test_dry_run_archives_and_posts_nothing(prefect_server, configured):
    from flows.nfs_audit import nfs_audit

    aws_endpoint, slack = configured
    result = nfs_audit(dry_run=True)
    assert len(result["starved"]) == 1 and result["dry_run"] is True
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=aws_endpoint)
    assert s3.list_buckets()["Buckets"] == []
    assert slack.calls_to("chat.postMessage") == []


def test_without_prometheus_the_run_names_the_setting_and_is_not_green(prefect_server, monkeypatch):
    """`remedy up` runs no Prometheus: a scheduled audit (no parameters) is named for what it audits, not
    `nfs-audit-None`, and fails with one line that names the setting to change."""
    import socket

    from prefect.client.orchestration import get_client

    from flows.nfs_audit import nfs_audit
    from remedy import runtime

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("REMEDY_NFS__PROMETHEUS_URL", nowhere)
    runtime.reset()
    try:
        state = nfs_audit(return_state=True)
    finally:
        runtime.reset()
    assert state.is_failed()
    assert f"Prometheus at {nowhere} did not answer" in state.message
    assert "nfs.prometheus_url (REMEDY_NFS__PROMETHEUS_URL)" in state.message and "\n" not in state.message
    with get_client(sync_client=True) as client:
        name = client.read_flow_run(state.state_details.flow_run_id).name
    assert name.startswith("nfs audit over 5m, ") and "None" not in name
