"""Conformance: the Node calls the adapter makes (list, read, cordon, taint, label) answer as Kubernetes does.

Each test names the Kubernetes source (v1.36.2) whose behaviour it pins; every body is read strictly through the
official client's models (wire.strict)."""

from __future__ import annotations

import json

from tests.sim.conformance.wire import raw, strict

SMP = "application/strategic-merge-patch+json"


def test_list_nodes_by_label_selector(sim, api_client):
    """staging/src/k8s.io/apimachinery/pkg/labels/selector.go: `key=value`, `key in (...)`, `!key`; the list is a
    NodeList whose metadata carries the resourceVersion it was read at."""
    code, _, body = raw(sim, "GET", "/api/v1/nodes?labelSelector=remedy.io%2Fpool%3Dspare")
    nodes = strict(api_client, "V1NodeList", body)
    assert code == 200 and nodes.kind == "NodeList" and nodes.metadata.resource_version
    assert sorted(n.metadata.name for n in nodes.items) == ["gpu008", "gpu016"]
    _, _, body = raw(sim, "GET", "/api/v1/nodes?labelSelector=%21remedy.io%2Fpool")
    assert strict(api_client, "V1NodeList", body).items == []


def test_reading_a_missing_node_is_a_404_status(sim, api_client):
    """staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go, NewNotFound: reason NotFound, message
    `nodes "NAME" not found`, details {name, kind: nodes}."""
    code, _, body = raw(sim, "GET", "/api/v1/nodes/gpu999")
    status = strict(api_client, "V1Status", body)
    assert code == 404 and (status.status, status.reason, status.code) == ("Failure", "NotFound", 404)
    assert status.message == 'nodes "gpu999" not found'
    assert (status.details.name, status.details.kind) == ("gpu999", "nodes")


def test_cordon_is_a_strategic_merge_patch_that_keeps_the_rest(sim, api_client):
    """staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go: maps merge key by key and `null` deletes a
    key; spec.unschedulable is a plain field."""
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu003", {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": {"remedy.io/cordoned-by": "test"}, "labels": {"extra": "1"}}}, SMP)
    node = strict(api_client, "V1Node", body)
    assert code == 200 and node.spec.unschedulable is True
    assert node.metadata.annotations["remedy.io/cordoned-by"] == "test"
    assert node.metadata.labels["remedy.io/rack"] == "rack-1" and node.metadata.labels["extra"] == "1"
    _, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu003", {
        "spec": {"unschedulable": None}, "metadata": {"annotations": {"remedy.io/cordoned-by": None}}}, SMP)
    node = strict(api_client, "V1Node", body)
    assert not node.spec.unschedulable and "remedy.io/cordoned-by" not in (node.metadata.annotations or {})


def test_an_unschedulable_node_carries_the_unschedulable_taint(sim, api_client):
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go (doNoScheduleTaintingPass): spec.unschedulable
    adds `node.kubernetes.io/unschedulable:NoSchedule` (staging/src/k8s.io/api/core/v1/well_known_taints.go); an
    uncordon takes it away."""
    raw(sim, "PATCH", "/api/v1/nodes/gpu004", {"spec": {"unschedulable": True}}, SMP)
    node = strict(api_client, "V1Node", raw(sim, "GET", "/api/v1/nodes/gpu004")[2])
    assert [(t.key, t.effect) for t in node.spec.taints] == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    raw(sim, "PATCH", "/api/v1/nodes/gpu004", {"spec": {"unschedulable": False}}, SMP)
    assert strict(api_client, "V1Node", raw(sim, "GET", "/api/v1/nodes/gpu004")[2]).spec.taints is None


def test_taints_are_an_atomic_list(sim, api_client):
    """staging/src/k8s.io/api/core/v1/types.go, NodeSpec.Taints `+listType=atomic` (no patchStrategy): a strategic
    merge patch replaces the whole list, so two writers who each send their own taint lose one — which is why the
    adapter merges by (key, effect) and writes with a resourceVersion precondition."""
    raw(sim, "PATCH", "/api/v1/nodes/gpu005", {"spec": {"taints": [
        {"key": "a.example/x", "value": "1", "effect": "NoSchedule"}]}}, SMP)
    _, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu005", {"spec": {"taints": [
        {"key": "b.example/y", "effect": "NoExecute"}]}}, SMP)
    node = strict(api_client, "V1Node", body)
    assert [(t.key, t.effect) for t in node.spec.taints] == [("b.example/y", "NoExecute")]


def test_a_key_with_two_effects_is_two_taints(sim, api_client):
    """pkg/apis/core/validation/validation.go, validateNodeTaints: taints are unique by (key, effect), so the same
    key may carry NoSchedule and NoExecute at once."""
    _, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu005", {"spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}]}}, SMP)
    node = strict(api_client, "V1Node", body)
    assert sorted((t.key, t.effect) for t in node.spec.taints) == [("nvidia.com/gpu", "NoExecute"),
                                                                   ("nvidia.com/gpu", "NoSchedule")]
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu005", {"spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"}]}}, SMP)
    status = strict(api_client, "V1Status", body)
    assert code == 422 and status.reason == "Invalid"
    (cause,) = status.details.causes
    assert (cause.field, cause.reason) == ("spec.taints[1]", "FieldValueDuplicate")
    assert "taints must be unique by key and effect pair" in cause.message


def test_a_stale_resource_version_is_a_409_conflict(sim, api_client):
    """staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go (Update, OptimisticLockErrorMsg): a
    write whose metadata.resourceVersion is not the stored one is refused with 409 Conflict."""
    node = strict(api_client, "V1Node", raw(sim, "GET", "/api/v1/nodes/gpu006")[2])
    raw(sim, "PATCH", "/api/v1/nodes/gpu006", {"metadata": {"labels": {"x": "1"}}}, SMP)
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu006", {
        "metadata": {"resourceVersion": node.metadata.resource_version, "labels": {"x": "2"}}}, SMP)
    status = strict(api_client, "V1Status", body)
    assert code == 409 and status.reason == "Conflict"
    assert status.message == ('Operation cannot be fulfilled on nodes "gpu006": the object has been modified; '
                              "please apply your changes to the latest version and try again")


def test_lists_page_with_limit_and_continue(sim, api_client):
    """staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go (GetList): `limit` cuts the list, metadata.continue
    resumes it, remainingItemCount says how many are left; the pages together hold every item once."""
    names, token, pages = [], "", 0
    while True:
        _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=5" + (f"&continue={token}" if token else ""))
        page = strict(api_client, "V1NodeList", body)
        names += [n.metadata.name for n in page.items]
        pages += 1
        if pages == 1:
            assert len(page.items) == 5 and page.metadata.remaining_item_count == 11
        token = page.metadata._continue
        if not token:
            break
    assert pages == 4 and len(names) == len(set(names)) == 16


def test_nodes_are_served_as_v1_with_their_capacity(sim, api_client):
    """staging/src/k8s.io/api/core/v1/types.go, NodeStatus: capacity and allocatable are resource quantities
    (strings); a device plugin's `nvidia.com/gpu` is one of them."""
    node = json.loads(raw(sim, "GET", "/api/v1/nodes/gpu001")[2])
    assert node["apiVersion"] == "v1" and node["kind"] == "Node"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8" == node["status"]["allocatable"]["nvidia.com/gpu"]
    strict(api_client, "V1Node", node)
