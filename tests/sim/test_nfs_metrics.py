"""The simulator's nodes export NFS mountstats as node_exporter does, and a real Prometheus started the way
`remedy up` starts it (remedy.platform.prometheus) feeds the NFS audit: healthy mounts, and one starved of RPC slots
once `nfs-slot-starvation` is injected."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from remedy.audit.synth import MountSpec, OpCounters, XprtCounters, render_mountstats
from remedy.sim import nfs
from remedy.sim.faults import inject
from tests.fixtures.prometheus import mountinfo_for, run_node_exporter, write_procfs

pytestmark = pytest.mark.servers

SERIES = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


def _shape(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """metric name → (its TYPE, its label names), for the node_mountstats_nfs_* series in `text`."""
    types = dict(re.findall(r"^# TYPE (node_mountstats_nfs_\w+) (\w+)$", text, re.M))
    shape = {}
    for line in text.splitlines():
        m = SERIES.match(line)
        if m and m.group(1).startswith("node_mountstats_nfs_"):
            labels = frozenset(kv.split("=", 1)[0] for kv in re.findall(r'(\w+="[^"]*")', m.group(2)))
            shape[m.group(1)] = (types[m.group(1)], labels)
    return shape


def test_the_simulator_exports_its_nfs_mounts_as_node_exporter_does(sim, tmp_path):
    """Every series the simulator serves exists in real node_exporter 1.5's output for an NFS mount, with the same
    type and labels (plus `instance`, which names the node)."""
    mount = MountSpec("10.20.0.5:/ckpt", "/ckpt", ops={"WRITE": OpCounters(ops=100, bytes_sent=10**6, queue_ms=5,
                                                                           rtt_ms=200, execute_ms=210)},
                      xprts=[XprtCounters(sends=100, bklog_u=3, max_slots=64)])
    procfs = write_procfs(tmp_path / "proc", render_mountstats([mount]),
                          mountinfo_for([("10.20.0.5:/ckpt", "/ckpt", "nfs4")]))
    with run_node_exporter(procfs) as ne:
        real = _shape(httpx.get(f"{ne}/metrics", timeout=10).text)
    ours = _shape(httpx.get(f"{sim.url}/metrics/nfs", timeout=10).text)
    assert ours, "the simulator serves node_mountstats_nfs_* series"
    for name, (kind, labels) in ours.items():
        assert name in real, f"{name}: node_exporter has no such metric"
        assert (kind, labels - {"instance"}) == real[name], name


def test_prometheus_started_as_remedy_up_does_feeds_the_nfs_audit(sim, tmp_path):
    from remedy.audit.fleet import audits_from_prometheus
    from remedy.audit.prometheus import PrometheusSource
    from remedy.platform import processes
    from remedy.platform.prometheus import ROLE, start_prometheus

    inject(sim.cluster, "nfs-slot-starvation", "gpu003")
    prom = start_prometheus(tmp_path, 0, sim.url, interval="1s")
    try:
        assert processes.read_state(tmp_path)[ROLE]["pid"] == prom.pid
        src = PrometheusSource(prom.url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # rate() needs two samples of every series
            if not src.query("count_over_time(node_mountstats_nfs_transport_sends_total[10s]) >= 3").empty:
                break
            time.sleep(0.5)
        audits = audits_from_prometheus(src.nfs_op_latency("10s"), src.nfs_transport("10s"), window_seconds=10)
        verdicts = {a.node: a.verdict.kind for a in audits}
        assert set(verdicts) == set(sim.cluster.health)
        assert verdicts.pop("gpu003") == "rpc-slot-starvation"
        assert set(verdicts.values()) <= {"healthy", "idle"}, verdicts
        starved = next(a for a in audits if a.node == "gpu003")
        assert starved.device == nfs.EXPORT
    finally:
        prom.stop()
    assert not processes.alive({"pid": prom.pid}), "stop() ends the process"
    assert ROLE not in processes.read_state(tmp_path)


def test_a_stack_prometheus_that_is_not_ready_in_time_is_started_once_more_on_another_port(tmp_path, monkeypatch):
    """CI saw `remedy up` stop at once when its Prometheus stayed silent past the timeout on a loaded machine: on a
    port chosen at run time the stack starts it once more; on a port the operator named it says why and stops."""
    import pytest

    from remedy.platform import prometheus as sp

    calls = []

    def start(workdir, port, sim_url, timeout, interval):
        calls.append(port)
        if len(calls) == 1:
            raise sp.PrometheusNotReady("Prometheus on port 41234 not ready within 30 s")
        return "started"

    monkeypatch.setattr(sp, "_start_prometheus", start)
    assert sp.start_prometheus(tmp_path, 0, "http://127.0.0.1:1") == "started" and calls == [0, 0]
    calls.clear()
    with pytest.raises(sp.PrometheusNotReady, match="not ready within 30 s"):
        sp.start_prometheus(tmp_path, 9090, "http://127.0.0.1:1")
    assert calls == [9090]
