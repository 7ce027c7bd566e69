"""The Kubernetes adapter through the official client, over HTTP, against the cluster simulator (and a real control
plane where KUBE_CONTROL_PLANE_BIN points at one)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from remedy.adapters.cluster import NodeJobSpec, Taint
from remedy.adapters.kubernetes import CONFLICT_ATTEMPTS, KubernetesCluster
from remedy.errors import ClusterUnreachable, NodeNotFound
from tests.fixtures.real_k8s import simulator_or_real
from tests.fixtures.sim import settings_for


@pytest.fixture(params=["simulator", "real"])
def sim(request):
    """The simulator, and a real control plane where one is built (tests/fixtures/real_k8s.py)."""
    return simulator_or_real(request)


@pytest.fixture
def cluster(sim):
    with KubernetesCluster(settings_for(sim)) as c:
        yield c


def test_lists_gpu_nodes_with_topology(cluster):
    nodes = cluster.list_gpu_nodes()
    assert len(nodes) == 16
    n = next(n for n in nodes if n.name == "gpu001")
    assert n.gpu_count == 8 and n.gpu_model
    assert n.topology.rack and n.topology.switch and n.topology.pdu
    spares = [n for n in nodes if n.state and n.state.value == "spare"]
    assert len(spares) == 2
    assert all(s.has_taint("remedy.io/spare") for s in spares)
    assert len({s.topology.rack for s in spares}) == 2  # spread across racks


def test_cordon_is_idempotent_and_recorded_as_event(cluster):
    first = cluster.cordon("gpu003", reason="XID 79", by="test")
    again = cluster.cordon("gpu003", reason="XID 79", by="test")
    assert first.changed and not again.changed
    node = cluster.get_node("gpu003")
    assert node.unschedulable and node.annotations["remedy.io/cordoned-by"] == "test"
    reasons = [e["reason"] for e in cluster.node_events("gpu003")]
    assert reasons.count("RemedyCordon") == 1
    assert cluster.uncordon("gpu003", reason="fixed", by="test").changed
    node = cluster.get_node("gpu003")
    assert not node.unschedulable and "remedy.io/cordoned-by" not in node.annotations


def test_the_same_note_twice_is_one_event_with_a_count(cluster):
    """client-go's EventCorrelator aggregates identical events (tools/record/events_cache.go): `kubectl describe
    node` shows one line with its count, not a twin per retry or per run of the same incident."""
    for _ in range(2):
        cluster.record_event("gpu005", reason="RemedyHeld", message="gpu005: held — rack rack-1 breaker open",
                             type="Warning")
    cluster.record_event("gpu005", reason="RemedyHeld", message="gpu005: held — cluster breaker open", type="Warning")
    held = sorted((e["message"], e["count"]) for e in cluster.node_events("gpu005") if e["reason"] == "RemedyHeld")
    assert held == [("gpu005: held — cluster breaker open", 1), ("gpu005: held — rack rack-1 breaker open", 2)]


def test_taints_merge_by_key_and_effect(cluster):
    cluster.set_taints("gpu004", add=[Taint("team.example/owner", "NoSchedule", "ml")])
    cluster.set_taints("gpu004", add=[Taint("remedy.io/quarantine", "NoSchedule")])
    # the same key and effect again replaces its value, never duplicates
    assert cluster.set_taints("gpu004", add=[Taint("team.example/owner", "NoSchedule", "infra")]).changed
    # the same key with another effect is another taint (as `kubectl taint` has it): both stay
    cluster.set_taints("gpu004", add=[Taint("remedy.io/quarantine", "NoExecute")])
    node = cluster.get_node("gpu004")
    assert node.taints == {("team.example/owner", "NoSchedule"): "infra",
                           ("remedy.io/quarantine", "NoSchedule"): "true",
                           ("remedy.io/quarantine", "NoExecute"): "true"}
    assert node.taint_effect("remedy.io/quarantine") == "NoExecute"  # the strongest of the key's effects
    assert node.has_taint("remedy.io/quarantine", "NoSchedule") and not node.has_taint("remedy.io/spare")
    # remove drops every effect of the key (`kubectl taint node gpu004 remedy.io/quarantine-`)
    assert cluster.set_taints("gpu004", remove=["remedy.io/quarantine"]).changed
    assert cluster.get_node("gpu004").taints == {("team.example/owner", "NoSchedule"): "infra"}
    assert not cluster.set_taints("gpu004", remove=["remedy.io/quarantine"]).changed


def test_a_key_with_two_effects_blocks_joining_on_either(cluster):
    """A provider's `nvidia.com/gpu:NoSchedule` is tolerated; the same key with NoExecute on top is a second taint
    that the tolerated set covers too, but an operator key with two effects is reported once per effect."""
    cluster.set_taints("gpu006", add=[Taint("nvidia.com/gpu", "NoSchedule", "present"),
                                      Taint("nvidia.com/gpu", "NoExecute", "present")])
    assert cluster.joined("gpu006") == (True, "Ready, schedulable, all GPUs allocatable")
    cluster.set_taints("gpu006", add=[Taint("team.example/hold", "NoSchedule"),
                                      Taint("team.example/hold", "NoExecute")])
    ok, why = cluster.joined("gpu006")
    assert not ok and why == "tainted team.example/hold:NoExecute, team.example/hold:NoSchedule"


def test_concurrent_taint_writers_both_land(cluster):
    """Taints are an atomic list server-side: concurrent writers must not lose each other's taint (409 → retry)."""
    errors = []

    def add(key):
        try:
            cluster.set_taints("gpu005", add=[Taint(key)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # each round of the race one writer lands, so k writers need up to k attempts: one fewer writer than the
    # adapter's attempts (client-go's DefaultRetry: 5) leaves one for another writer of the node (the kubelet's
    # heartbeat on the real lane). Six writers failed there once (CI, 2026-11-29): the sixth lost five rounds.
    writers = CONFLICT_ATTEMPTS - 1
    threads = [threading.Thread(target=add, args=(f"example.com/t{i}",)) for i in range(writers)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    assert {f"example.com/t{i}" for i in range(writers)} <= {k for k, _ in cluster.get_node("gpu005").taints}


def test_labels_set_and_removed(cluster):
    assert cluster.set_labels("gpu006", {"remedy.io/pool": "quarantined", "example.com/x": "1"}).changed
    assert cluster.get_node("gpu006").labels["remedy.io/pool"] == "quarantined"
    cluster.set_labels("gpu006", {"example.com/x": None})
    assert "example.com/x" not in cluster.get_node("gpu006").labels


def test_unknown_node_is_a_clear_error(cluster):
    with pytest.raises(NodeNotFound, match="node not found: gpu999"):
        cluster.cordon("gpu999", reason="x", by="test")


def test_dry_run_changes_nothing(sim):
    with KubernetesCluster(settings_for(sim), dry_run=True) as dry:
        change = dry.cordon("gpu007", reason="XID 79", by="test")
        assert change.dry_run and change.changed
        dry.set_taints("gpu007", add=[Taint("remedy.io/quarantine")])
        report = dry.drain("gpu007", grace_period_seconds=30, deadline_seconds=5)
        assert report.dry_run and report.evicted
        node = dry.get_node("gpu007")
        assert not node.unschedulable and not node.has_taint("remedy.io/quarantine")
        assert dry.pods_on_node("gpu007")  # nothing evicted
        # none of ours (a real node controller has filed its own RegisteredNode event for every node)
        assert [e for e in dry.node_events("gpu007") if e["reason"].startswith("Remedy")] == []


def test_drain_skips_daemonsets_and_mirror_pods(cluster):
    cluster.cordon("gpu007", reason="drain test", by="test")  # as in kubectl drain: nothing lands back on it
    report = cluster.drain("gpu007", grace_period_seconds=30, deadline_seconds=10)
    assert report.complete, report.not_evicted
    assert any("llm-pretrain" in p for p in report.evicted)
    assert any("DaemonSet" in s for s in report.skipped) and any("mirror" in s for s in report.skipped)
    left = cluster.pods_on_node("gpu007")
    assert left and all(
        "kubernetes.io/config.mirror" in (p["metadata"].get("annotations") or {})
        or any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])
        for p in left
    )


def test_drain_waits_for_pdb_then_succeeds(cluster, sim):
    from kubernetes import client as k8s

    policy = k8s.PolicyV1Api(cluster.api)
    pdb = {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "train-pdb", "namespace": "training"},
        # an integer minAvailable: maxUnavailable needs a controller with a scale subresource, and a Job has none
        "spec": {"minAvailable": 14, "selector": {"matchLabels": {"app": "llm-pretrain"}}},
    }
    policy.create_namespaced_pod_disruption_budget("training", pdb)

    def relax():
        time.sleep(1.5)
        policy.patch_namespaced_pod_disruption_budget(
            "train-pdb", "training", {"spec": {"minAvailable": 13}},
            _content_type="application/merge-patch+json",
        )

    threading.Thread(target=relax).start()
    report = cluster.drain("gpu009", grace_period_seconds=30, deadline_seconds=20)
    assert report.blocked_retries >= 1
    assert report.complete, report.not_evicted


def test_drain_reports_what_a_pdb_still_blocks_at_the_deadline(cluster):
    from kubernetes import client as k8s

    k8s.PolicyV1Api(cluster.api).create_namespaced_pod_disruption_budget("training", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "strict", "namespace": "training"},
        "spec": {"minAvailable": 14, "selector": {"matchLabels": {"app": "llm-pretrain"}}},
    })
    report = cluster.drain("gpu010", grace_period_seconds=30, deadline_seconds=1.5)
    assert not report.complete
    (key, why), = report.not_evicted.items()
    assert key.startswith("training/") and "disruption budget" in why


@pytest.mark.simulator_only("injects a fault into the simulator")
def test_drain_of_a_not_ready_node_force_deletes_what_its_kubelet_cannot_confirm(cluster, sim):
    """Pods evicted from a NotReady node stay Terminating (no kubelet confirms), and the training Job, with its
    podFailurePolicy, replaces a pod only once it has ended: without a force delete the job never reaches its
    spare. The drain force-deletes them (grace 0) and says so; with the setting off it waits and reports them."""
    from remedy.sim.faults import inject

    inject(sim.cluster, "not-ready", "gpu006")
    cluster.cordon("gpu006", reason="NotReady", by="test")
    t = time.monotonic()
    report = cluster.drain("gpu006", grace_period_seconds=30, deadline_seconds=30)
    assert time.monotonic() - t < 10, report  # not the deadline: nothing is waited for
    assert report.complete and report.force_deleted and all("llm-pretrain" in k for k in report.force_deleted)
    assert not [p for p in cluster.pods_on_node("gpu006") if "llm-pretrain" in p["metadata"]["name"]]

    other = next(n for n in cluster.workload_nodes("training", "llm-pretrain") if n != "gpu006")
    inject(sim.cluster, "not-ready", other)
    with KubernetesCluster(settings_for(sim, drain={"force_delete_when_not_ready": False})) as waits:
        # it waits out the grace period and the deadline (1 s each here), then reports what is still terminating
        kept = waits.drain(other, grace_period_seconds=1, deadline_seconds=1)
    assert not kept.force_deleted and any("still terminating" in why for why in kept.not_evicted.values())
    # the pod the first drain left terminating (the taint manager's deletion looks the same) goes on the next drain
    again = cluster.drain(other, grace_period_seconds=30, deadline_seconds=30)
    assert again.force_deleted and not [p for p in cluster.pods_on_node(other) if "llm-pretrain" in p["metadata"]["name"]]


@pytest.mark.simulator_only("the check's pod must run and log: the simulator runs checks, this control plane has no kubelet")
def test_node_job_lifecycle(cluster):
    result = cluster.run_node_job(NodeJobSpec(name="reset-gpu011-1", node="gpu011", check="gpu-reset",
                                              env=(("GPU_INDEX", "2"),), privileged=True, timeout_seconds=30))
    assert result.phase == "Succeeded", result.logs
    assert result.logs
    assert cluster.job_pods("reset-gpu011-1")[0]["spec"]["nodeName"] == "gpu011"


@pytest.mark.simulator_only("injects a fault into the simulator")
def test_node_job_on_unready_node_times_out(cluster, sim):
    from remedy.sim.faults import inject

    inject(sim.cluster, "not-ready", "gpu012")
    result = cluster.run_node_job(NodeJobSpec(name="probe-gpu012", node="gpu012", check="sleep", timeout_seconds=2))
    assert result.phase == "Timeout" and not result.succeeded


def test_manual_uncordon_is_seen_as_drift(cluster):
    from kubernetes import client as k8s

    cluster.cordon("gpu013", reason="XID 94", by="test")
    assert cluster.detect_drift("gpu013") is None
    # an operator runs `kubectl uncordon gpu013` (a strategic merge patch of spec.unschedulable only)
    k8s.CoreV1Api(cluster.api).patch_node("gpu013", {"spec": {"unschedulable": False}},
                                          _content_type="application/strategic-merge-patch+json")
    drift = cluster.detect_drift("gpu013")
    assert drift and drift.what == "uncordoned by hand"


def test_api_server_down_retries_then_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    from remedy.config import load_settings

    # a 1 s request timeout: the first list waits 2 x that for the node cache's first list before listing itself
    settings = load_settings(cluster={"simulator_url": f"http://127.0.0.1:{port}", "api_retries": 2,
                                      "request_timeout_seconds": 1})
    with KubernetesCluster(settings) as c:
        start = time.monotonic()
        with pytest.raises(ClusterUnreachable) as err:
            c.list_gpu_nodes()
    msg = str(err.value)
    assert f"127.0.0.1:{port}" in msg and "3 attempts" in msg and "refused" in msg
    assert time.monotonic() - start >= 0.5  # it did back off between attempts


def test_conflict_on_stale_resource_version(cluster):
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    api = k8s.CoreV1Api(cluster.api)
    node = cluster.get_node("gpu014")
    api.patch_node("gpu014", {"metadata": {"labels": {"x": "1"}}},
                   _content_type="application/strategic-merge-patch+json")
    with pytest.raises(ApiException) as err:
        api.patch_node("gpu014", {"metadata": {"resourceVersion": node.resource_version, "labels": {"x": "2"}}},
                       _content_type="application/strategic-merge-patch+json")
    assert err.value.status == 409


def test_a_pod_under_two_budgets_is_refused_at_once_with_their_names(cluster, sim):
    """The Eviction API refuses a pod covered by two PodDisruptionBudgets on every attempt: the drain reports it as
    such, naming both budgets, without retrying it to the deadline, and tells on-call on the node."""
    from kubernetes import client as k8s

    policy = k8s.PolicyV1Api(cluster.api)
    for name, labels in (("train-a", {"app": "llm-pretrain"}), ("train-b", {"job-name": "llm-pretrain"})):
        policy.create_namespaced_pod_disruption_budget("training", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"maxUnavailable": 5, "selector": {"matchLabels": labels}}})
    cluster.cordon("gpu011", reason="drain test", by="test")
    start = time.monotonic()
    report = cluster.drain("gpu011", grace_period_seconds=30, deadline_seconds=20)
    assert time.monotonic() - start < 5  # not retried until the 20 s deadline
    (key, why), = report.refused.items()
    assert key.startswith("training/llm-pretrain-") and report.not_evicted == {key: why}
    assert "more than one PodDisruptionBudget (train-a, train-b)" in why and "a person must" in why
    assert report.blocked_retries == 0 and not report.complete
    assert any(p["metadata"]["name"] == key.split("/")[1] for p in cluster.pods_on_node("gpu011"))  # still there
    events = [e for e in cluster.node_events("gpu011") if e["reason"] == "RemedyEvictionRefused"]
    assert len(events) == 1 and "train-a, train-b" in events[0]["message"] and events[0]["type"] == "Warning"


@pytest.mark.simulator_only("switches the simulator's throttling on")
def test_a_throttled_call_waits_what_the_server_asks_then_succeeds(sim):
    """API Priority and Fairness turns requests away with 429 and Retry-After; the adapter waits that long and
    tries again (the default back-off, 0.2 s, would be turned away a second time)."""
    from remedy.sim.throttle import Throttle

    with KubernetesCluster(settings_for(sim)) as c:  # api_retries=1: two attempts in all
        sim.cluster.throttle = gate = Throttle(qps=1, burst=1)  # one request per second
        assert gate.admit() is None  # someone else took the only seat
        start = time.monotonic()
        node = c.get_node("gpu003")
    # one rejection only: a retry after the default back-off (0.2 s) would find no seat yet and be a second one
    assert node.name == "gpu003" and gate.rejected == 1
    assert time.monotonic() - start >= 0.9  # Retry-After: 1, honoured


@pytest.mark.simulator_only("switches the simulator's throttling on")
def test_throttling_that_outlasts_the_retries_is_a_clear_error(sim):
    from remedy.sim.throttle import Throttle

    with KubernetesCluster(settings_for(sim, cluster={"api_retries": 0})) as c:
        sim.cluster.throttle = Throttle(qps=0.01, burst=1)
        sim.cluster.throttle.admit()
        with pytest.raises(ClusterUnreachable, match=r"failed to read node gpu003 after 1 attempts: HTTP 429: "
                                                     r"Too many requests, please try again later\."):
            c.get_node("gpu003")


@pytest.mark.simulator_only("the check's pod must run to completion: no kubelet here")
def test_a_check_evicted_midway_is_run_again_not_failed(cluster, sim):
    """gpu-remedy's Jobs carry a podFailurePolicy that ignores disruptions: a drain that evicts a check's pod (the
    DisruptionTarget condition) does not fail the check (backoffLimit 0); the Job runs it again."""
    from kubernetes import client as k8s

    spec = NodeJobSpec(name="sleep-gpu012", node="gpu012", check="sleep", env=(("SECONDS", "60"),),
                       timeout_seconds=120)
    manifest = cluster.render_node_job(spec)
    assert manifest["spec"]["podFailurePolicy"] == {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    result: list = []
    runner = threading.Thread(target=lambda: result.append(cluster.run_node_job(spec)))
    runner.start()
    core = k8s.CoreV1Api(cluster.api)
    deadline = time.monotonic() + 10
    while not (pods := [p for p in cluster.job_pods("sleep-gpu012") if p["status"].get("phase") == "Running"]):
        assert time.monotonic() < deadline, "the check never started"
        time.sleep(0.05)
    first = pods[0]["metadata"]["name"]
    core.create_namespaced_pod_eviction(first, "gpu-remedy", k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=first, namespace="gpu-remedy")))
    runner.join(timeout=30)
    assert result and result[0].phase == "Succeeded", result
    names = {p["metadata"]["name"] for p in cluster.job_pods("sleep-gpu012")}
    assert first not in names and len(names) == 1  # a second pod ran the check
    status = cluster.job_status("sleep-gpu012")
    assert not status.get("failed") and status["succeeded"] == 1


def test_restart_in_place_evicts_so_the_job_does_not_count_it(cluster, sim):
    """RESTART_APP evicts the training pods on the node instead of deleting them: the Eviction API marks them
    DisruptionTarget (pkg/registry/core/pod/storage/eviction.go), which the training Job's podFailurePolicy
    ignores, whereas a plain DELETE would count toward its backoffLimit (pkg/controller/job/job_controller.go
    isPodFailed, v1.36.2). The Job brings the pod back on the same node; its failure count stays 0."""
    from kubernetes import client as k8s

    before = cluster.pods_on_node("gpu006")
    (victim,) = [p for p in before if p["metadata"]["namespace"] == "training"]
    restarted = cluster.restart_pods("gpu006", "training")
    assert restarted == [victim["metadata"]["name"]]
    core = k8s.CoreV1Api(cluster.api)
    gone = core.read_namespaced_pod(victim["metadata"]["name"], "training")
    assert any(c.type == "DisruptionTarget" and c.reason == "EvictionByEvictionAPI"
               for c in gone.status.conditions or [])
    deadline = time.monotonic() + (90 if hasattr(sim, "kubelet") else 10)  # a real controller's back-off: 10 s
    while not [p for p in cluster.pods_on_node("gpu006") if p["metadata"]["namespace"] == "training"
               and p["metadata"]["name"] != victim["metadata"]["name"]
               and p["status"].get("phase") == "Running"]:
        assert time.monotonic() < deadline, "the training pod never came back on gpu006"
        time.sleep(0.1)
    job = cluster.read_job("training", "llm-pretrain")
    assert not job["status"].get("failed")
    assert "RemedyRestartApp" in [e["reason"] for e in cluster.node_events("gpu006")]


@pytest.mark.simulator_only("takes a node's kubelet away (NotReady): the stand-in kubelet of the real lane never does")
def test_drain_of_a_not_ready_node_force_deletes_pods_stuck_terminating(cluster, sim):
    """On a NotReady node no kubelet confirms a pod's end, so an evicted pod stays Terminating and a Job with
    podReplacementPolicy Failed (any podFailurePolicy) never replaces it. Past its grace period the drain marks the
    node out-of-service (non-graceful node shutdown: PodGC marks such pods Failed and deletes them,
    pkg/controller/podgc/gc_controller.go gcTerminating) and force-deletes them; the training pod moves on;
    uncordon takes the taint off again."""
    from remedy.sim.faults import inject

    inject(sim.cluster, "not-ready", "gpu011")
    cluster.cordon("gpu011", reason="NotReady", by="test")
    victim = next(p["metadata"]["name"] for p in cluster.pods_on_node("gpu011")
                  if p["metadata"]["namespace"] == "training")
    report = cluster.drain("gpu011", grace_period_seconds=30, deadline_seconds=5)
    assert f"training/{victim}" in report.force_deleted and report.complete, report
    assert cluster.get_node("gpu011").has_taint("node.kubernetes.io/out-of-service", "NoExecute")
    assert not [p for p in cluster.pods_on_node("gpu011") if p["metadata"]["namespace"] == "training"]
    job = cluster.read_job("training", "llm-pretrain")
    assert not job["status"].get("failed")  # disrupted, not failed: the policy ignores it
    events = [e for e in cluster.node_events("gpu011") if e["reason"] == "RemedyForceDelete"]
    assert events and victim in events[0]["message"]
    inject(sim.cluster, "heal", "gpu011")
    cluster.uncordon("gpu011", reason="back", by="test")
    assert not cluster.get_node("gpu011").has_taint("node.kubernetes.io/out-of-service")


def test_drain_of_a_ready_node_never_force_deletes(cluster):
    """A Ready node's kubelet is still stopping its pods: nothing is forced, however long the grace period."""
    cluster.cordon("gpu013", reason="drain", by="test")
    report = cluster.drain("gpu013", grace_period_seconds=30, deadline_seconds=10)
    assert report.complete and not report.force_deleted
    assert not cluster.get_node("gpu013").has_taint("node.kubernetes.io/out-of-service")


def _kept(sent, stored, path: str = "") -> list[str]:
    """Where `stored` lost or changed something `sent` had (the server may add defaults; quantities and other
    scalars compare as text)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{path}: sent a map, stored {stored!r}"]
        return [d for k, v in sent.items() for d in _kept(v, stored.get(k), f"{path}.{k}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [f"{path}: sent {sent!r}, stored {stored!r}"]
        return [d for i, (a, b) in enumerate(zip(sent, stored)) for d in _kept(a, b, f"{path}[{i}]")]
    return [] if str(sent) == str(stored) else [f"{path}: sent {sent!r}, stored {stored!r}"]


def test_every_check_job_is_accepted_and_kept_as_rendered(cluster, sim):
    """Every health-check Job of the extended suite (one node, and the multi-node sweep on a group), rendered as the
    flows render it, is created with server-side dry run and `fieldValidation=Strict` — a real server answers 400
    for a field the batch/v1 schema does not know instead of dropping it with a warning (staging/src/k8s.io/
    apiserver/pkg/endpoints/handlers/create.go; the simulator ignores fieldValidation) and 422 for what
    pkg/apis/batch/validation/validation.go refuses — and the answer keeps every field sent: image, command, GPU
    requests, node affinity, pod anti-affinity, tolerations, podFailurePolicy."""
    import json

    from remedy.health import suite_for
    from remedy.health.jobs import check_job

    settings = cluster.settings
    ns = settings.cluster.jobs_namespace
    for spec in suite_for("extended", settings.health):
        nodes = ["gpu010", "gpu011"] if spec.multi_node else ["gpu010"]
        manifest = cluster.render_node_job(check_job(spec, name=f"{spec.id}-dry", nodes=nodes,
                                                     settings=settings.health))
        resp = cluster.batch.create_namespaced_job(ns, manifest, dry_run="All", field_validation="Strict",
                                                   _preload_content=False)
        stored = json.loads(resp.data)
        assert resp.status == 201, (spec.id, stored)
        assert not _kept(manifest["spec"], stored["spec"], "spec"), (spec.id, _kept(manifest["spec"], stored["spec"]))
        assert stored["spec"]["podReplacementPolicy"] == "Failed"  # defaulted so by the podFailurePolicy
    assert not cluster.job_pods(f"{spec.id}-dry")  # a dry run created nothing


# ---------------------------------------------------------------------- the watch-fed node cache
def _watching(sim):
    """Settings for an adapter whose node cache watches: on the real lane through its loopback proxy, which passes
    a watch's chunks on as they arrive (tests/fixtures/real_k8s.py), so the cache streams as from the apiserver."""
    return settings_for(sim)


def _until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s")


def test_gpu_nodes_are_listed_once_then_kept_current_by_the_watch(sim):
    """client-go's reflector (tools/cache/reflector.go ListAndWatch): one list, then a watch from its
    resourceVersion; someone else's change reaches the cache as a watch event, and no list is made again."""
    with KubernetesCluster(_watching(sim)) as watching, \
            KubernetesCluster(_watching(sim), watch_nodes=False) as other:
        assert len(watching.list_gpu_nodes()) == 16
        cache = watching.node_cache()
        _until(cache.fresh)
        other.set_labels("gpu003", {"remedy.io/watch-test": "seen"})
        other.cordon("gpu004", reason="watch test", by="someone-else")
        node = _until(lambda: next((n for n in watching.list_gpu_nodes() if n.name == "gpu003"
                                    and n.labels.get("remedy.io/watch-test") == "seen"), None))
        assert node.topology.rack and cache.events >= 1
        assert _until(lambda: watching.get_node("gpu004").unschedulable)
        assert cache.lists == 1 and cache.fresh()
        other.set_labels("gpu003", {"remedy.io/pool": "elsewhere"})  # still a GPU node: kept, with its new pool
        assert _until(lambda: next(n for n in watching.list_gpu_nodes() if n.name == "gpu003").state is None)


def test_node_addresses_come_from_the_watch_fed_cache(sim):
    """The receiver resolves an exporter's `instance` (node IP:port) to its node per alert: once the cache is
    fresh, `node_addresses` answers from it (no list per alert), and an address a node reports anew arrives by
    the watch."""
    import json
    import urllib.request

    with KubernetesCluster(_watching(sim)) as watching:
        first = watching.node_addresses()
        cache = watching.node_cache()
        _until(cache.fresh)
        node = next(n for n in watching.list_gpu_nodes() if n.name == "gpu006")
        assert node.addresses and all(first[a] == "gpu006" for a in node.addresses)
        body = json.dumps({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}).encode()
        req = urllib.request.Request(f"{sim.url}/api/v1/nodes/gpu006/status", data=body, method="PATCH",
                                     headers={"Content-Type": "application/merge-patch+json"})
        urllib.request.urlopen(req, timeout=10).read()
        assert _until(lambda: watching.node_addresses().get("10.9.9.9")) == "gpu006"
        assert cache.lists == 1  # every answer above after the first list came from the watch


def test_the_gates_node_summary_follows_the_watch_never_a_stale_one(sim):
    """The gate sums the nodes once per state of the cache (remedy.safety.fleet): the same generation gives the same
    summary without summing again; another client's change moves the generation, and the summary of the new one
    sees the change (a node sent to repair leaves nothing serving stale)."""
    from remedy.safety.fleet import FleetNodes, NodeSummaries

    summaries = NodeSummaries()
    with KubernetesCluster(_watching(sim)) as watching, \
            KubernetesCluster(_watching(sim), watch_nodes=False) as other:
        watching.list_gpu_nodes()
        _until(watching.node_cache().fresh)
        def summary():
            version, nodes = watching.gpu_node_snapshot()
            return version, summaries.of(FleetNodes(nodes, version))

        version, before = summary()
        assert version is not None and "gpu007" not in before.out_of_service
        assert summaries.of(FleetNodes([], version)) is before  # the version names the nodes: not summed again
        assert summaries.sums == 1
        other.set_labels("gpu007", {"remedy.io/pool": "repair"})
        later, after = _until(lambda: got if "gpu007" in (got := summary())[1].out_of_service else None)
        assert later != version and after.out_of_service["gpu007"] == "repair" and summaries.sums >= 2
    with KubernetesCluster(_watching(sim), watch_nodes=False) as polling:  # listed: no version, summed every time
        version, nodes = polling.gpu_node_snapshot()
        assert version is None and len(nodes) == 16


def test_our_own_write_is_in_the_cache_when_the_call_returns(cluster):
    """Read your writes: a cordon's answer goes into the cache at once, before its watch event arrives."""
    cluster.list_gpu_nodes()
    cluster.cordon("gpu005", reason="XID 79", by="test")
    assert next(n for n in cluster.list_gpu_nodes() if n.name == "gpu005").unschedulable


def test_a_write_decides_on_the_server_not_on_the_cache(cluster):
    """A cordon reads the node from the API server: a cache that is behind (here: made to say "already cordoned")
    never makes a write skip what the server still needs."""
    cluster.list_gpu_nodes()
    cache = cluster.node_cache()
    stale = cache.get("gpu006")
    stale_copy = type(stale)(**{**stale.__dict__, "unschedulable": True})
    with cache._lock:
        cache._nodes["gpu006"] = stale_copy
    assert cluster.cordon("gpu006", reason="XID 79", by="test").changed
    assert cluster.get_node("gpu006").unschedulable


@pytest.mark.simulator_only("compacts the simulator's history: a real server's cannot be forced to expire")
def test_a_watch_too_far_behind_lists_again(sim):
    """reflector.go: a watch answered with 410 Expired (the server no longer remembers that resourceVersion) is
    followed by a new list, and the cache is right again; the simulator's compact() expires every revision so
    far, as etcd's compaction and a full watch-cache window do."""
    from remedy.adapters.kubernetes import NodeCache

    with KubernetesCluster(settings_for(sim), watch_nodes=False) as other:
        cache = NodeCache(other._cfg, settings_for(sim))
        cache.WATCH_SECONDS = (1, 1)  # the server ends each watch after a second: the next starts from there
        cache.start()
        try:
            assert cache.synced.wait(10) and cache.lists == 1
            # nothing changes meanwhile: the next watch starts from a compacted revision. Compacted again until that
            # happens: a bookmark sent between a compaction and the watch's end may carry it past that one (the
            # simulator's compaction moves the revision on), which is right, and not the case under test here
            for _ in range(60):
                sim.cluster.store.compact()
                if cache.lists >= 2:
                    break
                time.sleep(0.5)
            _until(lambda: cache.lists == 2, timeout=15)
            other.set_labels("gpu007", {"remedy.io/watch-test": "after-compaction"})
            _until(lambda: cache.get("gpu007").labels.get("remedy.io/watch-test") == "after-compaction")
            assert cache.fresh() and cache.lists == 2
        finally:
            cache.stop()


@pytest.mark.simulator_only("stops the API server")
def test_a_cache_that_lost_its_server_is_not_served(sim):
    """Once the watch fails, the cache is not fresh: list_gpu_nodes asks the server and fails clearly instead of
    answering from a view nobody keeps current any more."""
    with KubernetesCluster(settings_for(sim)) as cluster:
        cluster.list_gpu_nodes()
        cache = cluster.node_cache()
        _until(cache.fresh)
        sim.stop()
        _until(lambda: not cache.fresh())
        with pytest.raises(ClusterUnreachable):
            cluster.list_gpu_nodes()
