"""Conformance: custom resources (JobSet, PyTorchJob, Kueue Workload) take the patches remedy.adapters.workloads
sends them.

Sources: Kubernetes v1.36.2, staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go
(supportedTypes: JSON patch, JSON merge patch, apply — no strategic merge, which needs Go types a CR has not) and
staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go (PatchResource: an unsupported patch type is
negotiation.NewUnsupportedMediaTypeError, 415). The real lane has no JobSet CRD or controller: the test installs a
schema-less CRD of the same group, version and names, so only the API machinery is compared, not JobSet's."""

from __future__ import annotations

import json

from tests.sim.conformance.wire import raw, strict, wait_for

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/training/jobsets"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "jobsets.jobset.x-k8s.io"},
       "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
                "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet", "listKind": "JobSetList"},
                "versions": [{"name": "v1alpha2", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _suspended_jobset(name: str) -> dict:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "labels": {"team": "llm", "tier": "a"}},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {
                "spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}}}}]}}


def _create(sim, obj: dict) -> dict:
    if hasattr(sim, "kubelet"):  # the real lane: serve the kind first (the simulator serves it built in)
        code, _, body = raw(sim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        assert code in (201, 409), body
    # a new CRD is served once it is Established and its handler is installed: a moment on a real server
    code, _, body = wait_for(lambda: (r := raw(sim, "POST", JOBSETS, obj))[0] != 404 and r)
    assert code == 201, body
    return json.loads(body)


def test_a_custom_resource_refuses_a_strategic_merge_patch_with_415(sim, api_client):
    """customresource_handler.go supportedTypes and handlers/patch.go: 415 UnsupportedMediaType listing the
    accepted types, the object untouched — why the workload adapters send JSON merge patches."""
    _create(sim, _suspended_jobset("smp"))
    code, _, body = raw(sim, "PATCH", f"{JOBSETS}/smp", {"metadata": {"labels": {"tier": "b"}}},
                        "application/strategic-merge-patch+json")
    status = strict(api_client, "V1Status", body)
    assert code == 415 and status.reason == "UnsupportedMediaType"
    assert status.message == ("the body of the request was in an unknown format - accepted media types include: "
                              "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    assert json.loads(raw(sim, "GET", f"{JOBSETS}/smp")[2])["metadata"]["labels"]["tier"] == "a"


def test_a_merge_patch_on_a_custom_resource_merges_maps_and_null_deletes(sim, api_client):
    """RFC 7386 as staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go applies it (jsonPatcher:
    jsonpatch.MergePatch): maps merge key by key, `null` removes a key, a scalar is replaced; a JSON patch
    (RFC 6902, jsonpatch.DecodePatch) works as well. metadata.generation
    moves with a spec change, not with a metadata one (apiextensions-apiserver pkg/registry/customresource/
    strategy.go PrepareForUpdate)."""
    created = _create(sim, _suspended_jobset("merged"))
    code, _, body = raw(sim, "PATCH", f"{JOBSETS}/merged",
                        {"metadata": {"labels": {"tier": None, "owner": "remedy"}}},
                        "application/merge-patch+json")
    got = json.loads(body)
    assert code == 200 and got["metadata"]["labels"] == {"team": "llm", "owner": "remedy"}
    assert got["metadata"]["generation"] == created["metadata"]["generation"]
    assert got["spec"]["replicatedJobs"] == created["spec"]["replicatedJobs"]
    code, _, body = raw(sim, "PATCH", f"{JOBSETS}/merged", [{"op": "replace", "path": "/spec/suspend",
                                                            "value": True}], "application/json-patch+json")
    assert code == 200 and json.loads(body)["spec"]["suspend"] is True
    code, _, body = raw(sim, "PATCH", f"{JOBSETS}/merged", {"spec": {"failurePolicy": {"maxRestarts": 2}}},
                        "application/merge-patch+json")
    got = json.loads(body)
    assert code == 200 and got["spec"]["failurePolicy"] == {"maxRestarts": 2} and got["spec"]["suspend"] is True
    assert got["metadata"]["generation"] == created["metadata"]["generation"] + 1
