"""RBAC derived from the code: every `self.core.*` / `self.batch.*` the Kubernetes adapter touches (and
`self.cluster.core.*` / `self.cluster.batch.*` in its workload port, remedy/adapters/workloads.py), mapped to
(apiGroup, resource, verb), compared with what the rendered (Cluster)Roles grant to the service account.
CustomObjectsApi calls (`self.cluster.custom.*`) name their resource in arguments, so the port declares the
custom resources it touches (`CRD_RBAC`) and each verb it calls must be declared there."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from remedy.errors import RemedyError
from remedy.production.values import ADAPTER_SOURCE, WORKLOADS_SOURCE


class Permission(NamedTuple):
    api_group: str
    resource: str
    verb: str


CLIENT_GROUPS = {"core": "", "batch": "batch"}  # KubernetesCluster attribute → API group of CoreV1Api / BatchV1Api
_VERBS = (("read_", "get"), ("list_", "list"), ("patch_", "patch"), ("create_", "create"), ("replace_", "update"),
          ("delete_collection_", "deletecollection"), ("delete_", "delete"))
_KINDS = sorted(("node", "pod", "job", "event", "namespace", "config_map", "secret", "service", "service_account",
                 "persistent_volume_claim", "pod_disruption_budget", "endpoints", "lease"), key=len, reverse=True)


def permission_for(client: str, method: str) -> Permission:
    """`read_namespaced_pod_log` on `core` → ("", "pods/log", "get"); ValueError for a method we cannot map."""
    if client not in CLIENT_GROUPS:
        raise ValueError(f"unknown Kubernetes client attribute self.{client} (known: {', '.join(CLIENT_GROUPS)})")
    verb = next((v for prefix, v in _VERBS if method.startswith(prefix)), None)
    if verb is None:
        raise ValueError(f"self.{client}.{method}: cannot tell the RBAC verb of this client method")
    rest = method[len(next(p for p, v in _VERBS if method.startswith(p))):]
    rest = rest.removeprefix("namespaced_").removesuffix("_for_all_namespaces")
    kind = next((k for k in _KINDS if rest == k or rest.startswith(k + "_")), None)
    if kind is None:
        raise ValueError(f"self.{client}.{method}: unknown resource {rest!r}; add it to remedy.production._KINDS")
    plural = kind.replace("_", "") + ("" if kind.endswith("s") else "s")
    sub = rest[len(kind) + 1:]
    return Permission(CLIENT_GROUPS[client], f"{plural}/{sub}" if sub else plural, verb)


CUSTOM = "custom"  # KubernetesCluster.custom: CustomObjectsApi


def _is_self(node: ast.AST) -> bool:
    """`self` or `self.cluster` (the workload port reaches the clients through its KubernetesCluster)."""
    return (isinstance(node, ast.Name) and node.id == "self") or (
        isinstance(node, ast.Attribute) and node.attr == "cluster" and isinstance(node.value, ast.Name)
        and node.value.id == "self")


def client_calls(source: str | Path = ADAPTER_SOURCE, *, port: str | Path | None = WORKLOADS_SOURCE
                 ) -> dict[tuple[str, str], list[int]]:
    """Every `self.core.X` / `self.batch.X` / `self.custom.X` the adapter touches (called or passed to `_call`),
    in `source` and in the workload port → source lines."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in [source] + ([port] if port else []):
        for node in ast.walk(ast.parse(Path(path).read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and _is_self(node.value.value) and node.value.attr in (*CLIENT_GROUPS, CUSTOM)):
                found.setdefault((node.value.attr, node.attr), []).append(node.lineno)
    return found


def crd_permissions(port: str | Path = WORKLOADS_SOURCE) -> set[Permission]:
    """The port's CRD_RBAC literal ((apiGroup, resource, verb), ...), read without importing it."""
    for node in ast.parse(Path(port).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CRD_RBAC" for t in node.targets):
            return {Permission(*p) for p in ast.literal_eval(node.value)}
    raise RemedyError(f"{port}: no CRD_RBAC constant")


def adapter_permissions(source: str | Path = ADAPTER_SOURCE) -> set[Permission]:
    calls = client_calls(source)
    out = {permission_for(client, method) for client, method in calls if client != CUSTOM}
    used = {next((v for prefix, v in (("get_", "get"), *_VERBS) if m.startswith(prefix)), m)
            for c, m in calls if c == CUSTOM}
    declared = crd_permissions()
    if used - {p.verb for p in declared}:
        raise ValueError(f"self.cluster.custom calls with verbs {sorted(used - {p.verb for p in declared})} "
                         "that remedy.adapters.workloads.CRD_RBAC does not declare")
    return out | {p for p in declared if p.verb in used}


def event_namespace(source: str | Path = ADAPTER_SOURCE) -> str:
    """The adapter's EVENT_NAMESPACE constant (where Node events are written), read without importing it."""
    for node in ast.parse(Path(source).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EVENT_NAMESPACE" for t in node.targets):
            return str(ast.literal_eval(node.value))
    raise RemedyError(f"{source}: no EVENT_NAMESPACE constant")


def granted_permissions(docs: list[dict], service_account: str) -> set[Permission]:
    """Union of the rules of every (Cluster)Role bound to the service account in the rendered manifests."""
    bound = {(d["roleRef"]["kind"], d["roleRef"]["name"], d["metadata"].get("namespace"))
             for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
             and any(s.get("name") == service_account for s in d.get("subjects", []))}
    out: set[Permission] = set()
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole"):
            continue
        ns = d["metadata"].get("namespace") if d["kind"] == "Role" else None
        if (d["kind"], d["metadata"]["name"], ns) not in bound:
            continue
        for rule in d.get("rules", []):
            out |= {Permission(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def check_rbac(docs: list[dict], service_account: str, source: str | Path = ADAPTER_SOURCE) -> list[str]:
    """Problems (empty = the manifests grant exactly what the adapter calls)."""
    used, granted = adapter_permissions(source), granted_permissions(docs, service_account)
    fmt = lambda p: f"{p.resource}{'.' + p.api_group if p.api_group else ''} {p.verb}"  # noqa: E731
    return ([f"adapter uses {fmt(p)} but no Role grants it" for p in sorted(used - granted)]
            + [f"RBAC grants {fmt(p)} but the adapter never uses it" for p in sorted(granted - used)])
