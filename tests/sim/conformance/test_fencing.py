"""Conformance: what the incident's fence at the cluster relies on (remedy.safety.fence) — a Node PATCH that carries
the resourceVersion it was read at is refused with 409 Conflict once anyone wrote the Node since, and changes
nothing; without one it is unconditional. Same answers from the simulator and a real v1.36.2 kube-apiserver.

Sources (Kubernetes v1.36.2):
- staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, Store.Update: a request whose object carries
  a resourceVersion is conditional (`newResourceVersion != existingResourceVersion` → apierrors.NewConflict with
  OptimisticLockErrorMsg); without one a Node update is unconditional (pkg/registry/core/node/strategy.go
  AllowUnconditionalUpdate true).
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go: a patch is applied to the stored object and the
  result goes through that same Update, so `metadata.resourceVersion` in a strategic-merge patch body is the
  precondition.
- staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go, GuaranteedUpdate: an error found on cached data is
  re-judged on etcd's current object (`origStateIsCurrent`), so the precondition holds against the latest write.
"""

from __future__ import annotations

from tests.sim.conformance.wire import raw, strict

SMP = "application/strategic-merge-patch+json"
FENCE = "remedy.io/fence"
CONFLICT = ('Operation cannot be fulfilled on nodes "{node}": the object has been modified; please apply your '
            "changes to the latest version and try again")


def _node(sim, api_client, name: str):
    code, _, body = raw(sim, "GET", f"/api/v1/nodes/{name}")
    assert code == 200, body
    return strict(api_client, "V1Node", body)


def test_a_write_over_the_version_it_read_is_refused_once_another_fence_landed(sim, api_client):
    """Run A read the Node (and its own fence); run B, which took the incident over, wrote its fence since: A's
    cordon with the version it read is a 409 Conflict and leaves the Node as B left it."""
    read = _node(sim, api_client, "gpu006")
    code, _, _ = raw(sim, "PATCH", "/api/v1/nodes/gpu006", {"metadata": {"annotations": {FENCE: "incident-7/run-b"}}},
                     SMP)
    assert code == 200
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu006", {
        "spec": {"unschedulable": True},
        "metadata": {"resourceVersion": read.metadata.resource_version,
                     "annotations": {FENCE: "incident-7/run-a"}}}, SMP)
    status = strict(api_client, "V1Status", body)
    assert code == 409 and (status.status, status.reason, status.code) == ("Failure", "Conflict", 409)
    assert status.message == CONFLICT.format(node="gpu006")
    assert (status.details.name, status.details.kind) == ("gpu006", "nodes")
    after = _node(sim, api_client, "gpu006")
    assert not after.spec.unschedulable and after.metadata.annotations[FENCE] == "incident-7/run-b"


def test_a_write_over_the_current_version_goes_through_with_its_fence(sim, api_client):
    """The version read is still the Node's: the change and the fence are written together, in one request."""
    read = _node(sim, api_client, "gpu007")
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu007", {
        "spec": {"unschedulable": True},
        "metadata": {"resourceVersion": read.metadata.resource_version,
                     "annotations": {FENCE: "incident-8/run-a"}}}, SMP)
    node = strict(api_client, "V1Node", body)
    assert code == 200 and node.spec.unschedulable and node.metadata.annotations[FENCE] == "incident-8/run-a"
    assert node.metadata.resource_version != read.metadata.resource_version
    # a second writer holding the version before that write is refused, whatever it sends
    code, _, _ = raw(sim, "PATCH", "/api/v1/nodes/gpu007", {
        "spec": {"unschedulable": None},
        "metadata": {"resourceVersion": read.metadata.resource_version}}, SMP)
    assert code == 409 and _node(sim, api_client, "gpu007").spec.unschedulable


def test_a_stale_write_that_would_change_nothing_is_still_refused(sim, api_client):
    """The precondition is checked before the result is compared with the stored object: a fence check written
    as a patch that changes nothing, over an old version, is a 409 too."""
    read = _node(sim, api_client, "gpu009")
    raw(sim, "PATCH", "/api/v1/nodes/gpu009", {"metadata": {"labels": {"someone-else": "wrote"}}}, SMP)
    code, _, _ = raw(sim, "PATCH", "/api/v1/nodes/gpu009", {
        "metadata": {"resourceVersion": read.metadata.resource_version}}, SMP)
    assert code == 409


def test_a_write_without_a_version_is_unconditional(sim, api_client):
    """No resourceVersion in the body: the Node is written whatever happened since (what every unfenced call
    does: the operator's CLI, the spare cycle) — the reason a fenced call always sends one."""
    raw(sim, "PATCH", "/api/v1/nodes/gpu010", {"metadata": {"annotations": {FENCE: "incident-9/run-b"}}}, SMP)
    code, _, body = raw(sim, "PATCH", "/api/v1/nodes/gpu010", {"spec": {"unschedulable": True}}, SMP)
    assert code == 200 and strict(api_client, "V1Node", body).spec.unschedulable
