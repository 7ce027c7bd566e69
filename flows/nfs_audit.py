"""Fleet NFS audit — is checkpoint I/O waiting for RPC slots rather than for the network? (seed 002 §4.2.5)

    read Prometheus (node_exporter mountstats) → judge each node's mounts → report → archive → tell Slack

The verdict per node and export says where a request's time goes (slot wait vs network+server), how much of
the storage link is used, and what to change (slot limits, session slots, nconnect, readahead, staggered
writers). Dry-run reads and judges as usual and archives / notifies nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.audit.cadence import parse_duration
from remedy.audit.fleet import audits_from_prometheus
from remedy.audit.prometheus import PrometheusUnavailable
from remedy.audit.results import SlackNotice
from remedy.audit.rpc import MountAudit
from tasks.audit import archive_audit, notify_slack, read_nfs_metrics


def _run_name() -> str:
    from prefect.runtime import flow_run

    window = flow_run.parameters.get("window") or runtime.settings().nfs.window  # a scheduled run passes none
    return f"nfs audit over {window}, {datetime.now(UTC):%Y-%m-%d %H:%M}Z"


@flow(name="nfs-audit", flow_run_name=_run_name)
def nfs_audit(
    window: str | None = None, prometheus_url: str | None = None, notify: bool = True, dry_run: bool | None = None
) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    nfs = settings.nfs
    dry_run = settings.dry_run if dry_run is None else dry_run
    window = window or nfs.window
    window_s = parse_duration(window)  # a bad window fails here, before any query

    # 1. Read: per-op latency and transport load of every node's NFS mounts.
    try:
        frames = read_nfs_metrics(prometheus_url or nfs.prometheus_url, window)
    except PrometheusUnavailable as exc:  # the run's one-line message says which setting to change
        raise PrometheusUnavailable(
            f"{str(exc).split(': ')[0]}: the audit reads node_exporter's NFS mountstats through Prometheus; set "
            "nfs.prometheus_url (REMEDY_NFS__PROMETHEUS_URL) to one that scrapes them") from None

    # 2. Judge: plain domain code, one verdict per node and export.
    audits = audits_from_prometheus(frames.ops, frames.transports, nfs, window_seconds=window_s)
    starved = [a for a in audits if a.verdict.kind == "rpc-slot-starvation"]
    log.info("%d node mounts audited, %d starved of RPC slots", len(audits), len(starved))

    # 3. Report: a table for the UI, the same rows in the archive.
    rows = [_row(a) for a in audits]
    create_table_artifact(key="nfs-audit", table=rows or [{"node": "-", "verdict": "no NFS metrics"}],
                          description=f"NFS audit over {window}")  # fmt: skip
    create_markdown_artifact(key="nfs-audit-summary", markdown=_summary(audits, window))
    now = datetime.now(UTC)
    report = {"at": now.isoformat(), "window": window, "dry_run": dry_run, "mounts": [a.to_dict() for a in audits]}

    # 4. Archive: one JSON per run.
    key = f"{nfs.archive_prefix}/{now:%Y/%m/%d/%H%M%S}.json"
    url = archive_audit(key, report, dry_run)

    # 5. Tell Slack only when something needs a person.
    notice = SlackNotice(posted=False, skip="nothing starved" if not starved else "notify off")
    if starved and notify:
        notice = notify_slack(_slack_text(starved, url), dry_run)
    return {"mounts": len(audits), "starved": [f"{a.node} {a.device}" for a in starved], "archive": url,
            "slack": notice.to_dict(), "dry_run": dry_run}  # fmt: skip


def _row(a: MountAudit) -> dict[str, Any]:
    busiest = max((o for o in a.ops if o.ops), key=lambda o: o.ops * (o.execute_ms or 0), default=None)
    return {
        "node": a.node, "export": a.device, "verdict": a.verdict.kind,
        "op": busiest.op if busiest else "-",
        "slot_wait_ms": round(busiest.slot_wait_ms or 0, 1) if busiest else 0,
        "network_server_ms": round(busiest.network_server_ms or 0, 1) if busiest else 0,
        "link_used_pct": round(100 * a.link_utilization, 2),
    }  # fmt: skip


def _summary(audits: list[MountAudit], window: str) -> str:
    if not audits:
        return f"# NFS audit ({window})\n\nNo `node_mountstats_nfs_*` metrics: is node_exporter's mountstats collector on?"
    lines = [f"# NFS audit ({window})", ""]
    for a in sorted(audits, key=lambda a: a.verdict.kind != "rpc-slot-starvation"):
        lines.append(f"- **{a.node}** `{a.device}`: {a.verdict.headline}")
        lines += [f"  - remedy: {r}" for r in a.verdict.remedies]
    return "\n".join(lines)


def _slack_text(starved: list[MountAudit], url: str) -> str:
    head = f":warning: NFS RPC slot starvation on {len(starved)} node mount(s)"
    body = [f"• {a.node} {a.device}: {a.verdict.headline}" for a in starved[:10]]
    more = [f"… and {len(starved) - 10} more"] if len(starved) > 10 else []
    return "\n".join([head, *body, *more, f"first remedy: {starved[0].verdict.remedies[0]}", f"report: {url}"])
