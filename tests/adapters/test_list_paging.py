"""Every list the Kubernetes adapter makes is read in pages (`limit` / `continue`), and an expired continue token
(410, as etcd's compaction causes) restarts the list once. Against the simulator over HTTP."""

from __future__ import annotations

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.errors import RemedyError
from tests.fixtures.sim import settings_for


class Spy:
    """Wraps one client method: records each call's limit / continue; `between_pages` runs before each continued
    page is requested (a compaction there makes the page's token expire, as on a real cluster)."""

    def __init__(self, fn, between_pages=None) -> None:
        self.fn, self.between_pages, self.calls = fn, between_pages, []

    def __call__(self, *args, **kwargs):
        self.calls.append((kwargs.get("limit"), kwargs.get("_continue")))
        if kwargs.get("_continue") and self.between_pages:
            self.between_pages()
        return self.fn(*args, **kwargs)


@pytest.fixture
def paged(sim):
    """Lists made every time (no node cache): the paging of each call is what is spied on."""
    with KubernetesCluster(settings_for(sim, cluster={"list_page_size": 3}), watch_nodes=False) as c:
        yield c


def test_the_node_caches_list_is_paged_too(sim):
    """The watch-fed node cache lists through the same pager (remedy.adapters.kubernetes.paged_list)."""
    from remedy.adapters.kubernetes import NodeCache

    settings = settings_for(sim, cluster={"list_page_size": 3})
    with KubernetesCluster(settings, watch_nodes=False) as c:
        cache = NodeCache(c._cfg, settings)
        spy = cache._core.list_node = Spy(cache._core.list_node)
        cache.start()
        try:
            assert cache.synced.wait(10) and len(cache.nodes()) == 16
            pages = [call for call in spy.calls if call[0] == 3]
            assert len(pages) == 6 and pages[0][1] is None and all(token for _, token in pages[1:])
        finally:
            cache.stop()


def test_gpu_nodes_are_listed_in_pages(sim, paged):
    spy = paged.core.list_node = Spy(paged.core.list_node)
    nodes = paged.list_gpu_nodes()
    assert len(nodes) == 16 == len({n.name for n in nodes})
    assert len(spy.calls) == 6 and all(limit == 3 for limit, _ in spy.calls)  # 3+3+3+3+3+1
    assert spy.calls[0][1] is None and all(token for _, token in spy.calls[1:])


def test_every_list_of_the_adapter_pages(sim, paged):
    """Pods, PDBs and events too: each list call carries the page size."""
    spies = {name: Spy(getattr(paged.core, name)) for name in
             ("list_pod_for_all_namespaces", "list_namespaced_pod", "list_namespaced_event")}
    for name, spy in spies.items():
        setattr(paged.core, name, spy)
    pdb = paged.policy.list_namespaced_pod_disruption_budget = Spy(paged.policy.list_namespaced_pod_disruption_budget)
    paged.pods_on_node("gpu001")
    paged.gpu_workloads()
    paged.workload_nodes("default", "train")
    paged.workload_running_on("default", "train", "gpu001")
    paged.job_pods("nothing")
    paged.node_events("gpu001")
    paged._multiple_budgets("default", "no-such-pod")  # best effort: the pod read fails before the PDB list
    calls = [c for spy in (*spies.values(), pdb) for c in spy.calls]
    assert calls and all(limit == 3 for limit, _ in calls)
    all_pods = spies["list_pod_for_all_namespaces"].calls
    assert len([c for c in all_pods if c[1]]) >= 1  # the training job's pods take more than one page


def test_an_expired_continue_token_restarts_the_list_once(sim, paged):
    compactions = []

    def compact_once():
        if not compactions:
            compactions.append(sim.cluster.store.compact())

    spy = paged.core.list_node = Spy(paged.core.list_node, between_pages=compact_once)
    nodes = paged.list_gpu_nodes()
    assert len(nodes) == 16 == len({n.name for n in nodes})  # nothing twice from the abandoned pass
    starts = [i for i, (_, token) in enumerate(spy.calls) if token is None]
    assert starts == [0, 2]  # page 1, page 2 → 410; then the whole list again (6 pages)
    assert len(spy.calls) == 2 + 6


def test_a_token_that_keeps_expiring_is_an_error_not_a_loop(sim, paged):
    paged.core.list_node = Spy(paged.core.list_node, between_pages=sim.cluster.store.compact)
    with pytest.raises(RemedyError) as err:
        paged.list_gpu_nodes()
    assert getattr(err.value, "status", None) == 410
    assert "continue parameter is too old" in str(err.value)
