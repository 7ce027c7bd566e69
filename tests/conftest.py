"""Shared pytest wiring. Real-server fixtures live one per module under tests/fixtures/; tiers (tests/tiers.py)
and the slow list (tests/slow.py) are applied here."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

from tests import scheduling
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
    config._remedy_tier_cpu = {}
    _cpu_record_configure(config)
    scheduling.configure(config)


def pytest_unconfigure(config):
    scheduling.unconfigure(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the real control plane's tests on one worker (tests/scheduling.py)."""
    if config.getoption("dist") == "loadfile":
        return scheduling.RealLaneOnOneWorker(config, log)
    return None


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
    _longest_files_first(config, items)
    scheduling.note_collection(config, items)


# Rough seconds of one test on the CI machine by what it uses (tests/slow.py and the CPU record, docs/testing.md):
# only their order matters, for the schedule below
_COST = {"slow": 60.0, "prefect": 12.0, "servers": 4.0, "fast": 0.2}


def _longest_files_first(config, items) -> None:
    """Files with the most expected time first (a stable sort: tests keep their order within a file). Under
    pytest-xdist with whole files per worker (`--dist loadfile --no-loadscope-reorder`, scripts/test.sh) the
    workers take files in this order, so the long files start first and short ones fill the gaps at the end
    (longest-processing-time first) instead of one long file starting last."""
    def cost(item) -> float:
        if item.get_closest_marker("slow"):
            return _COST["slow"]
        if item.get_closest_marker("prefect"):
            return _COST["prefect"]
        return _COST["servers"] if item.get_closest_marker("servers") else _COST["fast"]

    per_file: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        per_file[path] = per_file.get(path, 0.0) + cost(item)
    # the real control plane's tests first: one work unit, the longest (tests/scheduling.py)
    items.sort(key=lambda item: (not item.get_closest_marker("real_k8s"), -per_file[item.nodeid.split("::", 1)[0]]))


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


# --- the CPU record (docs/testing.md "Where the CPU goes"): each test's wall and CPU, each process's, and the CPU of
# the session's long-lived servers, as JSON lines per process (usable from a run cut short by `timeout`), merged
# into one JSON file by the controller at the end. scripts/test-report.py prints it.
CPU_JSON_ENV = "REMEDY_TEST_CPU_JSON"  # where the merged record goes (default .pytest_cache/d/remedy/cpu.json)
_PARTS_ENV = "REMEDY_TEST_CPU_PARTS"  # set by the controller for its xdist workers
_cpu = {"parts": None, "worker": "main", "servers": None, "split": None, "t0": 0.0}


def _now_cpu() -> tuple[float, float, float, float]:
    """(wall, this process's CPU, its reaped children's CPU, its live descendants' and the detached servers' CPU)
    in seconds."""
    from tests.fixtures.cpu import live_cpu

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic(), time.process_time(), ch.ru_utime + ch.ru_stime, live_cpu()


def _cpu_record_configure(config) -> None:
    _cpu["t0"] = time.monotonic()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _cpu["worker"] = workerinput.get("workerid", "gw?")
        parts = os.environ.get(_PARTS_ENV)
    else:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: no record unless asked for one
        if not os.environ.get(CPU_JSON_ENV) and cache is None:
            return
        out = Path(os.environ.get(CPU_JSON_ENV) or cache.mkdir("remedy") / "cpu.json").absolute()
        parts = str(out) + ".parts"
        Path(parts).mkdir(parents=True, exist_ok=True)
        for old in Path(parts).glob("*.jsonl"):
            old.unlink()
        os.environ[_PARTS_ENV] = parts  # xdist's workers start after this and inherit it
        config._remedy_cpu_out = out
    _cpu["parts"] = parts


def _cpu_write(line: dict) -> None:
    if _cpu["parts"]:
        with open(Path(_cpu["parts"]) / f"{_cpu['worker']}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _now_cpu()
    _cpu["split"] = None
    yield
    after = _now_cpu()
    end = _cpu["split"] or after  # the worker's last test: its record stops where the session's teardown starts
    tier = _config._remedy_tier_of.get(item.nodeid, "fast") if _config is not None else "fast"
    _cpu_write({"kind": "test", "nodeid": item.nodeid, "tier": tier, "worker": _cpu["worker"],
                "wall": end[0] - before[0], "cpu": end[1] - before[1], "children": end[2] - before[2],
                "servers": end[3] - before[3]})
    if _config is not None:
        _config._remedy_tier_cpu[tier] = (_config._remedy_tier_cpu.get(tier, 0.0) + end[1] - before[1]
                                          + end[2] - before[2] + end[3] - before[3])
    if _cpu["split"]:
        _cpu_write({"kind": "test", "nodeid": "(session teardown: servers stopped)", "tier": tier,
                    "worker": _cpu["worker"], "wall": after[0] - end[0], "cpu": after[1] - end[1],
                    "children": after[2] - end[2],
                    # detached servers stop without being reaped by us: their CPU leaves the live count, add it back
                    "servers": after[3] - end[3] + sum(v for k, v in (_cpu["servers"] or {}).items()
                                                       if not k.startswith("child: "))})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None:  # session fixtures stop in this teardown: read the servers' CPU while they still run
        _cpu_snapshot_servers()
        _cpu["split"] = _now_cpu()
    yield


def _cpu_snapshot_servers() -> None:
    from tests.fixtures.cpu import servers_cpu

    try:
        _cpu["servers"] = servers_cpu()
    except OSError:
        _cpu["servers"] = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if _cpu["servers"] is None:
        _cpu_snapshot_servers()
    for name, secs in (_cpu["servers"] or {}).items():
        _cpu_write({"kind": "server", "name": name, "cpu": secs, "worker": _cpu["worker"],
                    "detached": not name.startswith("child: ")})
    wall, own, children, _ = _now_cpu()
    if session.config.pluginmanager.hasplugin("dsession"):  # xdist's controller: its reaped children are the workers,
        children = 0.0  # whose own lines count them already
    _cpu_write({"kind": "process", "worker": _cpu["worker"], "wall": wall - _cpu["t0"], "cpu": own,
                "children": children, "load": os.getloadavg()})
    out = getattr(session.config, "_remedy_cpu_out", None)
    if out is not None:  # the controller (or the only process): merge every process's lines into one file
        merged = merge_cpu_parts(Path(_cpu["parts"]))
        merged["markexpr"] = session.config.option.markexpr
        merged["args"] = list(session.config.args)
        out.write_text(json.dumps(merged, indent=1))
        tier_cpu: dict[str, float] = {}
        for t in merged["tests"]:
            tier_cpu[t["tier"]] = tier_cpu.get(t["tier"], 0.0) + t["cpu"] + t["children"] + t.get("servers", 0.0)
        session.config._remedy_tier_cpu = tier_cpu
        session.config._remedy_run_cpu = (sum(p["cpu"] + p["children"] for p in merged["processes"])
                                          + sum(s["cpu"] for s in merged["servers"] if s["detached"]))


def merge_cpu_parts(parts: Path) -> dict:
    merged: dict = {"tests": [], "servers": [], "processes": []}
    for part in sorted(parts.glob("*.jsonl")):
        for line in part.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:  # a line cut by a kill
                continue
            merged[{"test": "tests", "server": "servers", "process": "processes"}[rec.pop("kind")]].append(rec)
    return merged


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The budget: a test over 20 s that is not in tests/slow.py is named here (it belongs there, with why, or it
    should get faster)."""
    seconds = getattr(config, "_remedy_tier_seconds", {})
    if seconds:
        terminalreporter.section("time by tier (setup + call + teardown)")
        cpu = getattr(config, "_remedy_tier_cpu", {})
        for tier in ("fast", "servers", "slow"):
            if tier in seconds:
                used = f"  CPU {cpu[tier]:8.1f} s (tests, their processes and the servers' work)" if tier in cpu else ""
                terminalreporter.write_line(f"{tier:8} {seconds[tier]:8.1f} s{used}")
        run_cpu = getattr(config, "_remedy_run_cpu", None)
        if run_cpu is not None:
            terminalreporter.write_line(f"{'CPU':8} {run_cpu:8.1f} s in all (every pytest process, its children and "
                                        f"the detached servers; scripts/test-report.py "
                                        f"{getattr(config, '_remedy_cpu_out', '')})")
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
