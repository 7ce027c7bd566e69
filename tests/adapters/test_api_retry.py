"""The one retry policy and the meaning of each API answer, over real HTTP: a scripted server for the answers the
simulator has no reason to give (503 while an API server restarts, a plain 500), the simulator for the rest."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from remedy.config import load_settings
from remedy.errors import (
    AlreadyExists,
    ApiServerError,
    ClusterUnreachable,
    Conflict,
    Forbidden,
    ObjectNotFound,
    Rejected,
)
from tests.fixtures.sim import settings_for

NODE_LIST = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": [
    {"metadata": {"name": "gpu001", "labels": {"nvidia.com/gpu.present": "true"}, "resourceVersion": "7"},
     "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]}


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class Scripted:
    """A loopback HTTP server answering each request with the next (code, headers, body) of its script."""

    def __init__(self, *answers: tuple[int, dict[str, str], bytes | dict]) -> None:
        self.answers, self.seen = list(answers), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((time.monotonic(), self.path))
                code, headers, body = outer.answers.pop(0) if outer.answers else (599, {}, b"script ran out")
                data = json.dumps(body).encode() if isinstance(body, dict) else body
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def cluster(self, retries: int = 3) -> KubernetesCluster:
        host, port = self.httpd.server_address
        # watch_nodes off: the script answers requests in order, and a node cache would take answers meant
        # for the call under test (its own list and watch)
        return KubernetesCluster(load_settings(cluster={"simulator_url": f"http://{host}:{port}",
                                                        "api_retries": retries, "request_timeout_seconds": 5}),
                                 watch_nodes=False)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(*answers):
        servers.append(Scripted(*answers))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_503_while_the_api_server_restarts_is_retried_after_what_it_asks(scripted):
    server = scripted((503, {"Retry-After": "1"}, status(503, "ServiceUnavailable", "apiserver is shutting down")),
                      (200, {}, NODE_LIST))
    with server.cluster() as c:
        nodes = c.list_gpu_nodes()
    assert [n.name for n in nodes] == ["gpu001"]
    (t1, _), (t2, _) = server.seen
    assert t2 - t1 >= 0.9  # waited the second it was asked to, not the 0.2 s default back-off


def test_gateway_errors_back_off_and_then_say_what_failed(scripted):
    server = scripted(*[(502, {"Content-Type": "text/html"}, b"<html>502 Bad Gateway</html>")] * 3)
    with server.cluster(retries=2) as c, pytest.raises(ClusterUnreachable) as err:
        c.list_gpu_nodes()
    assert len(server.seen) == 3
    assert "failed to list GPU nodes after 3 attempts: HTTP 502: <html>502 Bad Gateway</html>" in str(err.value)


def test_a_plain_500_is_an_answer_not_an_outage(scripted):
    """500 without Retry-After means the server failed this request; a retry would get the same: one attempt, an
    ApiServerError (not ClusterUnreachable, which tasks retry), with the server's words."""
    server = scripted((500, {}, status(500, "InternalError", "Internal error occurred: etcdserver: no leader")))
    with server.cluster() as c, pytest.raises(ApiServerError, match="etcdserver: no leader") as err:
        c.list_gpu_nodes()
    assert not isinstance(err.value, ClusterUnreachable) and len(server.seen) == 1


def test_a_500_that_asks_to_come_back_is_retried(scripted):
    server = scripted((500, {"Retry-After": "1"}, status(500, "InternalError", "storage busy")), (200, {}, NODE_LIST))
    with server.cluster() as c:
        assert len(c.list_gpu_nodes()) == 1
    assert len(server.seen) == 2


@pytest.mark.parametrize(("code", "reason", "error"), [
    (404, "NotFound", ObjectNotFound), (409, "Conflict", Conflict), (409, "AlreadyExists", AlreadyExists),
    (422, "Invalid", Rejected), (400, "BadRequest", Rejected), (403, "Forbidden", Forbidden),
    (401, "Unauthorized", Forbidden),
])
def test_answers_are_named_by_meaning_and_not_retried(scripted, code, reason, error):
    server = scripted((code, {}, status(code, reason, f"the server says {reason}")))
    with server.cluster() as c, pytest.raises(error, match=f"the server says {reason}"):
        c.list_gpu_nodes()
    assert len(server.seen) == 1


def test_forbidden_points_at_rbac(scripted):
    server = scripted((403, {}, status(403, "Forbidden", 'nodes is forbidden: User "system:serviceaccount:gpu-remedy:'
                                                         'remedy" cannot patch resource "nodes"')))
    with server.cluster() as c, pytest.raises(Forbidden) as err:
        c.cordon("gpu001", reason="x", by="test")
    assert str(err.value).startswith("not allowed to read node gpu001: nodes is forbidden") and "RBAC" in str(err.value)


def test_the_simulators_answers_classify_as_the_real_ones_do(sim):
    """Against the simulator's own bodies: a missing node, a stale resourceVersion, a duplicate Job."""
    from kubernetes import client as k8s

    with KubernetesCluster(settings_for(sim)) as c:
        with pytest.raises(ObjectNotFound, match="node not found: gpu999"):
            c.get_node("gpu999")
        stale = c.get_node("gpu002").resource_version
        c.set_labels("gpu002", {"example.com/x": "1"})
        with pytest.raises(Conflict, match="the object has been modified"):
            c._call("patch node gpu002", c.core.patch_node, "gpu002",
                    {"metadata": {"resourceVersion": stale, "labels": {"example.com/x": "2"}}},
                    _content_type="application/strategic-merge-patch+json")
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "twice"}, "spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
        assert c.create_job(job) is True
        assert c.create_job(job) is False  # AlreadyExists: a retry of the same step made it
        with pytest.raises(AlreadyExists):
            c._call("create job twice", c.batch.create_namespaced_job, "gpu-remedy", job)
        assert isinstance(k8s.BatchV1Api(c.api).read_namespaced_job("twice", "gpu-remedy"), k8s.V1Job)


def test_two_budgets_are_named_from_their_selectors(scripted):
    """The eviction's 500 names no budget: the adapter reads the pod's labels and the namespace's budgets and names
    those that select it (policy/v1: an empty selector selects every pod, a missing one none). Asked once."""
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "w-0", "namespace": "ml", "labels": {"app": "w"}}}
    budgets = {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {}, "items": [
        {"metadata": {"name": name}, "spec": {"selector": selector}}
        for name, selector in (("by-app", {"matchLabels": {"app": "w"}}), ("everything", {}),
                               ("other", {"matchLabels": {"app": "x"}}))]}
    server = scripted((500, {}, {k: v for k, v in status(500, "", "").items() if k != "reason"} | {
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}),
        (200, {}, pod), (200, {}, budgets))
    with server.cluster() as c:
        evicted, not_evicted, blocked, refused = c._evict(["ml/w-0"], 30, time.monotonic(), 20)
    assert evicted == [] and blocked == 0 and len(server.seen) == 3
    assert "more than one PodDisruptionBudget (by-app, everything)" in refused["ml/w-0"]
    assert not_evicted == refused
