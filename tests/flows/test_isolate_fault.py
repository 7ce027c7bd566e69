"""isolate_fault on the simulator through the real Kubernetes client and a real Prefect server (test harness).

The simulator's smoke-test runner prints `step N loss: X` over simulated time and `loss: nan` when any node of the
Job's node set is divergent, so these tests exercise the real path: batch labels, one pod per node, log following.
"""

from __future__ import annotations

import math

import pytest

from remedy.sim.runners import RunResult, register_runner

pytestmark = pytest.mark.prefect

QUARANTINE = "remedy.io/quarantine"
BATCH = "divergence-job-id"


def _always_nan(node, health, job, cluster):
    """A user's training step whose code diverges on any hardware (the 'code' verdict)."""
    return RunResult(1, "step 1 loss: 9.8100\nstep 2 loss: nan\nFAILED", 2.0)


def _never_ends(node, health, job, cluster):
    """A training step that runs far longer than the time limit without printing a loss line."""
    return RunResult(0, "loading a very large dataset …\n" + "still loading …\n" * 5, 100_000.0)


register_runner("test-diverging-code", _always_nan)
register_runner("test-never-ends", _never_ends)


def job_template(check: str, selector: dict | None = None) -> dict:
    """A user's smoke-test Job manifest, as it would be written in YAML."""
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "train", "image": "example/train:1", "args": ["--steps", "5"]}]}
    if selector is not None:
        pod_spec["nodeSelector"] = selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "user-smoke"},
            "spec": {"template": {"metadata": {"labels": {"remedy.io/check": check}}, "spec": pod_spec}}}


@pytest.fixture
def pool(sim_factory, tmp_path, monkeypatch):
    """`pool(n, bad=[indexes])`: a simulator with n training nodes (+1 spare), runtime pointed at it."""
    from remedy import runtime
    from remedy.sim.faults import inject

    def start(n: int, bad: tuple[int, ...] = (), **sim_kwargs):
        sim = sim_factory(nodes=n + 1, spares=1, **sim_kwargs)
        monkeypatch.setenv("REMEDY_CLUSTER__MODE", "simulator")
        monkeypatch.setenv("REMEDY_CLUSTER__SIMULATOR_URL", sim.url)
        monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
        runtime.reset()
        active = sorted(x.name for x in runtime.cluster().list_gpu_nodes() if x.labels.get("remedy.io/pool") == "active")
        assert len(active) == n
        for i in bad:
            inject(sim.cluster, "divergent", active[i])
        return sim, active, [active[i] for i in bad]

    yield start
    runtime.reset()


def live(nodes: list[str]) -> dict[str, tuple[bool, str | None]]:
    """node → (carries the quarantine taint, its batch label)."""
    from remedy import runtime

    by_name = {n.name: n for n in runtime.cluster().list_gpu_nodes()}
    return {n: (by_name[n].has_taint(QUARANTINE), by_name[n].labels.get(BATCH)) for n in nodes}


def assert_all_released(nodes: list[str]) -> None:
    state = live(nodes)
    assert all(v == (False, None) for v in state.values()), {n: v for n, v in state.items() if v != (False, None)}


@pytest.mark.parametrize("n, bad_index", [(8, 5), (16, 11), (60, 37)])
def test_one_bad_node_found_within_log2_rounds(prefect_server, pool, n, bad_index):
    from flows.isolate_fault import isolate_fault
    from remedy import runtime

    _, active, bad = pool(n, bad=(bad_index,))
    out = isolate_fault(suspects=active)
    print(f"\nN={n}: found {out['bad_nodes']} in {out['rounds_used']} rounds ({out['tests_run']} smoke tests)")
    assert out["verdict"] == "infrastructure"
    assert out["bad_nodes"] == bad
    assert out["rounds_used"] <= math.ceil(math.log2(n)) + 1
    assert "Infrastructure" in out["verdict_text"] and bad[0] in out["verdict_text"]
    healthy = [x for x in active if x not in bad]
    assert sorted(out["released"]) == sorted(healthy)
    assert_all_released(healthy)
    assert live(bad) == {bad[0]: (True, None)}  # still quarantined, batch label gone
    assert runtime.ledger().get_node(bad[0]).state.value == "quarantined"
    assert {r["round"] for r in out["rounds"]} == set(range(1, out["rounds_used"] + 1))


def test_two_bad_nodes_in_60_found(prefect_server, pool):
    from prefect import get_client

    from flows.isolate_fault import isolate_fault

    _, active, bad = pool(60, bad=(4, 41))
    state = isolate_fault(suspects=active, return_state=True)
    out = state.result()
    with get_client(sync_client=True) as client:  # filtering runs by a blamed node finds this run, by no other
        tags = set(client.read_flow_run(state.state_details.flow_run_id).tags)
    assert {f"node:{b}" for b in bad} | {"stage:isolate"} <= tags, tags
    assert not {f"node:{n}" for n in active if n not in bad} & tags, tags
    print(f"\nN=60, 2 bad: found {out['bad_nodes']} in {out['rounds_used']} rounds ({out['tests_run']} smoke tests)")
    assert out["verdict"] == "infrastructure"
    assert sorted(out["bad_nodes"]) == sorted(bad)
    assert out["rounds_used"] <= math.ceil(math.log2(60)) + 1  # the two halves are searched side by side
    assert_all_released([x for x in active if x not in bad])
    assert all(v == (True, None) for v in live(bad).values())


def test_every_batch_diverges_is_code(prefect_server, pool, monkeypatch):
    from flows.isolate_fault import isolate_fault

    # Believing in at most 3 bad nodes, round 1's 4 diverging batches are more than bad nodes could explain.
    monkeypatch.setenv("REMEDY_LEMON__ISOLATION__MAX_BAD_NODES", "3")
    _, active, _ = pool(8)
    out = isolate_fault(suspects=active, smoke_test=job_template("test-diverging-code", {BATCH: "<batch>"}))
    assert out["verdict"] == "code", out["reason"]
    assert out["bad_nodes"] == [] and out["held"] == []
    assert out["rounds_used"] == 1 and out["tests_run"] == 4
    assert all(r["outcome"] == "diverged" for r in out["rounds"])
    assert out["verdict_text"].startswith("Code:")
    assert_all_released(active)


def test_four_scattered_bad_nodes_are_found_not_released_as_code(prefect_server, pool):
    """One bad node in each of round 1's four batches: every batch diverges, but four bad nodes explain that."""
    from flows.isolate_fault import isolate_fault

    _, active, bad = pool(8, bad=(0, 3, 4, 7))
    out = isolate_fault(suspects=active)
    assert [r["outcome"] for r in out["rounds"] if r["round"] == 1] == ["diverged"] * 4
    assert out["verdict"] == "infrastructure", out["reason"]
    assert sorted(out["bad_nodes"]) == sorted(bad)
    assert (out["rounds_used"], out["tests_run"], out["tests_bound"]) == (2, 12, 7)  # ⌈log2 C(8,4)⌉ = ⌈log2 70⌉
    assert "⌈log2 C(8,4)⌉ = 7" in out["verdict_text"]
    assert_all_released([x for x in active if x not in bad])
    assert all(v == (True, None) for v in live(bad).values())


def test_minimum_node_count_is_respected(prefect_server, pool):
    """min_nodes=3: no smoke test ever runs on fewer than 3 nodes; the bad node is named within its batch."""
    from flows.isolate_fault import isolate_fault

    _, active, bad = pool(16, bad=(2,))
    out = isolate_fault(suspects=active, min_nodes=3)
    sizes = [len(r["nodes"]) for r in out["rounds"]]
    assert min(sizes) >= 3, sizes
    assert out["verdict"] == "infrastructure"
    assert out["bad_nodes"] == []  # could not go down to one node without going below the minimum
    assert len(out["suspect_batches"]) == 1 and bad[0] in out["suspect_batches"][0]
    assert 3 <= len(out["suspect_batches"][0]) < 6
    held = out["suspect_batches"][0]
    assert sorted(out["held"]) == sorted(held)
    assert_all_released([x for x in active if x not in held])


def test_healthy_batches_released_before_the_search_ends(prefect_server, pool):
    """Round-1 healthy nodes are untainted (ledger action timestamps) before the last round's smoke test starts."""
    from flows.isolate_fault import isolate_fault
    from remedy import runtime

    _, active, bad = pool(16, bad=(13,))
    out = isolate_fault(suspects=active)
    assert out["rounds_used"] >= 3
    led = runtime.ledger()
    round1_healthy = [n for r in out["rounds"] if r["round"] == 1 and r["outcome"] == "healthy" for n in r["nodes"]]
    assert len(round1_healthy) == 12
    untainted = {a.node: a.finished_at for a in led.actions(kind="untaint_node") if a.outcome.value == "succeeded"}
    smoke = [a for a in led.actions(kind="smoke_test")]
    last_round_labels = {r["batch"] for r in out["rounds"] if r["round"] == out["rounds_used"]}
    last_started = min(a.started_at for a in smoke if a.detail.get("batch") in last_round_labels)
    assert all(untainted[n] < last_started for n in round1_healthy)
    assert all(out["released_at"][n]["round"] == 1 for n in round1_healthy)


def test_empty_suspect_list_is_refused(prefect_server, pool):
    from flows.isolate_fault import isolate_fault

    _, active, _ = pool(8)
    with pytest.raises(ValueError, match="suspect list is empty"):
        isolate_fault(suspects=[])
    assert_all_released(active)


def test_template_without_node_selector_slot_is_refused(prefect_server, pool):
    from flows.isolate_fault import isolate_fault
    from tasks.isolation import SmokeTestTemplateError

    _, active, _ = pool(8, bad=(1,))
    with pytest.raises(SmokeTestTemplateError, match="no node-selector slot"):
        isolate_fault(suspects=active, smoke_test=job_template("smoke-test", {"remedy.io/pool": "active"}))
    with pytest.raises(SmokeTestTemplateError, match="no node-selector slot"):
        isolate_fault(suspects=active, smoke_test=job_template("smoke-test"))
    assert_all_released(active)


def test_unknown_node_and_bad_pattern_are_refused(prefect_server, pool):
    from flows.isolate_fault import isolate_fault
    from remedy.errors import NodeNotFound

    _, active, _ = pool(8)
    with pytest.raises(NodeNotFound, match="gpu999"):
        isolate_fault(suspects=active + ["gpu999"])
    with pytest.raises(ValueError, match="not a valid regular expression"):
        isolate_fault(suspects=active, pattern="loss: (nan")
    with pytest.raises(ValueError, match="min_nodes=9"):
        isolate_fault(suspects=active, min_nodes=9)
    assert_all_released(active)


def test_pattern_never_matching_in_time_releases_every_node(prefect_server, pool):
    from flows.isolate_fault import isolate_fault
    from remedy import runtime
    from tasks.isolation import IsolationTimedOut

    _, active, _ = pool(8)
    with pytest.raises(IsolationTimedOut, match="never matched .* within 1 s"):
        isolate_fault(suspects=active, smoke_test=job_template("test-never-ends", {BATCH: "x"}), time_limit_seconds=1)
    assert_all_released(active)
    # The Jobs were stopped, not left running on the released nodes.
    jobs = runtime.cluster().batch.list_namespaced_job(runtime.settings().cluster.jobs_namespace)
    assert [j.metadata.name for j in jobs.items if j.metadata.name.startswith("smoke-")] == []


def test_error_mid_search_releases_every_node(prefect_server, pool):
    """The API server refuses the smoke-test Job after the pool is quarantined: every node is still released."""
    from flows.isolate_fault import isolate_fault
    from remedy import runtime
    from remedy.errors import RemedyError

    _, active, _ = pool(8, bad=(0,))
    template = job_template("smoke-test", {BATCH: "x"})
    del template["spec"]["template"]["spec"]["containers"][0]["image"]  # the API server answers 422
    with pytest.raises(RemedyError, match=r"create job [\w-]+/smoke-\w+ rejected by the API server: .*image: Required"):
        isolate_fault(suspects=active, smoke_test=template)
    assert_all_released(active)
    taints = [a for a in runtime.ledger().actions(kind="taint_node") if a.outcome.value == "succeeded"]
    assert sorted(a.node for a in taints) == sorted(active)  # they had been quarantined


def test_dry_run_touches_nothing(prefect_server, pool):
    from flows.isolate_fault import isolate_fault

    _, active, _ = pool(8, bad=(3,))
    out = isolate_fault(suspects=active, dry_run=True)
    assert out["status"] == "planned" and len(out["plan"]) == 4
    assert sum(len(b) for b in out["plan"]) == 8
    assert_all_released(active)


def _demo(tmp_path, *args: str):
    import json
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    env = os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value()}
    proc = subprocess.run([sys.executable, "-m", "remedy.cli", "demo", "--scenario", "nan-loss", "--workdir",
                           str(tmp_path), *args], env=env, capture_output=True, text=True, timeout=300)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 and "--json" in args else None)


def test_demo_nan_loss_names_the_planted_nodes(prefect_server, tmp_path):
    proc, out = _demo(tmp_path, "--bad", "gpu017,gpu042", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out["status"] == "infrastructure" and out["verdict"] == "infrastructure"
    assert sorted(out["found"]) == ["gpu017", "gpu042"] == sorted(out["planted"])
    assert out["rounds_used"] <= math.ceil(math.log2(60)) + 1
    assert out["released"] == 58 and sorted(out["held"]) == ["gpu017", "gpu042"]
    assert "gpu017" in out["verdict_text"] and "Infrastructure" in out["verdict_text"]
    smoke = [a for a in out["actions"] if a["kind"] == "smoke_test"]
    assert len(smoke) == out["tests_run"] and all(a["outcome"] == "succeeded" for a in smoke)


def test_demo_nan_loss_refuses_a_node_outside_the_pool(pool, tmp_path):
    from remedy.errors import RemedyError
    from remedy.scenarios import DemoContext, all_scenarios

    sim, active, _ = pool(8)
    ctx = DemoContext(sim=sim, workdir=tmp_path, quiet=True, options={"bad": ["gpu999"]})
    with pytest.raises(RemedyError, match=rf"--bad gpu999: not in the training pool \({active[0]} … {active[-1]}, 8 nodes\)"):
        all_scenarios()["nan-loss"].run(ctx)
    ctx.options["bad"] = ["gpu002", "gpu002"]
    with pytest.raises(RemedyError, match="names a node twice"):
        all_scenarios()["nan-loss"].run(ctx)
    assert_all_released(active)
    assert not any(sim.cluster.health_of(n).divergent for n in active)  # nothing was planted


def test_batch_manifest_targets_exactly_the_batch():
    from tasks.isolation import SmokeTestTemplateError, batch_manifest, check_template

    template = check_template(job_template("smoke-test", {BATCH: "<batch>", "nvidia.com/gpu.present": "true"}))
    m = batch_manifest(template, job_name="smoke-abc", label_value="abc", nodes=5, namespace="gpu-remedy",
                       quarantine_taint=QUARANTINE, time_limit_seconds=90)
    pod = m["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {BATCH: "abc", "nvidia.com/gpu.present": "true"}
    assert (m["spec"]["parallelism"], m["spec"]["completions"], m["spec"]["backoffLimit"]) == (5, 5, 0)
    assert m["spec"]["activeDeadlineSeconds"] == 150
    assert {"key": QUARANTINE, "operator": "Exists"} in pod["tolerations"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [{"labelSelector": {"matchLabels": {BATCH: "abc"}}, "topologyKey": "kubernetes.io/hostname"}]
    assert m["spec"]["template"]["metadata"]["labels"][BATCH] == "abc"
    assert template["spec"]["template"]["spec"]["nodeSelector"][BATCH] == "<batch>"  # the template is untouched
    pinned = job_template("smoke-test", {BATCH: "x", "kubernetes.io/hostname": "gpu001"})
    with pytest.raises(SmokeTestTemplateError, match="pins one host"):
        check_template(pinned)
    with pytest.raises(SmokeTestTemplateError, match="must be kind Job"):
        check_template({"kind": "Pod"})
