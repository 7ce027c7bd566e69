"""The RBAC the manifests grant equals what the Kubernetes adapter calls, derived from its source with `ast`."""

from __future__ import annotations

import pytest

from remedy.production import (
    ADAPTER_SOURCE,
    Permission,
    Values,
    adapter_permissions,
    check_rbac,
    client_calls,
    event_namespace,
    granted_permissions,
    permission_for,
    render_manifests,
)


@pytest.fixture(scope="module")
def docs():
    return render_manifests(Values())


@pytest.mark.parametrize("client, method, expected", [
    ("core", "read_node", ("", "nodes", "get")),
    ("core", "list_node", ("", "nodes", "list")),
    ("core", "patch_node", ("", "nodes", "patch")),
    ("core", "list_pod_for_all_namespaces", ("", "pods", "list")),
    ("core", "create_namespaced_pod_eviction", ("", "pods/eviction", "create")),
    ("core", "read_namespaced_pod_log", ("", "pods/log", "get")),
    ("core", "create_namespaced_event", ("", "events", "create")),
    ("core", "patch_node_status", ("", "nodes/status", "patch")),
    ("core", "delete_collection_namespaced_pod", ("", "pods", "deletecollection")),
    ("core", "replace_namespaced_config_map", ("", "configmaps", "update")),
    ("batch", "patch_namespaced_job", ("batch", "jobs", "patch")),
    ("batch", "delete_namespaced_job", ("batch", "jobs", "delete")),
])
def test_client_method_maps_to_group_resource_verb(client, method, expected):
    assert permission_for(client, method) == Permission(*expected)


@pytest.mark.parametrize("client, method, words", [
    ("core", "connect_get_namespaced_pod_exec", "verb"),
    ("core", "read_namespaced_widget", "unknown resource 'widget'"),
    ("apps", "read_namespaced_deployment", "self.apps"),
])
def test_unmappable_call_is_a_clear_error(client, method, words):
    with pytest.raises(ValueError, match=words):
        permission_for(client, method)


def test_adapter_calls_are_found_in_the_source():
    calls = client_calls()
    # passed as a function to _call (not called directly): must still be seen
    assert ("core", "read_node") in calls and ("core", "create_namespaced_pod_eviction") in calls
    assert ("batch", "create_namespaced_job") in calls
    assert all(lines for lines in calls.values())


def test_granted_rules_equal_the_derived_set(docs):
    used = adapter_permissions()
    assert granted_permissions(docs, "gpu-remedy") == used
    assert check_rbac(docs, "gpu-remedy") == []
    # what the brief expects the adapter to need today (a sanity anchor for the derivation itself)
    assert {Permission("", "nodes", "patch"), Permission("", "pods/eviction", "create"),
            Permission("", "pods/log", "get"), Permission("batch", "jobs", "create")} <= used
    assert not any(p.verb in ("delete", "deletecollection", "update") and p.resource == "nodes" for p in used)
    assert not any(p.resource.startswith("secrets") for p in used)


def test_cluster_role_is_only_cluster_wide_needs(docs):
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpu-remedy")
    rules = {Permission(g, r, v) for rule in cluster_role["rules"] for g in rule["apiGroups"]
             for r in rule["resources"] for v in rule["verbs"]}
    assert rules == {Permission("", "nodes", v) for v in ("get", "list", "patch")} | {
        Permission("", "pods", "list"), Permission("", "pods/eviction", "create"),
        # a drain evicts in every namespace, so reading a refused pod's labels (to name its budgets) is too
        Permission("", "pods", "get"),
        # an evicted pod of a Job that ignores disruptions loses its job-tracking finalizer (no failure back-off)
        Permission("", "pods", "patch"),
        # preemption suspends a lower-priority Job, JobSet or PyTorchJob wherever it runs (a Kueue-managed one
        # through its Kueue Workload), reading it first
        Permission("batch", "jobs", "get"), Permission("batch", "jobs", "patch"),
        Permission("jobset.x-k8s.io", "jobsets", "get"), Permission("jobset.x-k8s.io", "jobsets", "patch"),
        Permission("kubeflow.org", "pytorchjobs", "get"), Permission("kubeflow.org", "pytorchjobs", "patch"),
        Permission("kueue.x-k8s.io", "workloads", "list"), Permission("kueue.x-k8s.io", "workloads", "patch")}
    roles = {(d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs if d["kind"] == "Role"}
    assert ("gpu-remedy-jobs", "gpu-remedy") in roles and ("gpu-remedy-workload", "training") in roles
    assert ("gpu-remedy-events", event_namespace()) in roles


def test_adding_a_call_without_a_verb_fails(docs, tmp_path):
    source = tmp_path / "kubernetes.py"
    source.write_text(ADAPTER_SOURCE.read_text() + "\n\ndef extra(self):\n    self.core.delete_node('x')\n")
    assert check_rbac(docs, "gpu-remedy", source) == ["adapter uses nodes delete but no Role grants it"]


def test_granting_more_than_used_fails(docs):
    widened = [dict(d) for d in docs]
    role = next(d for d in widened if d["kind"] == "ClusterRole")
    role["rules"] = role["rules"] + [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    assert check_rbac(widened, "gpu-remedy") == ["RBAC grants secrets get but the adapter never uses it"]


def test_rules_of_an_unbound_role_do_not_count(docs):
    unbound = [d for d in docs if not (d["kind"] == "RoleBinding" and d["metadata"]["name"] == "gpu-remedy-events")]
    assert "adapter uses events create but no Role grants it" in check_rbac(unbound, "gpu-remedy")


def test_roles_follow_the_configured_namespaces(tmp_path):
    cfg = tmp_path / "prod.yaml"
    cfg.write_text("cluster:\n  mode: in-cluster\n  jobs_namespace: gpu-checks\nworkload:\n  namespace: llm\n")
    docs = render_manifests(Values(), cfg)
    where = {d["metadata"]["name"]: d["metadata"].get("namespace") for d in docs if d["kind"] == "Role"}
    assert where["gpu-remedy-jobs"] == "gpu-checks" and where["gpu-remedy-workload"] == "llm"
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"} == {"gpu-remedy", "gpu-checks"}


def test_deploy_rbac_lists_every_permission_render_grants(docs, capsys):
    """`remedy deploy rbac` (a documented production step) prints the custom resources too, and what it lists is
    exactly what the rendered Roles grant (it crashed on the workload port's CustomObjectsApi calls)."""
    import json

    from remedy.cli import main

    assert main(["deploy", "rbac", "--json"]) == 0
    listed = {Permission(r["api_group"], r["resource"], r["verb"]) for r in json.loads(capsys.readouterr().out)}
    assert Permission("jobset.x-k8s.io", "jobsets", "patch") in listed
    assert listed == granted_permissions(docs, "gpu-remedy")
    assert main(["deploy", "rbac"]) == 0
    assert "workloads.kueue.x-k8s.io" in capsys.readouterr().out
