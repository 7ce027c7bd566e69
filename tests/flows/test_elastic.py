"""replace-node with an elastic job, end to end on the simulator with a real Prefect server (issue 34 items 3-5, 7):
a node fails (XID 79); the job saves from its survivors if it asks to, then keeps running one node short (or moves
onto its hot spare) while the spare is promoted, and grows back to full size."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from remedy.domain.outcome import Outcome
from remedy.elastic import (
    CHECKPOINT_ON_FAILURE,
    ELASTIC_NODES,
    ELASTIC_RESTART,
    FULL_SIZE,
    HOT,
    SPARE_ROLE,
)
from tests.approvals.helpers import remedy_env  # noqa: F401 - a fixture
from tests.fixtures.prefect import run_to_state, run_to_state_result
from tests.fixtures.workloads import pytorchjob
from tests.flows.test_workload_kinds import PT, start_with

pytestmark = pytest.mark.prefect

NS = "training"


def adopt_validated(runtime) -> None:
    """The ledger knows every node as the cluster shows it; spares validated just now (as burn-in leaves them)."""
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
        led.transition(n.name, n.state, reason="test: adopted", requested_by="test")
        if n.state and n.state.value == "spare":
            led.record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")


def spares(runtime) -> list[str]:
    return sorted(n.name for n in runtime.cluster().list_gpu_nodes() if n.state and n.state.value == "spare")


def steps(out: dict) -> list[str]:
    return [r["step"] for r in out["timeline"]]


def wait_size(runtime, job: str, size: tuple[int, int]) -> None:
    deadline = time.monotonic() + 10
    while runtime.cluster().workload_size(NS, job) != size:
        assert time.monotonic() < deadline, runtime.cluster().workload_size(NS, job)
        time.sleep(0.1)


def elastic_indexed_job(nodes: int, low: int, **annotations: str) -> dict:
    """The simulator's pretraining Job as an elastic Indexed Job (completions = parallelism, both resized together)
    that declares its range the way torchrun takes it (--nnodes=MIN:MAX)."""
    from remedy.sim.objects import make_training_job

    job = make_training_job(nodes)
    job["spec"]["completionMode"] = "Indexed"
    job["metadata"]["annotations"] |= {ELASTIC_NODES: f"{low}:{nodes}", **annotations}
    return job


def start_job(sim_factory, job: dict, **cluster):
    server = sim_factory(training_job=False, **cluster)
    cfg = k8s.Configuration()
    cfg.host = server.url
    with k8s.ApiClient(cfg) as api:
        k8s.BatchV1Api(api).create_namespaced_job(NS, job)
        core = k8s.CoreV1Api(api)
        deadline = time.monotonic() + 10
        while sum(p.status.phase == "Running" for p in core.list_namespaced_pod(NS).items) < job["spec"]["parallelism"]:
            assert time.monotonic() < deadline, "the Job did not start"
            time.sleep(0.05)
    return server


def make_hot(runtime, node: str) -> None:
    """What refill_hot_spares does, done by hand to start: the spare joins the job's pool, labelled hot."""
    core = k8s.CoreV1Api(runtime.cluster().api)
    live = core.read_node(node)
    taints = [t for t in live.spec.taints or [] if t.key != "remedy.io/spare"]
    core.patch_node(node, {"metadata": {"labels": {"remedy.io/pool": "active", SPARE_ROLE: HOT}},
                           "spec": {"taints": [t.to_dict() for t in taints] or None}})
    runtime.ledger().transition(node, runtime.cluster().get_node(node).state, reason="test: hot spare",
                                requested_by="test")


def test_an_elastic_pytorchjob_continues_one_node_short_and_grows_back_onto_the_spare(
        prefect_server, sim_factory, remedy_env):
    """PyTorchJob with elasticPolicy 11..15 workers + master (12..16 nodes) that restarts in 60 s: shrinking costs
    16 + 3 + 16 node-min against 16 × (4 + 31) for stopping the gang; it runs at 15 while the spare joins."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    job = pytorchjob("bert", 15, elastic=(11, 15))
    job["metadata"]["annotations"] = {ELASTIC_RESTART: "60"}
    server = start_with(sim_factory, PT, job, 16, nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__KIND="PyTorchJob", WORKLOAD__JOB="bert")
    adopt_validated(runtime)
    warm = spares(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    state, out = run_to_state(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)

    assert state.is_completed() and out["status"] == Outcome.REPLACED.value, out
    plan = out["continuation"]
    assert plan["choice"] == "shrink" and plan["shrink_to"] == 15 and plan["grow_to"] == 16, plan
    assert plan["costs"] == {"stop-and-replace": 560.0, "shrink": 35.0}
    assert out["checkpoint_on_failure"]["asked"] is False  # it declared nothing
    order = steps(out)
    assert order.index("job shrunk") < order.index("drained") < order.index("spare ready") \
        < order.index("job grown back") < order.index("job resumed"), order
    spare = out["replacement"]
    assert spare in warm and out["workload"]["full"], out
    # the cluster: back at 15 workers + master, on the spare, not on the failed node; the note is gone
    co = k8s.CustomObjectsApi(runtime.cluster().api)
    obj = co.get_namespaced_custom_object(*PT, "bert")
    assert obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 15
    assert FULL_SIZE not in (obj["metadata"].get("annotations") or {})
    wait_size(runtime, "bert", (16, 16))
    nodes = runtime.cluster().workload_nodes(NS, "bert")
    assert spare in nodes and "gpu003" not in nodes
    # the ledger: the shrink to 15 and the grow-back are two actions of the incident, each done once
    acts = {a.kind: a for a in runtime.ledger().actions() if a.kind in ("shrink_workload", "grow_workload")}
    assert acts["shrink_workload"].detail["nodes"] == 15 and acts["grow_workload"].detail["nodes"] == 16
    assert runtime.ledger().get_node("gpu003").state.value == "repair"


def test_a_pytorchjob_that_reloads_cold_stops_and_replaces_as_before(prefect_server, sim_factory, remedy_env):
    """The same job declaring no elastic restart time: each restart is taken as a 31-min reload, so two of them
    cost more than waiting 4 min for the spare: the job is never shrunk."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_with(sim_factory, PT, pytorchjob("bert", 15, elastic=(11, 15)), 16, nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__KIND="PyTorchJob", WORKLOAD__JOB="bert")
    adopt_validated(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "replaced", out
    assert out["continuation"]["choice"] == "stop-and-replace"
    assert "job shrunk" not in steps(out) and "grown" not in out
    assert not [a for a in runtime.ledger().actions() if a.kind == "shrink_workload"]
    wait_size(runtime, "bert", (16, 16))


def test_an_elastic_indexed_job_saves_then_swaps_its_hot_spare_and_a_warm_spare_turns_hot(
        prefect_server, sim_factory, remedy_env):
    """An elastic Indexed Job (12:16) that asks to checkpoint on failure and holds one hot spare: it saves from
    its survivors before the drain, moves onto the hot spare at the drain, and a warm spare takes the hot place."""
    from flows.replace_node import replace_node
    from remedy.sim.checkpoints import CADENCE
    from remedy.sim.faults import inject

    job = elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60", CHECKPOINT_ON_FAILURE: "annotation",
                                         CADENCE: "36000"})
    server = start_job(sim_factory, job, nodes=19, spares=3)
    # one failure an hour keeps a hot spare worth its idle node at 16 nodes (remedy.spares.hot)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain", SPARES__HOT_SPARES="1",
                         SPARES__NODE_MTBF_HOURS="1")
    adopt_validated(runtime)
    hot, *warm = spares(runtime)
    make_hot(runtime, hot)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)

    assert out["status"] == "replaced", out
    assert out["checkpoint_on_failure"]["asked"] and out["checkpoint_on_failure"]["saved"], out
    assert out["continuation"]["choice"] == "hot-swap" and out["replacement"] == hot, out["continuation"]
    assert "job shrunk" not in steps(out)
    refill = out["hot_spares"]
    assert refill["target"] == 1 and refill["made_hot"] in warm, refill
    cluster = runtime.cluster()
    wait_size(runtime, "llm-pretrain", (16, 16))
    nodes = cluster.workload_nodes(NS, "llm-pretrain")
    assert hot in nodes and "gpu003" not in nodes
    assert SPARE_ROLE not in cluster.get_node(hot).labels  # a member now
    new_hot = cluster.get_node(refill["made_hot"])
    assert new_hot.labels.get(SPARE_ROLE) == HOT and new_hot.labels.get("remedy.io/pool") == "active"
    assert ("remedy.io/spare", "NoSchedule") not in new_hot.taints
    assert refill["made_hot"] not in nodes  # idle in the pool until the next failure
    ann = k8s.BatchV1Api(cluster.api).read_namespaced_job("llm-pretrain", NS).metadata.annotations
    assert ann["remedy.io/last-checkpoint"] >= ann["remedy.io/checkpoint-requested"]


def test_an_elastic_indexed_job_shrinks_completions_and_parallelism_together_and_grows_back(
        prefect_server, sim_factory, remedy_env):
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_job(sim_factory, elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60"}), nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain")
    adopt_validated(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)
    assert out["status"] == "replaced" and out["continuation"]["choice"] == "shrink", out
    shrink = next(a for a in runtime.ledger().actions() if a.kind == "shrink_workload")
    assert shrink.detail["nodes"] == 15
    spec = k8s.BatchV1Api(runtime.cluster().api).read_namespaced_job("llm-pretrain", NS).spec
    assert spec.parallelism == spec.completions == 16
    wait_size(runtime, "llm-pretrain", (16, 16))
    assert out["replacement"] in runtime.cluster().workload_nodes(NS, "llm-pretrain")


def test_a_dry_run_weighs_the_shrink_but_leaves_the_job_as_it_is(prefect_server, sim_factory, remedy_env):
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_job(sim_factory, elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60"}), nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain")
    adopt_validated(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0, dry_run=True)
    assert out["dry_run"] and out["continuation"]["choice"] == "shrink", out
    assert out["grown"]["changed"] is False  # nothing was shrunk, so nothing grows
    job = k8s.BatchV1Api(runtime.cluster().api).read_namespaced_job("llm-pretrain", NS)
    assert job.spec.parallelism == job.spec.completions == 16
    assert FULL_SIZE not in (job.metadata.annotations or {})
    assert "gpu003" in runtime.cluster().workload_nodes(NS, "llm-pretrain")


def test_spare_cycle_fills_the_hot_pool_before_any_failure(prefect_server, sim_factory, remedy_env):
    """spares.hot_spares: 2 and a job failing often enough that both pay (remedy.spares.hot): the first spare cycle
    makes two warm spares hot (untainted, in the job's pool, idle), the third stays warm; the next cycle makes no
    more."""
    from flows.spare_cycle import spare_cycle

    server = start_job(sim_factory, elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60"}), nodes=19, spares=3)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain", SPARES__HOT_SPARES="2",
                         SPARES__NODE_MTBF_HOURS="1")
    adopt_validated(runtime)
    warm = spares(runtime)
    out = spare_cycle()
    fill = out["hot_spares"]
    assert fill["target"] == 2 and fill["held"] == 2 and len(fill["made_hot"]) == 2, fill
    cluster = runtime.cluster()
    for name in fill["made_hot"]:
        node = cluster.get_node(name)
        assert name in warm and node.labels.get(SPARE_ROLE) == HOT and node.labels.get("remedy.io/pool") == "active"
        assert ("remedy.io/spare", "NoSchedule") not in node.taints
        assert name not in cluster.workload_nodes(NS, "llm-pretrain")  # idle until a failure
    assert spares(runtime) == sorted(set(warm) - set(fill["made_hot"]))  # one warm spare left for the next failure
    again = spare_cycle()["hot_spares"]
    assert again["made_hot"] == () and again["held"] == 2, again


def test_spare_cycle_leaves_the_hot_pool_empty_when_none_is_configured(prefect_server, sim_factory, remedy_env):
    from flows.spare_cycle import spare_cycle

    server = start_job(sim_factory, elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60"}), nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain", SPARES__NODE_MTBF_HOURS="1")
    adopt_validated(runtime)
    warm = spares(runtime)
    out = spare_cycle()
    assert "hot_spares" not in out
    assert spares(runtime) == warm
    assert not [n for n in runtime.cluster().list_gpu_nodes() if n.labels.get(SPARE_ROLE) == HOT]


def test_a_shrunk_job_that_checkpoints_on_failure_saves_again_before_it_grows_back(
        prefect_server, sim_factory, remedy_env):
    """Growing back restarts the job: one that declares remedy.io/checkpoint-on-failure is asked to save first (the
    same bounded contract as before the drain), so the restart at full size loses nothing trained one node short."""
    from flows.replace_node import replace_node
    from remedy.sim.checkpoints import CADENCE
    from remedy.sim.faults import inject

    job = elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60", CHECKPOINT_ON_FAILURE: "annotation",
                                         CADENCE: "36000"})
    server = start_job(sim_factory, job, nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain")
    adopt_validated(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)

    assert out["status"] == "replaced" and out["continuation"]["choice"] == "shrink", out
    assert out["checkpoint_on_failure"]["saved"], out["checkpoint_on_failure"]
    grow = out["checkpoint_before_grow"]
    assert grow["asked"] and grow["saved"], grow
    spare = out["replacement"]
    asks = [a for a in runtime.ledger().actions() if a.kind == "request_checkpoint"]
    assert sorted(a.node for a in asks) == sorted(["gpu003", spare])  # two requests, neither replayed for the other
    ask = next(a for a in asks if a.node == spare)
    grown = next(a for a in runtime.ledger().actions() if a.kind == "grow_workload")
    assert ask.finished_at is not None and ask.finished_at <= grown.started_at  # asked before the grow-back
    order = steps(out)
    assert order.index("job shrunk") < order.index("spare ready") < order.index("job grown back"), order
    ann = k8s.BatchV1Api(runtime.cluster().api).read_namespaced_job("llm-pretrain", NS).metadata.annotations
    assert ann["remedy.io/last-checkpoint"] >= ann["remedy.io/checkpoint-requested"]  # the second request answered
    wait_size(runtime, "llm-pretrain", (16, 16))


def test_a_shrunk_job_that_declares_no_checkpoint_on_failure_grows_back_unasked(
        prefect_server, sim_factory, remedy_env):
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    server = start_job(sim_factory, elastic_indexed_job(16, 12, **{ELASTIC_RESTART: "60"}), nodes=18, spares=2)
    runtime = remedy_env(sim=server, WORKLOAD__JOB="llm-pretrain")
    adopt_validated(runtime)
    inject(server.cluster, "xid", "gpu003", gpu=0, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=0)
    assert out["continuation"]["choice"] == "shrink" and out["checkpoint_before_grow"]["asked"] is False, out
    assert not [a for a in runtime.ledger().actions() if a.kind == "request_checkpoint"]
    wait_size(runtime, "llm-pretrain", (16, 16))
