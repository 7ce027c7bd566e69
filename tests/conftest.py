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


def pytest_configure(config):
    """Settings come from each test, not from the developer's shell: an exported REMEDY_DB_URL or REMEDY_CLUSTER__*
    would otherwise point every test that loads settings at that ledger or cluster. Test knobs
    (REMEDY_FUZZ_EXAMPLES, ...) are not settings and stay."""
    import os

    from remedy.config import RemedySettings

    for key in [k for k in os.environ if k.startswith("REMEDY_")]:
        if key == "REMEDY_CONFIG" or key[len("REMEDY_"):].lower().split("__")[0] in RemedySettings.model_fields:
            del os.environ[key]
