"""The simulator's health-check Jobs: run through the real simulated cluster (Job → pod → runner → log),
then read back by the same parsers a real Job's log goes through."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from remedy.health.result import Verdict
from remedy.health.suite import CheckSpec, parse_check_output, suite_for
from remedy.settings.health import MIB, HealthCheckSettings
from remedy.sim.checks import dcgm_diag_output, nccl_output
from remedy.sim.cluster import build_cluster
from remedy.sim.health import NodeHealth
from remedy.sim.jobs import job_done
from remedy.sim.runners import RUNNERS

NS = "gpu-remedy"
SETTINGS = HealthCheckSettings()
EXTENDED = suite_for("extended", SETTINGS)
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    c = build_cluster(nodes=4, spares=0, training_job=False, racks=1, time_scale=0.0001)
    c.start_clock()
    yield c
    c.stop_clock()


@pytest.fixture
def node(cluster):
    """A node with healthy hardware again (tests plant their own faults)."""
    name = cluster.node_names()[0]
    for n in cluster.node_names():
        cluster.health[n] = NodeHealth.healthy(gpus=8, ib_ports=8)
    return name


def manifest(spec: CheckSpec, name: str, nodes: list[str], settings: HealthCheckSettings = SETTINGS) -> dict:
    """The Job gpu-remedy creates for this check (remedy.health.jobs.check_job through the node-job template)."""
    from remedy.adapters.kubernetes import KubernetesCluster
    from remedy.config import load_settings
    from remedy.health.jobs import check_job

    adapter = KubernetesCluster(load_settings(cluster={"mode": "simulator", "simulator_url": "http://127.0.0.1:9"}))
    job = adapter.render_node_job(check_job(spec, name=name, nodes=nodes, settings=settings))
    job["metadata"]["namespace"] = NS
    return job


def run_job(cluster, spec: CheckSpec, nodes: list[str], job: dict | None = None) -> list[tuple[str, str]]:
    """Create the check's Job, let the simulator run it, return (pod's node, log) per pod."""
    job = job or manifest(spec, f"{spec.id}-{next(_names)}", nodes)
    name = job["metadata"]["name"]
    with cluster.lock:
        cluster.store.create("Job", job)
    cluster.reconcile()
    assert cluster.settle(timeout=10, until=lambda: job_done(cluster.store.get("Job", NS, name))), f"{name} did not finish"
    pods = [p for p in cluster.store.objects("Pod", NS) if p["metadata"].get("labels", {}).get("job-name") == name
            or p["metadata"]["name"].startswith(name)]
    assert pods, f"no pods for {name}"
    return [(p["spec"]["nodeName"], "\n".join(cluster.visible_log(NS, p["metadata"]["name"]))) for p in pods]


def verdicts(cluster, node: str) -> dict[str, object]:
    out = {}
    for spec in EXTENDED:
        nodes = cluster.node_names() if spec.multi_node else [node]
        logs = run_job(cluster, spec, nodes)
        log = next(text for n, text in logs if n == node)
        out[spec.id] = parse_check_output(spec.check, log, SETTINGS)
    return out


def test_every_check_has_a_runner():
    assert {s.check for s in EXTENDED} <= set(RUNNERS)


def test_healthy_node_passes_every_level(cluster, node):
    results = verdicts(cluster, node)
    assert {k: r.verdict for k, r in results.items()} == {s.id: Verdict.PASS for s in EXTENDED}
    probe = results["nvml-probe"]
    assert len(probe.measurements["gpus"]) == 8 and probe.measurements["gpus"][0]["name"] == "NVIDIA B200"
    assert results["nccl-multi-node"].measurements["ranks"] == 32  # 4 nodes x 8 GPUs


def gpu(i: int, **faults) -> Callable[[NodeHealth], None]:
    return lambda h: [setattr(h.gpus[i], k, v) for k, v in faults.items()]


def node_fault(**faults) -> Callable[[NodeHealth], None]:
    return lambda h: [setattr(h, k, v) for k, v in faults.items()]


def ib_down(h: NodeHealth) -> None:
    h.ib_ports[2].state = "Down"


PLANTED = [  # (id, plant, {check id: a substring of one of its reasons}) — every other check must pass
    ("remap-pending", gpu(3, remap_pending=True), {
        "nvml-probe": "GPU 3: row remap pending", "dcgm-diag-r1": "software fail on GPU 3",
        "dcgm-diag-r2": "memory fail on GPU 3", "dcgm-diag-r4": "memory fail on GPU 3"}),
    ("pcie-x8", gpu(5, pcie_width=8), {
        "nvml-probe": "GPU 5: PCIe link x8 below max x16", "dcgm-diag-r2": "pcie fail on GPU 5",
        "dcgm-diag-r4": "pcie fail on GPU 5"}),
    ("nccl-slow-256MB", node_fault(nccl_slow_sizes=[256 * MIB]), {
        "nccl-single-node": "256 MB: BusBW", "nccl-multi-node": "256 MB: BusBW"}),
    ("nccl-busbw-factor", node_fault(nccl_busbw_factor=0.5), {
        "nccl-single-node": "2 GB: BusBW", "nccl-multi-node": "2 GB: BusBW"}),
    ("thermal-throttle", gpu(1, thermal_throttle=True), {
        "stress": "GPU 1: throttled under load (hw_thermal_slowdown)", "dcgm-diag-r4": "thermal violations"}),
    ("ib-port-down", ib_down, {"ib": "mlx5_2/1: state Down"}),
    ("lemon", node_fault(lemon=True), {}),
]


@pytest.mark.parametrize("plant, expected", [p[1:] for p in PLANTED], ids=[p[0] for p in PLANTED])
def test_planted_fault_fails_the_right_checks_for_the_right_reason(cluster, node, plant, expected):
    plant(cluster.health_of(node))
    results = verdicts(cluster, node)
    failed = {k for k, r in results.items() if r.verdict is Verdict.FAIL}
    assert failed == set(expected), {k: results[k].reasons for k in failed}
    for check, reason in expected.items():
        assert any(reason in r for r in results[check].reasons), (check, results[check].reasons)


def test_dcgm_levels_run_more_tests_and_reject_bad_levels():
    h = NodeHealth.healthy()
    counts = []
    for level in (1, 2, 3, 4):
        code, out = dcgm_diag_output(h, level)
        counts.append(len(parse_check_output("dcgm-diag", out).measurements["tests"]))
        assert code == 0
    assert counts == [1, 3, 7, 9]
    assert dcgm_diag_output(h, 7)[0] == 1


def test_nccl_sim_follows_nccl_tests_bandwidth_math():
    """busbw = algbw x 2(n-1)/n and algbw = size / time, as nccl-tests (and seed 001's table) report them."""
    from remedy.health.nccl import parse_nccl

    run = parse_nccl(nccl_output([NodeHealth.healthy(), NodeHealth.healthy()])[1])
    assert run.ranks == 16
    for row in run.rows[-5:]:
        h = row.out_of_place
        assert h.algbw_gbps == pytest.approx(row.size_bytes / h.time_us / 1e3, rel=1e-3)
        assert h.busbw_gbps == pytest.approx(h.algbw_gbps * 2 * 15 / 16, rel=1e-3)
    # seed 001's own 16-GPU figures obey the same math: 16 MB at 398 us p50 -> 42.2 GB/s AlgBW, 79.1 BusBW
    assert 16 * MIB / 398 / 1e3 == pytest.approx(42.2, abs=0.05)
    assert 42.2 * 2 * 15 / 16 == pytest.approx(79.1, abs=0.05)


def test_a_group_check_is_one_indexed_job_spread_one_pod_per_node(cluster, node):
    """The multi-node NCCL sweep: one Indexed Job over the group; node affinity names the nodes and pod
    anti-affinity keeps two pods off one node, so the simulator's scheduler (like kube-scheduler) spreads it —
    it no longer pins a pod to every node a label selects."""
    spec = next(s for s in EXTENDED if s.multi_node)
    group = cluster.node_names()[:3]
    job = manifest(spec, f"group-{next(_names)}", group)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 3
    logs = run_job(cluster, spec, group, job)
    assert sorted(n for n, _ in logs) == group  # one pod on each node of the group
    assert all(all(n in text for n in group) for _, text in logs)  # every rank reports the whole group's sweep
    # the same pods without the anti-affinity: nothing keeps them apart but their GPUs
    job = manifest(spec, f"stacked-{next(_names)}", group)
    del job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    for c in job["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    logs = run_job(cluster, spec, group, job)
    assert len({n for n, _ in logs}) == 1  # first fit: all three on one node


@pytest.mark.parametrize("check", ["dcgm-diag", "nccl"])
def test_a_gpu_check_without_a_gpu_request_finds_no_gpu(cluster, node, check):
    """What a real node does with a GPU check that requests no nvidia.com/gpu: the device plugin gives its
    container none, the tool finds nothing to test and the check fails — the simulator no longer runs it by its
    label alone."""
    spec = next(s for s in EXTENDED if s.check == check and not s.multi_node)
    job = manifest(spec, f"no-gpu-{next(_names)}", [node])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"  # as gpu-remedy renders it
    del container["resources"]
    ((_, log),) = run_job(cluster, spec, [node], job)
    result = None
    try:
        result = parse_check_output(spec.check, log, SETTINGS)
    except Exception as exc:  # noqa: BLE001 — unreadable output fails the check (tasks.health.judge_job)
        assert "GPU" in str(exc) or "device" in str(exc)
    assert result is None or result.verdict is Verdict.FAIL
    assert "no CUDA-capable device" in log or "No GPUs were found" in log


def test_a_check_in_an_image_without_its_tool_cannot_start(cluster, node):
    """The bug the simulator used to hide: every check ran in the DCGM image, which has no all_reduce_perf. A real
    node answers StartError (exit 128, executable file not found)."""
    spec = next(s for s in EXTENDED if s.id == "nccl-single-node")
    job = manifest(spec, f"wrong-image-{next(_names)}", [node])
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
    ((_, log),) = run_job(cluster, spec, [node], job)
    assert 'exec: "all_reduce_perf": executable file not found in $PATH' in log
    pod = next(p for p in cluster.store.objects("Pod", NS) if p["metadata"]["labels"].get("job-name") ==
               job["metadata"]["name"])
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 128
