"""Conformance: events, admission, and the API server's own answers (throttling) the adapter meets.

Sources: Kubernetes v1.36.2. Bodies are read strictly through the official client's models (wire.strict)."""

from __future__ import annotations

import pytest

from remedy.sim.throttle import Throttle
from tests.sim.conformance.wire import raw, strict


def test_events_of_a_node_by_involved_object(sim, api_client):
    """pkg/registry/core/event/strategy.go (ToSelectableFields): events select by involvedObject.kind and
    involvedObject.name — what `kubectl describe node` and the adapter's node_events read. Nothing defaults an
    Event's count (no Event defaulter in pkg/apis/core/v1; checked on a real v1.36.2 server): created without one,
    it has none, so the adapter sends count 1 itself."""
    for name, node in (("a", "gpu001"), ("b", "gpu002")):
        code, _, body = raw(sim, "POST", "/api/v1/namespaces/default/events", {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{node}.{name}"},
            "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
            "reason": "RemedyCordon", "message": f"cordoned {node}", "type": "Warning",
            "source": {"component": "gpu-remedy"}})
        assert code == 201 and strict(api_client, "CoreV1Event", body).count is None
    # a real node lifecycle controller also files a RegisteredNode event per node ("Node gpu001 event: Registered
    # Node gpu001 in Controller", seen on the real lane); the simulator files none, so select by reason too
    _, _, body = raw(sim, "GET", "/api/v1/namespaces/default/events"
                                 "?fieldSelector=involvedObject.kind%3DNode%2CinvolvedObject.name%3Dgpu001"
                                 "%2Creason%3DRemedyCordon")
    events = strict(api_client, "CoreV1EventList", body).items
    assert [(e.involved_object.name, e.message) for e in events] == [("gpu001", "cordoned gpu001")]


def test_an_unknown_priority_class_is_403(sim, api_client):
    """plugin/pkg/admission/priority/admission.go: a pod naming a PriorityClass that does not exist is Forbidden,
    `no PriorityClass with name NAME was found`."""
    code, _, body = raw(sim, "POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "busybox"}]}})
    status = strict(api_client, "V1Status", body)
    assert code == 403 and status.reason == "Forbidden"
    assert status.message.endswith("no PriorityClass with name nope was found")


@pytest.mark.simulator_only("ExtendedResourceToleration is off by default in kube-apiserver, and start-apiserver does "
                            "not turn it on: the real server adds the 300 s tolerations only (checked on v1.36.2)")
def test_admission_adds_default_and_gpu_tolerations(sim, api_client):
    """plugin/pkg/admission/defaulttolerationseconds/admission.go (300 s for not-ready and unreachable, NoExecute)
    and plugin/pkg/admission/extendedresourcetoleration/admission.go (a pod requesting nvidia.com/gpu tolerates the
    `nvidia.com/gpu` taint, operator Exists, effect NoSchedule). The second is off by default in kube-apiserver
    (pkg/kubeapiserver/options/plugins.go, DefaultOffAdmissionPlugins) and on where providers taint GPU nodes (GKE);
    the simulator always applies it, so gpu-remedy's own Jobs list the tolerated taints themselves."""
    code, _, body = raw(sim, "POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-pod"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    pod = strict(api_client, "V1Pod", body)
    assert code == 201
    tolerations = {(t.key, t.operator, t.effect, t.toleration_seconds) for t in pod.spec.tolerations}
    assert {("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
            ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300),
            ("nvidia.com/gpu", "Exists", "NoSchedule", None)} <= tolerations


@pytest.mark.simulator_only("switches the simulator's throttling on; a real server's APF limits are not reached by one client")
def test_throttling_is_429_with_retry_after_in_plain_text(sim, api_client):
    """staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go (tooManyRequests): a request API
    Priority and Fairness cannot seat is answered 429 with a `Retry-After` in whole seconds and http.Error's plain
    text, not a Status object. Health probes are exempt. Off unless the simulator's throttling is switched on."""
    assert raw(sim, "GET", "/api/v1/nodes/gpu001")[0] == 200
    sim.cluster.throttle = Throttle(qps=0.5, burst=1)
    assert raw(sim, "GET", "/api/v1/nodes/gpu001")[0] == 200  # the one seat
    code, headers, body = raw(sim, "GET", "/api/v1/nodes/gpu001")
    assert code == 429 and body == b"Too many requests, please try again later.\n"
    assert headers["content-type"].startswith("text/plain") and int(headers["retry-after"]) >= 1
    assert raw(sim, "GET", "/readyz")[0] == 200


def test_an_event_written_twice_is_409_and_its_count_is_patched(sim, api_client):
    """staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go (NewAlreadyExists: `events "NAME" already
    exists`) and a strategic merge patch of count and lastTimestamp — how the adapter's record_event aggregates a
    repeated note into one Event, as client-go's EventCorrelator does (tools/record/events_cache.go)."""
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "gpu003.twice"},
             "involvedObject": {"kind": "Node", "name": "gpu003", "uid": "gpu003", "apiVersion": "v1"},
             "reason": "RemedyHeld", "message": "held", "type": "Normal", "count": 1,
             "firstTimestamp": "2026-11-27T03:00:00Z", "lastTimestamp": "2026-11-27T03:00:00Z",
             "source": {"component": "gpu-remedy"}}
    assert raw(sim, "POST", "/api/v1/namespaces/default/events", event)[0] == 201
    code, _, body = raw(sim, "POST", "/api/v1/namespaces/default/events", event)
    status = strict(api_client, "V1Status", body)
    assert code == 409 and status.reason == "AlreadyExists"
    assert status.message == 'events "gpu003.twice" already exists'
    code, _, body = raw(sim, "PATCH", "/api/v1/namespaces/default/events/gpu003.twice",
                        {"count": 2, "lastTimestamp": "2026-11-27T03:05:00Z"},
                        "application/strategic-merge-patch+json")
    patched = strict(api_client, "CoreV1Event", body)
    assert code == 200 and patched.count == 2 and patched.reason == "RemedyHeld"
    assert patched.last_timestamp.isoformat() == "2026-11-27T03:05:00+00:00"
    assert patched.first_timestamp.isoformat() == "2026-11-27T03:00:00+00:00"
