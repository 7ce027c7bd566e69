"""The warning-scan flow's decisions without Prefect, Prometheus or Alertmanager."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from remedy.warn.findings import Finding
from remedy.warn.scan_decisions import PostRoute, post_route, prometheus_source, summarise_finding

T = datetime(2026, 11, 28, 12, tzinfo=UTC)


def test_the_run_parameter_wins_then_the_scan_setting_then_the_cluster_prometheus():
    assert prometheus_source("http://asked", "http://scan", "http://nfs").url == "http://asked"
    assert prometheus_source(None, "http://scan", "http://nfs").url == "http://scan"
    assert prometheus_source(None, None, "http://nfs").url == "http://nfs"
    assert prometheus_source(None, None, None).url is None


def test_unreadable_prometheus_names_the_setting_to_fix():
    own = prometheus_source(None, "http://scan", None)
    msg = own.unavailable("Prometheus at http://scan did not answer: connection refused")
    assert msg == ("Prometheus at http://scan did not answer: the early-warning scan reads dcgm-exporter and "
                   "node_exporter through Prometheus; set lemon.early_warning.scan.prometheus_url")
    cluster = prometheus_source(None, None, "http://nfs")
    assert cluster.unavailable("x: y").endswith(
        "set nfs.prometheus_url (the cluster's Prometheus), or lemon.early_warning.scan.prometheus_url for the "
        "scan alone")


@pytest.mark.parametrize("findings, dry_run, receiver, asked, route", [
    (0, False, "http://recv", None, PostRoute.NOTHING),
    (0, True, None, None, PostRoute.NOTHING),
    (2, True, "http://recv", None, PostRoute.DRY_RUN),
    (2, False, "http://recv", None, PostRoute.RECEIVER),  # a stack without Alertmanager
    (2, False, "http://recv", "http://am", PostRoute.ALERTMANAGER),  # named for this run: it wins
    (2, False, None, None, PostRoute.ALERTMANAGER),
])
def test_where_findings_go(findings, dry_run, receiver, asked, route):
    assert post_route(findings, dry_run, receiver, asked) is route


def test_finding_summary_is_rounded_and_keeps_the_result_shape():
    f = Finding("peer-outlier", "gpu-07", "gpu_temp", 91.123456, 70.98765, 4.56789, T, T, T, "GPU 2", "hot")
    out = summarise_finding(f).as_dict()
    assert out == {"node": "gpu-07", "detector": "peer-outlier", "metric": "gpu_temp", "component": "GPU 2",
                   "value": 91.1235, "baseline": 70.9877, "score": 4.568, "detail": "hot"}
    assert list(out) == ["node", "detector", "metric", "component", "value", "baseline", "score", "detail"]
