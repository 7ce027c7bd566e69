"""Early-warning scan — which node is likely to fail soon, before it fails? (issue 15, item 3)

    list the job's nodes → read the detectors' inputs from Prometheus → run the detectors (remedy.warn.scan)
    → artifact: each finding with its evidence, and what could not be scanned
    → post each finding to Alertmanager as a GpuEarlyWarning alert (not in dry-run)

From there a warning is an ordinary alert: Alertmanager groups it and honours silences, the receiver opens one
incident per node and detector (a later scan's repeat is the same alert), and triage weighs a swap at the job's next
checkpoint against waiting for the failure (flows/triage.py). Detectors: nodes drifting from the job's other nodes
(GPU temperature; seed 002's interrupts, runnable processes, NFS GETATTR time, page-outs), InfiniBand down time
creeping towards NCCL's timeout, stragglers (when the job exports a step time). Remap acceleration is a Prometheus
rule and XID 92 an XID alert; neither is scanned here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.audit.prometheus import PrometheusUnavailable
from remedy.warn.scan import finding_alert, findings_markdown, scan
from remedy.warn.scan_decisions import PostRoute, post_route, prometheus_source, summarise_finding
from tasks.warnings import list_job_nodes, post_warnings, post_warnings_to_receiver, read_warning_inputs


@flow(name="warning-scan", flow_run_name="early-warning scan")
def warning_scan(dry_run: bool | None = None, prometheus_url: str | None = None,
                 alertmanager_url: str | None = None) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    warn, work = settings.lemon.early_warning, settings.workload
    now = datetime.now(UTC)

    # 1. Read: the job's nodes (the only peers), then the detectors' inputs over the scan window.
    nodes = list_job_nodes()
    source = prometheus_source(prometheus_url, warn.scan.prometheus_url, settings.nfs.prometheus_url)
    if source.url is None:  # no Prometheus anywhere in the settings: one line saying which to set
        raise PrometheusUnavailable(source.unavailable("no Prometheus URL: none set"))
    try:
        inputs = read_warning_inputs(source.url, work.job, nodes, now)
    except PrometheusUnavailable as exc:
        raise PrometheusUnavailable(source.unavailable(str(exc))) from None

    # 2. Detect: plain domain code.
    report = scan(inputs, now, warn, settings.signals)
    for f in report.findings:
        log.warning("%s: %s %s — %s", f.node, f.detector, f.metric, f.detail)
    for note in report.notes:
        log.info("not scanned: %s", note)

    # 3. Post: each finding is a GpuEarlyWarning alert; triage takes it from the receiver.
    alerts = [finding_alert(f, now, warn.scan.alert_minutes) for f in report.findings]
    route = post_route(len(alerts), dry_run, warn.scan.receiver_url, alertmanager_url)
    posted: int | None = 0 if route is PostRoute.NOTHING else None  # a dry run posts nothing and says so
    if route is PostRoute.RECEIVER and warn.scan.receiver_url:
        posted = post_warnings_to_receiver(warn.scan.receiver_url, alerts, len(alerts))
    elif route is PostRoute.ALERTMANAGER:
        posted = post_warnings(alertmanager_url or warn.scan.alertmanager_url, alerts, len(alerts))
    create_markdown_artifact(key="early-warning-scan", markdown=findings_markdown(report, work.job, posted),
                             description=f"Early-warning scan of {len(nodes)} node(s) running {work.job}")
    return {"nodes": len(nodes), "findings": [summarise_finding(f).as_dict() for f in report.findings],
            "posted": posted or 0, "not_scanned": report.notes, "dry_run": dry_run}
