"""The resources the simulator serves, and the discovery documents kubectl and the client read first."""

from __future__ import annotations

from dataclasses import dataclass

SERVER_VERSION = {
    "major": "1", "minor": "31", "gitVersion": "v1.31.4-gpu-remedy-sim", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22.10", "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "get", "list", "patch", "update"]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


RESOURCES = (
    Resource("", "v1", "nodes", "Node", False, ("no",), ("status",)),
    Resource("", "v1", "pods", "Pod", True, ("po",), ("status", "log", "eviction")),
    Resource("", "v1", "events", "Event", True, ("ev",)),
    Resource("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("batch", "v1", "jobs", "Job", True, (), ("status",)),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    # training-workload CRDs (remedy.sim.crds)
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True, (), ("status",)),
    Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, (), ("status",)),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True, ("wl",), ("status",)),
)
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND = {r.kind: r for r in RESOURCES}


def groups() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in out.setdefault(r.group, []):
            out[r.group].append(r.version)
    return out


def api_versions(server_address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list() -> dict:
    return {
        "kind": "APIGroupList", "apiVersion": "v1",
        "groups": [{
            "name": g,
            "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{g}/{versions[0]}", "version": versions[0]},
        } for g, versions in groups().items()],
    }


def api_group(group: str) -> dict | None:
    versions = groups().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]}}


def resource_list(group: str, version: str) -> dict | None:
    members = [r for r in RESOURCES if r.group == group and r.version == version]
    if not members:
        return None
    resources = []
    for r in members:
        resources.append({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                          "kind": r.kind, "verbs": VERBS,
                          **({"shortNames": list(r.short_names)} if r.short_names else {})})
        for sub in r.subresources:
            kind, verbs = r.kind, ["get", "patch", "update"]
            if sub == "log":
                kind, verbs = "Pod", ["get"]
            elif sub == "eviction":
                kind, verbs = "Eviction", ["create"]
                resources.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                                  "group": "policy", "version": "v1", "kind": kind, "verbs": verbs})
                continue
            resources.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                              "kind": kind, "verbs": verbs})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
