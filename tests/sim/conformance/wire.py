"""Helpers for the conformance suite: the wire as a client sees it, and strict reading through the official models.

Sources cited by the tests are Kubernetes v1.36.2 as vendored by openshift/microshift
(deps/github.com/openshift/kubernetes, io.openshift.build.versions kubernetes=1.36.2) and k8s.io/api v0.36.2.
"""

from __future__ import annotations

import http.client
import json
import time
from datetime import datetime

from kubernetes import client

K8S = "v1.36.2"


def raw(sim, method: str, path: str, body=None, content_type: str = "application/json",
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request as it goes over the wire: (status code, headers with lower-case names, body)."""
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=10)
    try:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data, headers={"Content-Type": content_type, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _norm(value):
    """JSON as the models give it back: timestamps compared as instants."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value


def strict(api_client: client.ApiClient, model: str, data) -> object:
    """Read `data` (bytes, str or dict) into the official client's `model` (V1Node, V1Status, ...) with its
    pydantic validation, and require the model to hold every field that was sent: a field the model does not
    know, or a value of the wrong type, fails here instead of being dropped silently."""
    text = data.decode() if isinstance(data, bytes) else data if isinstance(data, str) else json.dumps(data)
    obj = api_client.deserialize(text, model, "application/json")
    sent, kept = _norm(json.loads(text)), _norm(api_client.sanitize_for_serialization(obj))
    assert kept == sent, f"{model} does not hold what the simulator sent:\n{_diff(sent, kept)}"
    return obj


def _diff(sent, kept, path="") -> str:
    if isinstance(sent, dict) and isinstance(kept, dict):
        out = [f"{path}.{k}: {'lost' if k not in kept else 'added'}" for k in set(sent) ^ set(kept)]
        out += [_diff(sent[k], kept[k], f"{path}.{k}") for k in set(sent) & set(kept) if sent[k] != kept[k]]
        return "\n".join(x for x in out if x)
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        return "\n".join(_diff(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(sent, kept)) if a != b)
    return f"{path}: sent {sent!r}, model has {kept!r}"


# Real controllers act asynchronously, and on a loaded 2-core machine a kube-controller-manager sharing the CPU
# with the tests takes seconds more than the simulator; the real lane's fixture raises this (conftest.py).
SLACK = 1.0


def wait_for(predicate, timeout: float = 8.0, every: float = 0.02):
    deadline = time.monotonic() + timeout * SLACK
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
