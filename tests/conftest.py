"""Shared pytest wiring. Real-server fixtures live one per module under tests/fixtures/."""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.postgres",  # postgres_url: a real PostgreSQL 15 from Debian's package
    "tests.fixtures.prometheus",  # prometheus / alertmanager / node_exporter binaries on loopback
    "tests.fixtures.aws",  # moto_server: moto in server mode
    "tests.fixtures.slack",  # slack_stub: a local HTTP stub of Slack's Web API
    "tests.fixtures.sim",  # sim / sim_factory: the Kubernetes-API cluster simulator on a loopback port
    "tests.fixtures.real_k8s",  # real_cluster: a real kube-apiserver + controller-manager (dev machines only)
    "tests.fixtures.prefect",  # prefect_server: a real Prefect server (test harness), once per session
]
