"""The simulator through the official kubernetes client over HTTP: what the Kubernetes adapter relies on."""

from __future__ import annotations

import json
import time
from datetime import UTC

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def wait_for(predicate, timeout=5.0, every=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


def test_list_nodes_with_label_and_field_selectors(core):
    spares = core.list_node(label_selector="remedy.io/pool=spare").items
    assert sorted(n.metadata.name for n in spares) == ["gpu008", "gpu016"]
    assert all(t.key == "remedy.io/spare" and t.effect == "NoSchedule" for n in spares for t in n.spec.taints)
    rack1_active = core.list_node(label_selector="remedy.io/rack in (rack-1),remedy.io/pool!=spare").items
    assert len(rack1_active) == 7
    assert [n.metadata.name for n in core.list_node(field_selector="metadata.name=gpu003").items] == ["gpu003"]
    assert len(core.list_node(field_selector="metadata.name!=gpu003").items) == 15
    assert len(core.list_node(label_selector="nvidia.com/gpu.present").items) == 16
    assert core.list_node(label_selector="!nvidia.com/gpu.present").items == []
    with pytest.raises(ApiException) as err:
        core.list_node(field_selector="spec.nodeName=gpu001")
    assert err.value.status == 400 and json.loads(err.value.body)["reason"] == "BadRequest"


def test_list_paging_with_limit_and_continue(core):
    first = core.list_node(limit=10)
    assert len(first.items) == 10 and first.metadata._continue and first.metadata.remaining_item_count == 6
    rest = core.list_node(limit=10, _continue=first.metadata._continue)
    assert len(rest.items) == 6 and not rest.metadata._continue
    names = [n.metadata.name for n in first.items + rest.items]
    assert names == sorted(names) and len(set(names)) == 16


def test_strategic_merge_patch_labels_taints_and_unschedulable(core):
    node = core.patch_node("gpu003", {"metadata": {"labels": {"remedy.io/pool": "quarantined", "extra": "yes"}}})
    assert node.metadata.labels["remedy.io/pool"] == "quarantined" and node.metadata.labels["extra"] == "yes"
    assert node.metadata.labels["remedy.io/rack"] == "rack-1"  # other labels kept
    core.patch_node("gpu003", {"metadata": {"labels": {"extra": None}}})
    assert "extra" not in core.read_node("gpu003").metadata.labels
    # taints are an atomic list: the patch's list replaces the node's list
    core.patch_node("gpu008", {"spec": {"taints": [{"key": "remedy.io/quarantine", "value": "xid-79",
                                                     "effect": "NoSchedule"}]}})
    taints = core.read_node("gpu008").spec.taints
    assert [(t.key, t.value, t.effect) for t in taints] == [("remedy.io/quarantine", "xid-79", "NoSchedule")]
    core.patch_node("gpu008", {"spec": {"taints": None}})
    assert core.read_node("gpu008").spec.taints is None
    node = core.patch_node("gpu004", {"spec": {"unschedulable": True}})
    assert node.spec.unschedulable is True
    # the node lifecycle controller adds the unschedulable taint, as on a real cluster
    taints = core.read_node("gpu004").spec.taints
    assert [(t.key, t.effect) for t in taints] == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    core.patch_node("gpu004", {"spec": {"unschedulable": False}})
    assert core.read_node("gpu004").spec.taints is None


def test_merge_patch_and_json_patch_content_types(core):
    core.patch_node("gpu005", {"metadata": {"labels": {"m": "1"}}}, _content_type="application/merge-patch+json")
    assert core.read_node("gpu005").metadata.labels["m"] == "1"
    rv = core.read_node("gpu005").metadata.resource_version
    core.patch_node("gpu005", [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                               {"op": "add", "path": "/metadata/labels/j", "value": "2"}])
    assert core.read_node("gpu005").metadata.labels["j"] == "2"
    with pytest.raises(ApiException) as err:  # the test op fails now that the version moved on
        core.patch_node("gpu005", [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}])
    assert err.value.status == 422


def test_resource_version_conflict_is_a_409_status(core):
    node = core.read_node("gpu006")
    stale = node.metadata.resource_version
    core.patch_node("gpu006", {"metadata": {"labels": {"touched": "1"}}})
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu006", {"metadata": {"resourceVersion": stale},
                                   "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    status = json.loads(err.value.body)
    assert err.value.status == 409 and status["kind"] == "Status" and status["reason"] == "Conflict"
    assert status["details"]["name"] == "gpu006" and status["details"]["kind"] == "nodes"
    assert "the object has been modified" in status["message"]
    assert core.read_node("gpu006").spec.taints is None  # nothing changed
    node.metadata.labels["via-put"] = "1"  # a PUT with the stale version conflicts too
    with pytest.raises(ApiException) as err:
        core.replace_node("gpu006", node)
    assert err.value.status == 409
    fresh = core.read_node("gpu006")
    fresh.metadata.labels["via-put"] = "1"
    assert core.replace_node("gpu006", fresh).metadata.labels["via-put"] == "1"


def test_unknown_node_is_a_404_status(core):
    with pytest.raises(ApiException) as err:
        core.read_node("gpu999")
    status = json.loads(err.value.body)
    assert err.value.status == 404
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": 'nodes "gpu999" not found', "reason": "NotFound",
                      "details": {"name": "gpu999", "kind": "nodes"}, "code": 404}
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu999", {"spec": {"unschedulable": True}})
    assert err.value.status == 404


def test_invalid_taint_is_a_422_with_causes(core):
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu007", {"spec": {"taints": [{"key": "remedy.io/quarantine"}]}})
    status = json.loads(err.value.body)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "metadata.taints[0].effect"  # sic: the real server's path
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu007", {"spec": {"taints": [{"key": "a", "effect": "Sometimes"}]}})
    assert err.value.status == 422 and "Unsupported value" in json.loads(err.value.body)["message"]
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu007", {"metadata": {"labels": {"bad key!": "x"}}})
    assert err.value.status == 422
    assert core.read_node("gpu007").spec.taints is None


def test_create_conflicts_with_409_already_exists(core):
    ns = client.V1Namespace(metadata=client.V1ObjectMeta(name="scratch"))
    core.create_namespace(ns)
    with pytest.raises(ApiException) as err:
        core.create_namespace(ns)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("no-such-ns", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x")))
    assert err.value.status == 404


def test_daemonset_and_mirror_pods_are_on_every_node(core):
    pods = core.list_namespaced_pod("kube-system", field_selector="spec.nodeName=gpu002").items
    by_name = {p.metadata.name: p for p in pods}
    plugin, mirror = by_name["nvidia-device-plugin-gpu002"], by_name["kube-proxy-gpu002"]
    assert plugin.metadata.owner_references[0].kind == "DaemonSet"
    assert "kubernetes.io/config.mirror" in mirror.metadata.annotations
    assert len(core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/name=nvidia-device-plugin").items) == 16
    assert client.AppsV1Api(core.api_client).read_namespaced_daemon_set(
        "nvidia-device-plugin-daemonset", "kube-system").metadata.name == "nvidia-device-plugin-daemonset"


def test_training_job_is_one_running_pod_per_active_node(core, batch):
    job = batch.read_namespaced_job("llm-pretrain", "training")
    assert job.spec.parallelism == 14 and job.status.active == 14 and job.status.ready == 14
    assert job.spec.template.spec.node_selector == {"remedy.io/pool": "active"}
    pods = core.list_namespaced_pod("training", label_selector="job-name=llm-pretrain,app=llm-pretrain").items
    nodes = [p.spec.node_name for p in pods]
    assert len(pods) == 14 and len(set(nodes)) == 14 and "gpu008" not in nodes and "gpu016" not in nodes
    assert all(p.status.phase == "Running" for p in pods)


def _evict(core, name, ns="training", grace=None):
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns),
                             delete_options=client.V1DeleteOptions(grace_period_seconds=grace) if grace is not None else None)
    return core.create_namespaced_pod_eviction(name, ns, body)


def test_eviction_is_blocked_by_a_pdb_then_allowed_when_relaxed(sim, core, policy, batch):
    pdb = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="llm-pretrain"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=14,
                                              selector=client.V1LabelSelector(match_labels={"app": "llm-pretrain"})))
    policy.create_namespaced_pod_disruption_budget("training", pdb)
    status = policy.read_namespaced_pod_disruption_budget("llm-pretrain", "training").status
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed) == (14, 14, 0)
    victim = core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu001").items[0].metadata.name
    with pytest.raises(ApiException) as err:
        _evict(core, victim)
    body = json.loads(err.value.body)
    assert err.value.status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert "needs 14 healthy pods and has 14 currently" in body["details"]["causes"][0]["message"]
    assert core.read_namespaced_pod(victim, "training").metadata.deletion_timestamp is None
    policy.patch_namespaced_pod_disruption_budget("llm-pretrain", "training", {"spec": {"minAvailable": 13}})
    assert policy.read_namespaced_pod_disruption_budget("llm-pretrain", "training").status.disruptions_allowed == 1
    _evict(core, victim, grace=0)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod(victim, "training")
    assert err.value.status == 404


def test_training_job_refills_only_on_an_eligible_node(sim, core, batch):
    core.patch_node("gpu001", {"spec": {"unschedulable": True}})  # cordon, then drain its training pod
    victim = core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu001").items[0].metadata.name
    _evict(core, victim, grace=100)  # 1 s at this time scale: long enough to see it Terminating
    assert core.read_namespaced_pod(victim, "training").metadata.deletion_timestamp is not None
    wait_for(lambda: not [p for p in core.list_namespaced_pod("training").items if p.metadata.name == victim])
    # the replacement comes after the Job controller's pod-failure back-off (10 s: 0.1 s at this time scale)
    pending = wait_for(lambda: [p for p in core.list_namespaced_pod("training").items if p.status.phase == "Pending"])
    assert len(pending) == 1 and pending[0].spec.node_name is None  # no eligible node: spares are tainted
    assert "0/16 nodes are available" in pending[0].status.conditions[0].message
    assert batch.read_namespaced_job("llm-pretrain", "training").status.ready == 13
    # promote a spare: relabel to the active pool and remove its taint
    core.patch_node("gpu008", {"metadata": {"labels": {"remedy.io/pool": "active"}}, "spec": {"taints": None}})
    placed = wait_for(lambda: [p for p in core.list_namespaced_pod("training").items if p.metadata.name == pending[0].metadata.name
                               and p.status.phase == "Running"])
    assert placed[0].spec.node_name == "gpu008"
    job = batch.read_namespaced_job("llm-pretrain", "training")
    assert (job.status.active, job.status.ready) == (14, 14)
    assert not core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu001").items


def test_not_ready_node_taints_and_noexecute_eviction(sim, core, batch):
    from remedy.sim.faults import inject

    sim.cluster.time_scale = 0.002  # 300 s of toleration in 0.6 s
    inject(sim.cluster, "not-ready", "gpu002")
    node = core.read_node("gpu002")
    ready = [c for c in node.status.conditions if c.type == "Ready"][0]
    assert ready.status == "Unknown"
    assert {(t.key, t.effect) for t in node.spec.taints} == {("node.kubernetes.io/unreachable", "NoSchedule"),
                                                             ("node.kubernetes.io/unreachable", "NoExecute")}
    assert batch.read_namespaced_job("llm-pretrain", "training").status.ready == 13  # its pod is not ready
    # pods tolerate unreachable for 300 s (DefaultTolerationSeconds), then are evicted; with the kubelet gone
    # nothing confirms the kill, so the pod stays Terminating — and the training Job, whose podFailurePolicy makes
    # it replace only failed pods (podReplacementPolicy: Failed), waits for it to end before making a replacement
    [pod] = core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu002").items
    wait_for(lambda: core.read_namespaced_pod(pod.metadata.name, "training").metadata.deletion_timestamp, timeout=8)
    time.sleep(0.3)  # well past its 30 s (0.06 s) grace period
    assert core.read_namespaced_pod(pod.metadata.name, "training").metadata.deletion_timestamp is not None
    job = batch.read_namespaced_job("llm-pretrain", "training")
    assert (job.status.active, job.status.ready, job.status.terminating) == (13, 13, 1)
    assert job.spec.pod_replacement_policy == "Failed"
    conditions = {c.type: c for c in core.read_namespaced_pod(pod.metadata.name, "training").status.conditions}
    assert conditions["DisruptionTarget"].reason == "DeletionByTaintManager"
    events = core.list_event_for_all_namespaces(field_selector="involvedObject.name=gpu002,involvedObject.kind=Node")
    assert "NodeNotReady" in [e.reason for e in events.items]
    inject(sim.cluster, "heal", "gpu002")  # the kubelet is back: the kill is confirmed, the pod is gone
    wait_for(lambda: pod.metadata.name not in {p.metadata.name for p in core.list_namespaced_pod("training").items})
    # and its replacement lands on the node again; the eviction was a disruption, not a failure
    assert batch.read_namespaced_job("llm-pretrain", "training").status.failed in (None, 0)
    wait_for(lambda: batch.read_namespaced_job("llm-pretrain", "training").status.ready == 14)


def test_force_delete_removes_a_pod_on_an_unreachable_node_at_once(sim, core):
    from remedy.sim.faults import inject

    inject(sim.cluster, "not-ready", "gpu003")
    [pod] = core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu003").items
    core.delete_namespaced_pod(pod.metadata.name, "training")
    time.sleep(0.5)
    assert core.read_namespaced_pod(pod.metadata.name, "training").metadata.deletion_timestamp is not None
    core.delete_namespaced_pod(pod.metadata.name, "training", grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod(pod.metadata.name, "training")
    assert err.value.status == 404


def test_events_create_list_by_involved_object_with_server_timestamps(core):
    from datetime import datetime, timezone

    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    for node, reason in (("gpu001", "RemedyCordoned"), ("gpu002", "RemedyDrained")):
        core.create_namespaced_event("default", client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{node}."),
            involved_object=client.V1ObjectReference(kind="Node", name=node, uid=node),
            reason=reason, message=f"{reason} by gpu-remedy", type="Normal",
            first_timestamp=when, last_timestamp=when, count=1))
    mine = core.list_namespaced_event("default", field_selector="involvedObject.kind=Node,involvedObject.name=gpu001")
    assert [e.reason for e in mine.items] == ["RemedyCordoned"]
    assert mine.items[0].metadata.name.startswith("gpu001.") and len(mine.items[0].metadata.name) == len("gpu001.") + 5
    raw = json.loads(core.list_namespaced_event("default", field_selector="reason=RemedyDrained",
                                                _preload_content=False).data)
    assert raw["items"][0]["lastTimestamp"] == "2026-01-02T03:04:05Z"  # metav1.Time: seconds, UTC
    assert core.list_event_for_all_namespaces(field_selector="involvedObject.name!=gpu001,reason=RemedyCordoned").items == []


def test_noexecute_taint_evicts_untolerating_pods_only(sim, core, batch):
    core.patch_node("gpu009", {"spec": {"taints": [{"key": "remedy.io/retired", "value": "lemon", "effect": "NoExecute"}]}})
    wait_for(lambda: not core.list_namespaced_pod("training", field_selector="spec.nodeName=gpu009").items)
    left = {p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu009").items}
    assert left == {"nvidia-device-plugin-gpu009", "kube-proxy-gpu009"}  # they tolerate everything
    wait_for(lambda: batch.read_namespaced_job("llm-pretrain", "training").status.ready == 13)


def test_the_official_clients_watch_streams_changes(sim, core):
    """kubernetes.watch.Watch (what informers built on the official client use) over the simulator: a watch from a
    list's resourceVersion brings a cordon made meanwhile, then ends at timeoutSeconds."""
    import threading
    import time

    from kubernetes import watch

    version = core.list_node().metadata.resource_version

    def cordon() -> None:
        time.sleep(0.3)
        core.patch_node("gpu002", {"spec": {"unschedulable": True}})

    threading.Thread(target=cordon).start()
    seen = [(e["type"], e["object"].metadata.name, e["object"].spec.unschedulable)
            for e in watch.Watch().stream(core.list_node, resource_version=version, timeout_seconds=2)]
    assert ("MODIFIED", "gpu002", True) in seen


def test_malformed_requests_get_400_statuses_not_crashes(sim, core):
    import urllib.error
    import urllib.request

    def call(method, path, body=None, ctype="application/json"):
        req = urllib.request.Request(sim.url + path, data=body, method=method, headers={"Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    assert call("GET", "/api/v1/nodes?limit=ten")[0] == 400
    assert call("PATCH", "/api/v1/nodes/gpu001", b"{not json", "application/merge-patch+json")[0] == 400
    assert call("PATCH", "/api/v1/nodes/gpu001", b"[]", "application/strategic-merge-patch+json")[0] == 400
    code, status = call("PATCH", "/api/v1/nodes/gpu001", b"spec: {}", "application/apply-patch+yaml")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    code, status = call("GET", "/api/v1/widgets")
    assert code == 404 and status["kind"] == "Status" and status["reason"] == "NotFound"
    code, status = call("POST", "/api/v1/namespaces/training/pods", json.dumps({"metadata": {"name": "x"}}).encode())
    assert code == 422 and status["details"]["causes"][0]["field"] == "spec"
    code, _ = call("PATCH", "/api/v1/nodes/gpu001", json.dumps({"spec": {"taints": [
        {"key": "k", "value": None, "effect": "NoSchedule"}]}}).encode(), "application/merge-patch+json")
    assert code == 200  # a JSON null taint value is the empty string
    assert call("GET", "/version")[1]["major"] == "1"
    assert call("PUT", "/api/v1/namespaces/training/pods/x/eviction", b"{}")[0] == 405


def test_unhealthy_gpus_leave_allocatable_until_fixed(sim, core, batch):
    from remedy.sim.faults import inject

    inject(sim.cluster, "xid", "gpu010", gpu=2, code=79)
    inject(sim.cluster, "xid", "gpu010", gpu=5, code=43)  # application error: the device stays healthy
    node = core.read_node("gpu010")
    assert node.status.capacity["nvidia.com/gpu"] == "8" and node.status.allocatable["nvidia.com/gpu"] == "7"
    sim.cluster.reboot_node("gpu010", sim_seconds=10)
    wait_for(lambda: core.read_node("gpu010").status.allocatable["nvidia.com/gpu"] == "8", timeout=5)
