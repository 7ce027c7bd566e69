"""Shared pytest wiring. Real-server fixtures live one per module under tests/fixtures/; tiers (tests/tiers.py)
and the slow list (tests/slow.py) are applied here."""

from __future__ import annotations

import pytest

from tests import slow as budget
from tests.tiers import MARKERS, SERVER_TIERS, CodeScan, tiers_of

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
    for name, what in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config._remedy_durations = {}  # nodeid → seconds of its call phase (the budget check at the end)
    config._remedy_tier_of = {}  # nodeid → the .ci/run tier it belongs to: fast, servers or slow
    config._remedy_tier_seconds = {}


def pytest_collection_modifyitems(config, items):
    """Mark each test with the tiers it uses (tests/tiers.py) and `slow` from tests/slow.py. A test marked slow by
    hand must say why."""
    scan = CodeScan()
    for item in items:
        tiers = tiers_of(item, scan) | {m.name for m in item.iter_markers() if m.name in SERVER_TIERS}
        for tier in sorted(tiers - {m.name for m in item.iter_markers()}):
            item.add_marker(tier)
        if tiers or item.get_closest_marker("servers"):
            if not item.get_closest_marker("servers"):
                item.add_marker("servers")
        own = item.get_closest_marker("slow")
        if own is not None and not (own.kwargs.get("reason") or own.args):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.slow needs a reason (why is it slow?)")
        reason = budget.slow_reason(item.nodeid)
        if reason and own is None:
            item.add_marker(pytest.mark.slow(reason=reason))
        config._remedy_tier_of[item.nodeid] = ("slow" if item.get_closest_marker("slow") else
                                               "servers" if item.get_closest_marker("servers") else "fast")


def pytest_runtest_logreport(report):
    """Record each test's call time (the 20 s budget) and its setup+call+teardown time by tier (the summary)."""
    if _config is None:
        return
    if report.when == "call":
        _config._remedy_durations[report.nodeid] = report.duration
    # under pytest-xdist the controller collects nothing: the worker's report carries the markers as keywords
    tier = _config._remedy_tier_of.get(report.nodeid) or _tier_from_keywords(getattr(report, "keywords", {}))
    if tier is not None:
        _config._remedy_tier_seconds[tier] = _config._remedy_tier_seconds.get(tier, 0.0) + report.duration
    if "real_k8s" in getattr(report, "keywords", {}):  # the real control plane lane, whichever tier it ran in
        _config._remedy_tier_seconds["real lane"] = _config._remedy_tier_seconds.get("real lane", 0.0) + report.duration


def _tier_from_keywords(keywords) -> str:
    return "slow" if "slow" in keywords else "servers" if "servers" in keywords else "fast"


_config = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    global _config
    _config = session.config


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The budget: a test over 20 s that is not in tests/slow.py is named here (it belongs there, with why, or it
    should get faster)."""
    seconds = getattr(config, "_remedy_tier_seconds", {})
    if seconds:
        terminalreporter.section("time by tier (setup + call + teardown)")
        for tier in ("fast", "servers", "slow"):
            if tier in seconds:
                terminalreporter.write_line(f"{tier:8} {seconds[tier]:8.1f} s")
        if "real lane" in seconds:
            terminalreporter.write_line(f"{'real lane':8} {seconds['real lane']:8.1f} s  (the real control plane tests,"
                                        " counted in the tiers above too)")
    durations = getattr(config, "_remedy_durations", {})
    over = sorted(((d, n) for n, d in durations.items()
                   if d > budget.BUDGET_SECONDS and budget.slow_reason(n) is None), reverse=True)
    if over:
        terminalreporter.section("over the 20 s budget and not in tests/slow.py")
        for seconds, nodeid in over:
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
