"""The early-warning scan: Prometheus series → the detectors' input tables → findings → Alertmanager alerts.

Remap acceleration is a Prometheus rule (GpuEarlyWarning in deployments/prometheus/rules.yml) and XID 92 (the
driver's own ECC-storm detector) arrives as an XID alert. The detectors here need what PromQL does badly — a robust
z-score against the job's own nodes at each timestamp, k-of-n persistence, summed down time per port — so a
scheduled flow (flows/warning_scan.py) reads their inputs over Prometheus's HTTP API, runs them and posts each
finding as a GpuEarlyWarning alert to Alertmanager: the same intake as every other alert (grouping, silences, the
receiver's de-duplication), after which triage weighs a swap at the job's next checkpoint (flows/triage.py).

Peers are only the nodes that run the job: an idle spare next to busy nodes would otherwise be the outlier.
Plain pandas in, plain dicts out; no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from remedy.detect.alertmanager import node_name
from remedy.settings.lemon import EarlyWarningSettings
from remedy.settings.signals import SignalThresholds
from remedy.warn.findings import Finding
from remedy.warn.infiniband import detect_ib_downtime
from remedy.warn.peers import detect_peer_outliers
from remedy.warn.stragglers import detect_stragglers

IB_STATE_QUERY = "node_infiniband_state_id"  # node_exporter's infiniband collector; 4 = ACTIVE
IB_ACTIVE = 4.0
ALERTNAME = "GpuEarlyWarning"


@dataclass
class ScanInputs:
    """What the flow read: per peer metric a Prometheus frame, the port-state frame, the step-time frame (or None),
    and the job's nodes (the only peers)."""

    job: str
    job_nodes: list[str]
    peer_series: dict[str, pd.DataFrame] = field(default_factory=dict)
    ib_states: pd.DataFrame | None = None
    step_times: pd.DataFrame | None = None


@dataclass
class ScanReport:
    findings: list[Finding]
    notes: list[str]  # what was not scanned and why, one line each (shown in the artifact)


def _with_node(frame: pd.DataFrame) -> pd.DataFrame:
    """A Prometheus long frame with a `node` column from its labels (NODE_LABELS, as alerts are read)."""
    if frame is None or frame.empty:
        return pd.DataFrame(columns=["node", "timestamp", "value"])
    labels = [c for c in frame.columns if c not in ("timestamp", "value")]
    out = frame.copy()
    if not labels:
        out["node"] = None
    else:
        # one name per distinct label set (a series), not per sample: 1,000 nodes × 120 samples is 120,000 rows
        keys = out[labels].fillna("").astype(str)
        series = keys.drop_duplicates()
        series["node"] = [node_name(r) for r in series.to_dict("records")]
        out["node"] = keys.merge(series, on=labels, how="left")["node"].to_numpy()
    if "timestamp" in out and pd.api.types.is_datetime64_any_dtype(out["timestamp"]):
        out["timestamp"] = out["timestamp"].dt.round("ms")  # Prometheus's float seconds carry ns noise
    return out[out["node"].notna()]


def peer_samples(inputs: ScanInputs) -> pd.DataFrame:
    """The peer-outlier detector's input: time, job, node, metric, value, for the job's nodes only."""
    members = set(inputs.job_nodes)
    parts = []
    for metric, frame in inputs.peer_series.items():
        df = _with_node(frame)
        df = df[df["node"].isin(members)]
        if df.empty:
            continue
        # several series for one node at one time (e.g. two scrape jobs): keep the largest
        df = df.groupby(["timestamp", "node"], as_index=False)["value"].max()
        parts.append(pd.DataFrame({"time": df["timestamp"], "job": inputs.job, "node": df["node"],
                                   "metric": metric, "value": df["value"].astype(float)}))
    if not parts:
        return pd.DataFrame(columns=["time", "job", "node", "metric", "value"])
    out = pd.concat(parts, ignore_index=True)
    return out[np.isfinite(out["value"])].reset_index(drop=True)  # a NaN sample (0/0 rate) says nothing


def port_events(states: pd.DataFrame | None) -> pd.DataFrame:
    """node_infiniband_state_id samples → the IB detector's state changes (time, node, port, state): a sample
    not ACTIVE is "down" from that time until the first ACTIVE sample after it."""
    df = _with_node(states) if states is not None else _with_node(pd.DataFrame())
    if df.empty:
        return pd.DataFrame(columns=["time", "node", "port", "state"])
    label = lambda name: df[name].fillna("").astype(str) if name in df.columns else ""  # noqa: E731
    df = df.assign(port=label("device") + "/" + label("port"),
                   state=(df["value"].astype(float) != IB_ACTIVE).map({True: "down", False: "up"}))
    df = df.sort_values(["node", "port", "timestamp"], kind="stable")
    changed = df["state"] != df.groupby(["node", "port"])["state"].shift()
    df = df[changed]
    return pd.DataFrame({"time": df["timestamp"], "node": df["node"], "port": df["port"],
                         "state": df["state"]}).reset_index(drop=True)


def step_samples(inputs: ScanInputs) -> pd.DataFrame:
    df = _with_node(inputs.step_times) if inputs.step_times is not None else _with_node(pd.DataFrame())
    df = df[df["node"].isin(set(inputs.job_nodes)) & np.isfinite(df["value"].astype(float)) & (df["value"] > 0)]
    df = df.groupby(["timestamp", "node"], as_index=False)["value"].max()
    return pd.DataFrame({"time": df["timestamp"], "job": inputs.job, "node": df["node"],
                         "step_time_seconds": df["value"].astype(float)})


def scan(inputs: ScanInputs, now: datetime, settings: EarlyWarningSettings | None = None,
         signals: SignalThresholds | None = None) -> ScanReport:
    """Run every detector the inputs feed; say which could not run and why."""
    s = settings or EarlyWarningSettings()
    findings: list[Finding] = []
    notes: list[str] = []
    peers = peer_samples(inputs)
    if len(inputs.job_nodes) < s.peer_min_nodes:
        notes.append(f"peer comparison not run: the job {inputs.job} runs on {len(inputs.job_nodes)} node(s), fewer "
                     f"than the {s.peer_min_nodes} a comparison needs")
    else:
        seen = set(peers["metric"].unique())
        missing = sorted(m for m in s.scan.peer_queries if m not in seen)
        if missing:
            notes.append(f"no samples from the job's nodes for {', '.join(missing)}: not compared")
        if not peers.empty:
            findings += detect_peer_outliers(peers, s)
    events = port_events(inputs.ib_states)
    if inputs.ib_states is None or inputs.ib_states.empty:
        notes.append(f"no {IB_STATE_QUERY} series: InfiniBand down time not scanned")
    else:
        findings += detect_ib_downtime(events, now, s, signals)
    if inputs.step_times is None:
        notes.append("stragglers not scanned: no step-time query is configured (lemon.early_warning.scan."
                     "step_time_query)")
    else:
        findings += detect_stragglers(step_samples(inputs), s)
    return ScanReport(findings=findings, notes=notes)


def _component_label(f: Finding) -> dict[str, str]:
    # the port of an InfiniBand finding; a job id (peer, straggler) is not a place on the node
    return {"port": f.component} if f.detector == "ib-downtime" and f.component else {}


def finding_alert(f: Finding, now: datetime, alert_minutes: float, generator_url: str = "") -> dict:
    """One finding as an Alertmanager v2 postable alert. Its labels are its identity: the same finding posted by
    the next scan is the same alert (Alertmanager keeps one, the receiver one incident)."""
    # `Hostname`, as dcgm-exporter names the node: the shipped Alertmanager route groups by it
    labels = {"alertname": ALERTNAME, "signal": "early-warning", "severity": "warning", "detector": f.detector,
              "Hostname": f.node, "metric": f.metric, **_component_label(f)}
    where = f" {f.component}" if _component_label(f) else ""
    return {
        "labels": labels,
        "annotations": {
            "summary": f"{f.detector} on {f.node}{where}: {f.metric} {f.value:.4g} against {f.baseline:.4g} "
                       f"(score {f.score:.2f}): likely to fail soon",
            "detail": f.detail,
            "value": f"{f.score:.4g}",
            "first_seen": f.first_seen.isoformat(),
        },
        "startsAt": f.first_seen.isoformat(),
        "endsAt": (now + timedelta(minutes=alert_minutes)).isoformat(),
        "generatorURL": generator_url,
    }


def findings_markdown(report: ScanReport, job: str, posted: int | None) -> str:
    """The scan run's artifact: each finding with its evidence, and what was not scanned."""
    lines = [f"# Early-warning scan: job {job}", ""]
    if report.findings:
        lines += ["| node | detector | what | value, against | why | since |", "|---|---|---|---|---|---|"]
        for f in report.findings:
            where = f" ({f.component})" if _component_label(f) else ""
            lines.append(f"| {f.node} | {f.detector} | {f.metric}{where} | {f.value:.4g}, against {f.baseline:.4g} | "
                         f"{f.detail} | {f.first_seen:%Y-%m-%d %H:%M} UTC |")
        lines.append("")
        lines.append(f"{posted} warning(s) posted to Alertmanager; triage weighs a swap at the job's next checkpoint "
                     "for each." if posted is not None else
                     "Dry run: nothing posted. Run with dry_run=false to post these warnings.")
    else:
        lines.append("No node is expected to fail soon.")
    if report.notes:
        lines += ["", "Not scanned:", *[f"- {n}" for n in report.notes]]
    return "\n".join(lines) + "\n"
