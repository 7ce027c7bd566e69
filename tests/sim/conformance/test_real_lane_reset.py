"""The real lane's reset between tests (tests/fixtures/real_k8s.py `reset`): a test that only added objects, or
cordoned, tainted or labelled a seeded node, is put back without the wipe and re-seed (~3 CPU-s of the control
plane each); anything else gets the full wipe. Either way the next test must start from the seeded cluster."""

from __future__ import annotations

from tests.fixtures.real_k8s import _state, _wait, reset


def _training_pods(api) -> dict[str, str]:
    items = api.call("GET", "/api/v1/namespaces/training/pods")[1]["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items if p["status"].get("phase") == "Running"}


def test_added_objects_and_a_cordoned_node_are_put_back_without_a_reseed(real_cluster, real_control_plane):
    cp, api = real_control_plane, real_cluster.api
    seeded_pods = _training_pods(api)
    assert len(seeded_pods) == 14
    code, _ = api.call("POST", "/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "extra"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})
    assert code == 201
    assert api.call("PATCH", "/api/v1/nodes/gpu001", {
        "metadata": {"labels": {"gpu-remedy/quarantine": "true"}},
        "spec": {"unschedulable": True, "taints": [{"key": "gpu-remedy/drain", "effect": "NoSchedule"}]}},
        "application/merge-patch+json")[0] == 200
    assert api.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                              "metadata": {"name": "gpu999"}})[0] == 201
    assert api.call("POST", "/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "gpu001.cordon"}, "reason": "RemedyCordon",
        "involvedObject": {"kind": "Node", "name": "gpu001"}, "message": "cordoned", "type": "Warning"})[0] == 201

    reset(cp)

    # the controllers settle a moment after the reset's own check (a Job's status, a lease): wait for it, briefly
    _wait(lambda: _state(api) == cp.seeded_state, 15)
    assert _training_pods(api) == seeded_pods  # the same pods: no wipe and re-seed happened
    assert api.call("GET", "/apis/batch/v1/namespaces/default/jobs/extra")[0] == 404
    assert not [p for p in api.call("GET", "/api/v1/namespaces/default/pods")[1]["items"]]
    node = api.call("GET", "/api/v1/nodes/gpu001")[1]
    assert not node["spec"].get("unschedulable") and "gpu-remedy/quarantine" not in node["metadata"]["labels"]
    assert not [t for t in node["spec"].get("taints") or [] if t["key"].startswith("gpu-remedy/")]
    assert api.call("GET", "/api/v1/nodes/gpu999")[0] == 404
    assert not api.call("GET", "/api/v1/namespaces/default/events?fieldSelector=reason%3DRemedyCordon")[1]["items"]


def test_a_deleted_seeded_pod_gets_the_full_wipe_and_reseed(real_cluster, real_control_plane):
    cp, api = real_control_plane, real_cluster.api
    seeded_pods = _training_pods(api)
    victim = sorted(seeded_pods)[0]
    assert api.call("DELETE", f"/api/v1/namespaces/training/pods/{victim}", {"gracePeriodSeconds": 0})[0] == 200

    reset(cp)

    again = _training_pods(api)
    assert len(again) == 14 and not set(again.values()) & set(seeded_pods.values())  # every pod made anew
    assert _state(api) == cp.seeded_state
