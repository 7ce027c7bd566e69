"""Tasks of the NFS / checkpoint-I/O audit: read Prometheus, archive the report, tell Slack.

Judging is plain domain code (`remedy.audit.fleet.audits_from_prometheus`); each task here does one side
effect. Only transient failures retry (Prometheus unreachable, Slack 429 is already retried by the notifier).
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.audit.prometheus import PrometheusUnavailable
from remedy.audit.results import NfsMetrics, SlackNotice


def _prometheus_down(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except PrometheusUnavailable:
        return True
    except Exception:
        return False
    return False


@task(name="read_nfs_metrics", task_run_name="read-nfs-metrics", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=[2, 10], retry_condition_fn=_prometheus_down)  # fmt: skip
def read_nfs_metrics(prometheus_url: str, window: str) -> NfsMetrics:
    """Per node and export: per-op latency split (slot wait vs network+server) and transport load."""
    from remedy.audit.prometheus import PrometheusSource

    src = PrometheusSource(prometheus_url)
    try:
        return NfsMetrics(ops=src.nfs_op_latency(window), transports=src.nfs_transport(window))
    finally:
        src.close()


@task(name="archive_audit", task_run_name="archive-{key}", cache_policy=NO_CACHE)
def archive_audit(key: str, report: dict[str, Any], dry_run: bool) -> str:
    """Write the report as JSON to the archive (S3, or aws.archive_dir); returns its URL (planned only in dry-run)."""
    from remedy.adapters.archive import open_archive

    return open_archive(runtime.settings().aws, dry_run=dry_run).put_json(key, report)


@task(name="notify_slack", task_run_name="notify-slack", cache_policy=NO_CACHE)
def notify_slack(text: str, dry_run: bool) -> SlackNotice:
    """Post one notice; a missing bot token is a recorded skip, not a failure."""
    from remedy.adapters.slack import SlackNotifier

    slack = runtime.settings().slack
    token = slack.bot_token.get_secret_value()
    if not token:
        return SlackNotice(posted=False, skip="no Slack bot token configured (slack.bot_token)")
    ts = SlackNotifier(token, slack.channel, base_url=slack.base_url, dry_run=dry_run).post(text)
    return SlackNotice(posted=not dry_run, ts=ts)
