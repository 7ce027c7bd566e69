"""The workload port's elastic side (remedy.adapters.workloads + remedy.elastic) over HTTP against the simulator:
an Indexed Job declares its range (remedy.io/elastic-nodes) and is resized inside it, completions with parallelism
(kubernetes pkg/controller/job: elastic Indexed Jobs); gpu-remedy's notes round-trip as annotations."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from remedy.adapters.workloads import WorkloadRefused
from remedy.config import WorkloadKind
from remedy.elastic import ELASTIC_NODES, FULL_SIZE
from tests.adapters.test_workloads import adapter, wait


@pytest.fixture
def sim(sim_factory):
    return sim_factory(nodes=10, spares=2, training_job=False)


@pytest.fixture
def batch(sim):
    cfg = k8s.Configuration()
    cfg.host = sim.url
    with k8s.ApiClient(cfg) as client:
        yield k8s.BatchV1Api(client)


def indexed(nodes: int, declared: str | None, *, completions: int | None = None) -> dict:
    from remedy.sim.objects import make_training_job

    job = make_training_job(nodes)
    job["spec"]["completionMode"] = "Indexed"
    job["spec"]["completions"] = completions or nodes
    if declared:
        job["metadata"]["annotations"][ELASTIC_NODES] = declared
    return job


def test_an_elastic_indexed_job_resizes_inside_the_range_it_declares(sim, batch):
    batch.create_namespaced_job("training", indexed(8, "6:8"))
    with adapter(sim, WorkloadKind.JOB, "llm-pretrain") as c:
        work = c.workload("training", "llm-pretrain")
        wait(lambda: work.state().ready == 8, what="8 pods ready")
        assert work.state().elastic == (6, 8)
        assert work.resize(7).changed
        spec = batch.read_namespaced_job("llm-pretrain", "training").spec
        assert (spec.parallelism, spec.completions) == (7, 7)
        wait(lambda: work.state().ready == 7, what="one pod gone")
        with pytest.raises(WorkloadRefused, match="outside the range it declares"):
            work.resize(5)
        assert c.resize_workload("training", "llm-pretrain", 9)["refused"]
        assert batch.read_namespaced_job("llm-pretrain", "training").spec.parallelism == 7
        # gpu-remedy's note on the workload: set, read back, removed
        work.annotate({FULL_SIZE: "8"}, "shrunk from 8")
        assert work.annotations()[FULL_SIZE] == "8"
        work.annotate({FULL_SIZE: None}, "grown back")
        assert FULL_SIZE not in work.annotations()


def test_an_indexed_job_is_elastic_only_when_declared_and_completions_follow_parallelism(sim, batch):
    batch.create_namespaced_job("training", indexed(4, None))
    other = indexed(4, "2:4", completions=8)
    other["metadata"]["name"] = "fixed-completions"
    batch.create_namespaced_job("training", other)
    with adapter(sim, WorkloadKind.JOB, "llm-pretrain") as c:
        assert c.workload("training", "llm-pretrain").state().elastic is None
        assert c.workload("training", "fixed-completions").state().elastic is None

