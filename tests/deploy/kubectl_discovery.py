"""A discovery-only API server for `kubectl create --dry-run=client`: kubectl maps each manifest's kind to a
resource through discovery even in client dry-run, so offline it needs something that answers `/api` and `/apis`.
The resource lists are the real Kubernetes ones for the kinds an install uses; nothing is stored or served else."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOURCES = {
    "v1": [("namespaces", "Namespace", False), ("serviceaccounts", "ServiceAccount", True),
           ("configmaps", "ConfigMap", True), ("services", "Service", True), ("secrets", "Secret", True),
           ("pods", "Pod", True)],
    "apps/v1": [("deployments", "Deployment", True), ("statefulsets", "StatefulSet", True)],
    "batch/v1": [("jobs", "Job", True)],
    "rbac.authorization.k8s.io/v1": [("clusterroles", "ClusterRole", False),
                                     ("clusterrolebindings", "ClusterRoleBinding", False),
                                     ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
}


def _resource_list(gv: str) -> dict:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
        {"name": n, "singularName": k.lower(), "namespaced": ns, "kind": k,
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]} for n, k, ns in RESOURCES[gv]]}


def _groups() -> dict:
    groups = []
    for gv in RESOURCES:
        if "/" in gv:
            g, v = gv.split("/")
            groups.append({"name": g, "versions": [{"groupVersion": gv, "version": v}],
                           "preferredVersion": {"groupVersion": gv, "version": v}})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        routes = {"/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
                  "/apis": _groups(), "/api/v1": _resource_list("v1"),
                  "/version": {"major": "1", "minor": "30", "gitVersion": "v1.30.0"}}
        routes |= {f"/apis/{gv}": _resource_list(gv) for gv in RESOURCES if "/" in gv}
        body = routes.get(path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        data = json.dumps(body or {"kind": "Status", "status": "Failure", "code": 404}).encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


class DiscoveryServer:
    def __enter__(self) -> DiscoveryServer:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
