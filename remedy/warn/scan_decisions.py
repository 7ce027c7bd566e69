"""The warning-scan flow's decisions, Prefect-free: which Prometheus to read (and what to tell the operator to set
when it cannot be read), where the findings go (Alertmanager, the receiver, nowhere) and each finding's summary.

The flow (flows/warning_scan.py) reads, detects (remedy.warn.scan) and posts; it calls these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from remedy.warn.findings import Finding


@dataclass(frozen=True)
class PrometheusSource:
    url: str | None
    setting: str  # what to set when it cannot be read, in the words of the settings file

    def unavailable(self, error: str) -> str:
        """One line: what failed, what the scan reads through Prometheus, and which setting points at it."""
        return (f"{error.split(': ')[0]}: the early-warning scan reads dcgm-exporter and node_exporter through "
                f"Prometheus; set {self.setting}")


def prometheus_source(asked: str | None, scan_url: str | None, cluster_url: str | None) -> PrometheusSource:
    """The flow's parameter wins, then the scan's own setting, then the cluster's Prometheus (nfs.prometheus_url)."""
    setting = ("lemon.early_warning.scan.prometheus_url" if scan_url else
               "nfs.prometheus_url (the cluster's Prometheus), or lemon.early_warning.scan.prometheus_url for the "
               "scan alone")
    return PrometheusSource(asked or scan_url or cluster_url, setting)


class PostRoute(StrEnum):
    NOTHING = "nothing"  # no finding: zero posted
    DRY_RUN = "dry-run"  # findings, but a dry run posts none (posted stays unknown)
    RECEIVER = "receiver"  # a stack without Alertmanager: straight to the alert receiver
    ALERTMANAGER = "alertmanager"


def post_route(findings: int, dry_run: bool, receiver_url: str | None, alertmanager_asked: str | None) -> PostRoute:
    """Where the GpuEarlyWarning alerts go. An Alertmanager named for this run wins over the scan's receiver."""
    if not findings:
        return PostRoute.NOTHING
    if dry_run:
        return PostRoute.DRY_RUN
    if receiver_url and not alertmanager_asked:
        return PostRoute.RECEIVER
    return PostRoute.ALERTMANAGER


@dataclass(frozen=True)
class FindingSummary:
    """One finding as the flow's result lists it, rounded for reading."""

    node: str
    detector: str
    metric: str
    component: str
    value: float
    baseline: float
    score: float
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise_finding(f: Finding) -> FindingSummary:
    return FindingSummary(f.node, f.detector, f.metric, f.component, round(f.value, 4), round(f.baseline, 4),
                          round(f.score, 3), f.detail)
