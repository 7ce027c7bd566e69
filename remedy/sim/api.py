"""The Kubernetes REST API over the simulated cluster, transport-free: `handle(...) -> Reply`.

Verbs: list (label/field selectors, limit/continue, Table output), get, create, update (PUT), patch
(strategic merge, JSON merge, JSON patch), delete (grace, propagation, preconditions); subresources
status, pods/log (follow) and pods/eviction. Writes run the control loop before the reply is sent.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl

from remedy.sim import admission, crds, discovery, paging, podgc, validation
from remedy.sim.cluster import Cluster
from remedy.sim.controller import delete_pod, start_bound_pod
from remedy.sim.disruption import evict
from remedy.sim.logs import pod_log
from remedy.sim.objects import random_suffix
from remedy.sim.patch import json_patch, merge_patch, strategic_merge
from remedy.sim.selectors import parse_field_selector, parse_label_selector
from remedy.sim.store import (
    ApiError,
    bad_request,
    conflict,
    deep_copy,
    dumps,
    invalid,
    normalize_times,
    not_found,
    now_iso,
    precondition_failed,
)
from remedy.sim.tables import table
from remedy.sim.watch import watch

JSON = "application/json"
PATCH_TYPES = ("application/strategic-merge-patch+json", "application/merge-patch+json", "application/json-patch+json")


@dataclass
class Reply:
    code: int
    body: bytes | Iterator[bytes]
    content_type: str = JSON
    headers: dict[str, str] | None = None


def ok(obj, code: int = 200) -> Reply:
    return Reply(code, dumps(obj))


def error_reply(err: ApiError) -> Reply:
    # apiserver endpoints/handlers/responsewriters (ErrorNegotiated): Retry-After when retryAfterSeconds > 0
    wait = (err.details or {}).get("retryAfterSeconds")
    return Reply(err.code, dumps(err.status()), headers={"Retry-After": str(wait)} if wait else None)


def success_status(kind: str, name: str, uid: str = "") -> dict:
    resource, group = discovery.BY_KIND[kind].plural, discovery.BY_KIND[kind].group
    details = {"name": name, "kind": resource, **({"group": group} if group else {}), **({"uid": uid} if uid else {})}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


@dataclass
class Target:
    resource: discovery.Resource
    namespace: str | None
    name: str | None
    sub: str | None


def route(path: str) -> Target | None:
    """Parse /api/v1/... or /apis/<g>/<v>/... into resource, namespace, name, subresource."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    res = discovery.BY_PATH.get((group, version, rest[0]))
    if res is None or (namespace is not None and not res.namespaced) or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in res.subresources:
        return None
    return Target(res, namespace, name, sub)


def _query(qs: str) -> dict[str, str]:
    """The query as the API server reads it: Go's url.Values (net/url parseQuery) drops a pair with a `;` or a bad
    %-escape instead of failing the request, and a repeated parameter counts once, its first value
    (staging/src/k8s.io/apimachinery/pkg/runtime/conversion.go, Convert_Slice_string_To_string)."""
    out: dict[str, str] = {}
    for pair in qs.split("&"):
        if not pair or ";" in pair or _BAD_ESCAPE.search(pair):
            continue
        for k, v in parse_qsl(pair, keep_blank_values=True):
            out.setdefault(k, v)
    return out


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _json_body(body: bytes):
    if not body:
        raise bad_request("request body is empty")
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


def handle(cluster: Cluster, method: str, path: str, qs: str, headers: dict[str, str], body: bytes,
           server_address: str = "127.0.0.1") -> Reply:
    try:
        return _handle(cluster, method, path, _query(qs), headers, body, server_address)
    except ApiError as err:
        return error_reply(err)


def _handle(cluster, method, path, query, headers, body, server_address) -> Reply:
    path = path.rstrip("/") or "/"
    if method == "GET":
        doc = _discovery(path, server_address)
        if doc is not None:
            return doc
    target = route(path)
    if target is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource",
                       {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})
    res, ns, name, sub = target.resource, target.namespace, target.name, target.sub
    if ns is not None and cluster.store.get("Namespace", "", ns) is None and method != "GET":
        raise not_found("Namespace", ns)
    if (sub == "log" and method != "GET") or (sub == "eviction" and method != "POST"):
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {res.plural}/{sub}")
    if method == "GET":
        if query.get("watch") in ("true", "1") and sub is None:
            return watch(cluster, res, ns, name, query)
        if name is None:
            return _list(cluster, res, ns, query, headers.get("accept", ""))
        if sub == "log":
            body, _ = pod_log(cluster, ns or "", name, query)
            return Reply(200, body, "text/plain")
        entry = cluster.store.get_entry(res.kind, ns or "", name)
        if entry is None:
            raise not_found(res.kind, name)
        if "as=Table" in headers.get("accept", ""):
            return ok(table(res.kind, [entry.obj], str(cluster.store.resource_version), ""))
        return Reply(200, entry.raw())
    dry_run = "dryRun" in query
    if method == "POST":
        if sub == "eviction":
            eviction = _json_body(body)
            # dryRun=All on the request or in the Eviction's deleteOptions (eviction.go: either asks for a dry run)
            options = eviction.get("deleteOptions") if isinstance(eviction, dict) else None
            dry = dry_run or bool(isinstance(options, dict) and options.get("dryRun"))
            return ok(evict(cluster, ns or "", name, eviction, dry_run=dry), 201)
        if name is not None:
            raise ApiError(405, "MethodNotAllowed", f"POST is not supported on a named {res.plural} path")
        return _create(cluster, res, ns, _json_body(body), dry_run)
    if name is None:
        raise ApiError(405, "MethodNotAllowed", f"{method} needs a {res.singular} name in the path")
    if method == "PUT":
        return _write(cluster, res, ns or "", name, sub, lambda cur: _json_body(body), dry_run, replace=True)
    if method == "PATCH":
        ctype = headers.get("content-type", "").split(";")[0].strip()
        crds.check_patch_type(res.kind, ctype)
        patch = _json_body(body) if ctype in PATCH_TYPES else None
        if ctype == "application/strategic-merge-patch+json":
            fn = lambda cur: strategic_merge(cur, patch)  # noqa: E731
        elif ctype == "application/merge-patch+json":
            fn = lambda cur: merge_patch(cur, patch)  # noqa: E731
        elif ctype == "application/json-patch+json":
            fn = lambda cur: json_patch(cur, patch)  # noqa: E731
        else:
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                           f"accepted media types include: application/json-patch+json, "
                           f"application/merge-patch+json, application/strategic-merge-patch+json (got {ctype!r})")
        return _write(cluster, res, ns or "", name, sub, fn, dry_run, replace=False)
    if method == "DELETE":
        return _delete(cluster, res, ns or "", name, query, body, dry_run)
    raise ApiError(405, "MethodNotAllowed", f"method {method} is not supported")


def _discovery(path: str, server_address: str) -> Reply | None:
    if path == "/version":
        return ok(discovery.SERVER_VERSION)
    if path == "/api":
        return ok(discovery.api_versions(server_address))
    if path == "/apis":
        return ok(discovery.api_group_list())
    if path in ("/healthz", "/readyz", "/livez"):
        return Reply(200, b"ok", "text/plain")
    parts = [p for p in path.split("/") if p]
    if parts == ["api", "v1"]:
        return ok(discovery.resource_list("", "v1"))
    if len(parts) == 2 and parts[0] == "apis":
        doc = discovery.api_group(parts[1])
        return ok(doc) if doc else None
    if len(parts) == 3 and parts[0] == "apis":
        doc = discovery.resource_list(parts[1], parts[2])
        return ok(doc) if doc else None
    return None


# ------------------------------------------------------------------ list
def _list(cluster: Cluster, res, ns, query, accept: str) -> Reply:
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), res.kind)
    with cluster.lock:
        node = fields.equals.get("spec.nodeName") if res.kind == "Pod" else None
        name = fields.equals.get("metadata.name")
        if node is not None:  # kubectl describe/drain: the pods of one node, from the index
            keys = list(cluster.index.by_node.get(node, {}))
            entries = [e for e in (cluster.store.get_entry("Pod", *k) for k in keys) if e is not None]
        elif name is not None:
            entries = [e for e in (cluster.store.get_entry(res.kind, ns or "", name),) if e is not None] \
                if ns is not None or not res.namespaced else \
                [e for e in cluster.store.entries(res.kind) if e.obj["metadata"]["name"] == name]
        else:
            entries = cluster.store.entries(res.kind, ns)
        if ns is not None and (node is not None or name is not None):
            entries = [e for e in entries if e.obj["metadata"].get("namespace", "") == ns]
        rv = str(cluster.store.resource_version)
    selected = bool(query.get("labelSelector") or query.get("fieldSelector"))
    page, cont, remaining, rv = paging.page(
        entries, lambda e: paging.storage_key(e.obj),
        lambda e: labels(e.obj["metadata"].get("labels") or {}) and fields(e.obj), query, int(rv),
        cluster.store.compacted, selected)
    rv = str(rv)
    if "as=Table" in accept:
        return ok(table(res.kind, [e.obj for e in page], rv, cont, query.get("includeObject", "Metadata")))
    meta = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    head = dumps({"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta})
    body = head[:-1] + b',"items":[' + b",".join(e.raw() for e in page) + b"]}"
    return Reply(200, body)


# ------------------------------------------------------------------ create
def _create(cluster: Cluster, res, ns, obj, dry_run: bool) -> Reply:
    if not isinstance(obj, dict):
        raise bad_request(f"the body of a {res.kind} must be a JSON object")
    if obj.get("kind") not in (None, res.kind) or obj.get("apiVersion") not in (None, res.api_version):
        raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) and kind ({obj.get('kind')}) "
                          f"do not match the request ({res.api_version} {res.kind})")
    obj = deep_copy(obj)
    obj["kind"], obj["apiVersion"] = res.kind, res.api_version
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if res.namespaced:
        if meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = ns
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName']}{random_suffix()}"
    for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
        meta.pop(field, None)
    meta["generation"] = 1
    validation.validate(res.kind, obj)
    meta["uid"] = str(uuid.uuid4())
    normalize_times(obj)
    admission.default(cluster, res.kind, obj)
    if res.kind == "Job":
        admission.fix_job_selector(obj)
    if dry_run:
        return ok(obj, 201)
    with cluster.lock:
        cluster.store.create(res.kind, obj)
        if res.kind == "Node":
            admission.adopt_node(cluster, obj)
        elif res.kind == "Pod" and (obj.get("spec") or {}).get("nodeName"):
            start_bound_pod(cluster, ns or "", meta["name"])
        cluster.reconcile({meta["name"]} if res.kind == "Node" else set())
        stored = cluster.store.get(res.kind, ns or "", meta["name"]) or obj
    return ok(stored, 201)


# ------------------------------------------------------------------ update / patch
def _write(cluster: Cluster, res, ns: str, name: str, sub: str | None, compute, dry_run: bool, replace: bool) -> Reply:
    with cluster.lock:
        current = cluster.store.require(res.kind, ns, name)
        new = compute(current)
        if not isinstance(new, dict):
            raise bad_request(f"the result of the {'update' if replace else 'patch'} must be a JSON object")
        new = deep_copy(new)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if replace and meta.get("name") not in (None, name):
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
        sent_rv = meta.get("resourceVersion")
        cur_rv = current["metadata"]["resourceVersion"]
        if sent_rv not in (None, "") and str(sent_rv) != cur_rv:  # optimistic concurrency precondition
            raise conflict(res.kind, name)
        for field in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
            else:
                meta.pop(field, None)
        new["kind"], new["apiVersion"] = res.kind, res.api_version
        if sub == "status":  # the status endpoint changes status only
            new = dict(deep_copy(current), status=new.get("status", {}))
        elif "status" in current or "status" in new:  # the main endpoint never changes status
            if res.kind not in ("ConfigMap", "Lease", "Event"):
                new["status"] = deep_copy(current.get("status", {}))
        if res.kind == "Job" and new.get("spec") != current.get("spec"):
            _check_job_update(current, new)
        crds.check_update(cluster, res.kind, current, new)
        if new.get("spec") != current.get("spec") and "generation" in current["metadata"]:
            new["metadata"]["generation"] = int(current["metadata"]["generation"]) + 1
        validation.validate(res.kind, new)
        normalize_times(new)
        if dry_run:
            return ok(new)
        cluster.store.put(res.kind, new, expect_rv=cur_rv)
        cluster.reconcile({name} if res.kind == "Node" else set())
        return ok(cluster.store.get(res.kind, ns, name) or new)


def _check_job_update(current: dict, new: dict) -> None:
    if new.get("spec", {}).get("template") != current.get("spec", {}).get("template"):
        raise invalid("Job", current["metadata"]["name"],
                      [("spec.template", "FieldValueInvalid", "Invalid value: field is immutable")])
    # pkg/apis/batch/validation/validation.go validateCompletions: immutable unless Indexed (elastic Indexed Jobs),
    # and then only together with parallelism
    spec, old = new.get("spec") or {}, current.get("spec") or {}
    completions = spec.get("completions")
    if completions == old.get("completions") or completions is None:
        return
    if spec.get("completionMode") != "Indexed":
        why = "field is immutable"
    elif completions != spec.get("parallelism"):
        why = "can only be modified in tandem with spec.parallelism"
    else:
        return
    raise invalid("Job", current["metadata"]["name"],
                  [("spec.completions", "FieldValueInvalid", f"Invalid value: {completions}: {why}")])


# ------------------------------------------------------------------ delete
def _delete(cluster: Cluster, res, ns: str, name: str, query, body: bytes, dry_run: bool) -> Reply:
    options = {}
    if body:
        options = _json_body(body)
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be a JSON object")
    grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
    if grace is not None:
        try:
            grace = int(grace)
        except (TypeError, ValueError):
            raise bad_request(f"gracePeriodSeconds must be an integer, got {grace!r}") from None
    policy = options.get("propagationPolicy") or query.get("propagationPolicy")
    if policy is None and options.get("orphanDependents") is not None:
        policy = "Orphan" if options["orphanDependents"] else "Background"
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise bad_request(f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                          '"Foreground", "Background", "Orphan"')
    with cluster.lock:
        current = cluster.store.require(res.kind, ns, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise precondition_failed(res.kind, name, "UID", pre["uid"], current["metadata"]["uid"])
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise precondition_failed(res.kind, name, "ResourceVersion", pre["resourceVersion"],
                                      current["metadata"]["resourceVersion"])
        if dry_run:
            return ok(current if res.kind == "Pod" else success_status(res.kind, name, current["metadata"]["uid"]))
        if res.kind == "Pod":
            out = delete_pod(cluster, ns, name, grace)
            cluster.reconcile(set())
            return ok(cluster.store.get("Pod", ns, name) or out)
        uid = current["metadata"]["uid"]
        cluster.store.remove(res.kind, ns, name)
        finalizer = {None: "orphan", "Orphan": "orphan", "Foreground": "foregroundDeletion"}.get(policy) \
            if res.kind == "Job" else None
        if finalizer:
            # the garbage collector's finalizer keeps the object a moment, so a real server answers 200 with the
            # object being deleted, not a Status (checked on v1.36.2); the simulator removes it at once
            gone = deep_copy(current)
            gone["metadata"].update(deletionTimestamp=now_iso(), deletionGracePeriodSeconds=0,
                                    finalizers=[*(gone["metadata"].get("finalizers") or []), finalizer])
        if res.kind == "Job":
            # batch/v1 Jobs orphan their pods unless asked otherwise (kubectl asks for Background)
            for pod in cluster.index.owned(uid):
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if policy in ("Background", "Foreground"):
                    delete_pod(cluster, *key, grace)
                else:
                    cluster.store.mutate("Pod", *key, lambda p: p["metadata"].pop("ownerReferences", None))
            cluster.job_targets.pop(uid, None)
        elif res.kind == "Node":  # PodGC: the node's pods go 40-60 s later, marked as disrupted (remedy.sim.podgc)
            podgc.node_deleted(cluster, name)
        elif res.kind in crds.KINDS:  # custom resources: background garbage collection of what they own
            crds.collect(cluster, current, grace)
        elif res.kind == "Namespace":
            for kind in cluster.store.kinds():
                for obj in cluster.store.objects(kind, name):
                    cluster.store.remove(kind, name, obj["metadata"]["name"])
        cluster.reconcile(set())
    return ok(gone if finalizer else success_status(res.kind, name, uid))
