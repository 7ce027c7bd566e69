"""The simulator's object store: every API object by (kind, namespace, name), one lock, one resourceVersion.

Stored objects are never mutated in place (copy, change, `put`), so a reader may serialize what it got
without the lock; each entry caches its JSON bytes, so listing 2,048 nodes is mostly a byte join.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from remedy.domain.times import parse_iso  # RFC 3339 as clients send it; naive means UTC
from remedy.errors import RemedyError

# kind -> (plural resource name, API group) for Status details, as the real server reports them.
RESOURCE_OF_KIND = {
    "Node": ("nodes", ""),
    "Pod": ("pods", ""),
    "Event": ("events", ""),
    "Namespace": ("namespaces", ""),
    "ConfigMap": ("configmaps", ""),
    "Job": ("jobs", "batch"),
    "PodDisruptionBudget": ("poddisruptionbudgets", "policy"),
    "Lease": ("leases", "coordination.k8s.io"),
    "DaemonSet": ("daemonsets", "apps"),
    "PriorityClass": ("priorityclasses", "scheduling.k8s.io"),
    "JobSet": ("jobsets", "jobset.x-k8s.io"),
    "PyTorchJob": ("pytorchjobs", "kubeflow.org"),
    "Workload": ("workloads", "kueue.x-k8s.io"),
}


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# metav1.Time fields: the real server stores them at second precision in UTC ("2026-01-02T03:04:05Z").
TIME_FIELDS = frozenset({
    "creationTimestamp", "deletionTimestamp", "firstTimestamp", "lastTimestamp", "lastTransitionTime",
    "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime", "startTime", "completionTime", "startedAt",
    "finishedAt", "timeAdded",
})


def normalize_times(value) -> None:
    """Rewrite every metav1.Time field in place to the server's canonical form (bad values are left alone)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in TIME_FIELDS and isinstance(v, str) and v:
                try:
                    value[k] = parse_iso(v).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                except ValueError:
                    pass
            else:
                normalize_times(v)
    elif isinstance(value, list):
        for v in value:
            normalize_times(v)


def deep_copy(value):
    """Copy of a JSON-shaped value (several times faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_copy(v) for v in value]
    return value


def dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class ApiError(RemedyError):
    """An API failure that the HTTP layer turns into a real `Status` object."""

    def __init__(self, code: int, reason: str | None, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            **({"reason": self.reason} if self.reason else {}),  # a StatusReason is omitempty
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(kind: str, name: str, **extra) -> dict:
    resource, group = RESOURCE_OF_KIND.get(kind, (kind.lower() + "s", ""))
    d = {"name": name, "kind": resource}
    if group:
        d["group"] = group
    d.update(extra)
    return d


def _qualified(kind: str) -> str:
    resource, group = RESOURCE_OF_KIND.get(kind, (kind.lower() + "s", ""))
    return f"{resource}.{group}" if group else resource


def not_found(kind: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(kind)} "{name}" not found', _details(kind, name))


def precondition_failed(kind: str, name: str, field: str, sent: str, stored: str) -> ApiError:
    """A DELETE (or an eviction) whose preconditions do not hold: staging/src/k8s.io/apiserver/pkg/registry/rest/
    delete.go BeforeDelete (and eviction.go addConditionAndDeletePod) — a Conflict on the *Kind*, not the
    resource (GroupResource{Group, Resource: Kind}), in their words. Checked on a real v1.36.2 server."""
    _, group = RESOURCE_OF_KIND.get(kind, ("", ""))
    why = ("deleted and then recreated" if field == "UID" else "modified")
    details = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind}{"." + group if group else ""} '
                    f'"{name}": the {field} in the precondition ({sent}) does not match the {field} in record '
                    f"({stored}). The object might have been {why}", details)


def already_exists(kind: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(kind)} "{name}" already exists', _details(kind, name))


def conflict(kind: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(kind)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(kind, name),
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """causes: (field, reason, message), e.g. ("spec.taints[0].effect", "FieldValueRequired", "Required value")."""
    text = ", ".join(f"{f}: {m}" for f, _, m in causes)
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {text}',
        # errors.NewInvalid names the kind (Node), not the resource (nodes) as NotFound does (checked on v1.36.2)
        {"name": name, **({"group": g} if (g := RESOURCE_OF_KIND.get(kind, ("", ""))[1]) else {}), "kind": kind,
         "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


class Stored:
    """One stored object plus its cached JSON encoding."""

    __slots__ = ("obj", "_raw")

    def __init__(self, obj: dict) -> None:
        self.obj = obj
        self._raw: bytes | None = None

    def raw(self) -> bytes:
        if self._raw is None:  # a race only encodes twice; the object itself never changes
            self._raw = dumps(self.obj)
        return self._raw


Key = tuple[str, str]  # (namespace or "", name)

# How many changes of one kind the store remembers for watches that start at an older resourceVersion: the API
# server's watch cache keeps a bounded window too (staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go,
# capacity between defaultLowerBoundCapacity 100 and defaultUpperBoundCapacity 100*1024); older is 410 Expired.
WATCH_HISTORY = 4096


class WatchEvent:
    """One change as a watch sees it: its revision, ADDED/MODIFIED/DELETED, the object after (for DELETED: as it
    was, at the deletion's revision) and before (None for ADDED)."""

    __slots__ = ("rv", "type", "namespace", "obj", "prev", "entry")

    def __init__(self, rv: int, type_: str, namespace: str, obj: dict, prev: dict | None,
                 entry: Stored | None = None) -> None:
        self.rv, self.type, self.namespace, self.obj, self.prev = rv, type_, namespace, obj, prev
        self.entry = entry  # the stored entry whose cached JSON is the object's (None: encode the object)

    def raw(self) -> bytes:
        return self.entry.raw() if self.entry is not None else dumps(self.obj)


class Watcher:
    """A watch's queue: the store appends under its lock; the HTTP thread serving the watch drains it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.queue: deque[WatchEvent] = deque()
        self.ready = threading.Event()
        self.closed = False

    def push(self, event: WatchEvent) -> None:
        self.queue.append(event)
        self.ready.set()

    def drain(self, timeout: float) -> list[WatchEvent]:
        if not self.queue:
            self.ready.wait(timeout)
        self.ready.clear()
        out = []
        while self.queue:
            out.append(self.queue.popleft())
        return out


class ResourceExpired(Exception):
    """A watch asked to start before the remembered window (watch_cache.go getAllEventsSinceLocked)."""

    def __init__(self, asked: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {asked} ({oldest})")
        self.asked, self.oldest = asked, oldest


class ObjectStore:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.resource_version = 0
        self.compacted = 0  # revisions before this are gone: a continue token from then is a 410 (remedy.sim.paging)
        self._kinds: dict[str, dict[Key, Stored]] = {}
        self.on_change: list[Callable[[str, str, str, dict | None], None]] = []  # (verb, kind, ns, obj)
        # watches: per kind the recent changes and the revision from which that history is complete
        self._history: dict[str, deque[WatchEvent]] = {}
        self._history_from: dict[str, int] = {}
        self.watch_floor = 0  # no watch may start before this revision (the watch cache's initial list)
        self._watchers: dict[str, set[Watcher]] = {}

    def _bucket(self, kind: str) -> dict[Key, Stored]:
        return self._kinds.setdefault(kind, {})

    def compact(self, recorded: bool = True) -> int:
        """Forget every revision up to now, as etcd's periodic compaction does; returns the compacted revision.

        `recorded`: as the API server's own compactor does it (staging/src/k8s.io/apiserver/pkg/storage/etcd3/
        compact.go Compact: the revision put under `compact_rev_key`, then etcd compacted), which its watch cache
        learns (compactor.go runWatchLoop; cacher/compactor.go polls it every 15 s, compactorPollPeriod, and drops
        the list snapshots before it): from then on a continue token from before is delegated to etcd and is a
        410. Here the cache has learned it at once. False: etcd compacted behind the API server's back (`etcdctl
        compact`): the cache never learns it and keeps serving continue tokens from its snapshots
        (cacher/cacher.go ShouldDelegateContinue, ListFromCacheSnapshot, on by default since 1.34), so nothing a
        client sees changes — checked on v1.36.2."""
        with self.lock:
            if not recorded:
                return self.resource_version
            self.compacted = self.resource_version + 1
            self.resource_version += 1  # the next list is at a revision after the compaction
            self.watch_floor = self.compacted
            return self.compacted

    def start_watch_history(self) -> None:
        """The watch window starts now: what was stored before (a cluster's initial objects, like etcd's content
        when the API server started and its watch cache listed it) is state, not history a watch can replay."""
        with self.lock:
            self._history.clear()
            self._history_from.clear()
            self.watch_floor = self.resource_version

    def watch(self, kind: str, since: int | None) -> tuple[Watcher, list[WatchEvent], int]:
        """Register a watcher of `kind`: (watcher, events to send first, revision they bring the watcher to).
        since None: the current objects as synthetic ADDED events (in key order); else every remembered change
        after `since` (ResourceExpired when the window no longer reaches back that far)."""
        with self.lock:
            watcher = Watcher(kind)
            if since is None:
                first = [WatchEvent(self.resource_version, "ADDED", k[0], e.obj, None, e)
                         for k, e in sorted(self._bucket(kind).items(), key=lambda kv: kv[0])]
            else:
                oldest = max(self.watch_floor, self._history_from.get(kind, 0))
                if since < oldest:
                    raise ResourceExpired(since, oldest)
                first = [ev for ev in self._history.get(kind, ()) if ev.rv > since]
            self._watchers.setdefault(kind, set()).add(watcher)
            return watcher, first, self.resource_version

    def stop_watch(self, watcher: Watcher) -> None:
        with self.lock:
            watcher.closed = True
            self._watchers.get(watcher.kind, set()).discard(watcher)
            watcher.ready.set()

    def close_watches(self) -> None:
        """End every watch (the server is stopping)."""
        with self.lock:
            for watchers in self._watchers.values():
                for w in watchers:
                    w.closed = True
                    w.ready.set()
            self._watchers.clear()

    def _record(self, kind: str, event: WatchEvent) -> None:
        history = self._history.get(kind)
        if history is None:
            history = self._history[kind] = deque()
        history.append(event)
        if len(history) > WATCH_HISTORY:
            self._history_from[kind] = history.popleft().rv
        for w in self._watchers.get(kind, ()):
            w.push(event)

    def _next_rv(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    # -- reads (return stored, immutable dicts; copy before changing) --
    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        entry = self._bucket(kind).get((namespace, name))
        return entry.obj if entry else None

    def get_entry(self, kind: str, namespace: str, name: str) -> Stored | None:
        return self._bucket(kind).get((namespace, name))

    def require(self, kind: str, namespace: str, name: str) -> dict:
        obj = self.get(kind, namespace, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def entries(self, kind: str, namespace: str | None = None) -> list[Stored]:
        with self.lock:
            bucket = self._bucket(kind)
            if namespace is None:
                return list(bucket.values())
            return [e for (ns, _), e in bucket.items() if ns == namespace]

    def objects(self, kind: str, namespace: str | None = None) -> list[dict]:
        return [e.obj for e in self.entries(kind, namespace)]

    def kinds(self) -> list[str]:
        return list(self._kinds)

    # -- writes --
    def create(self, kind: str, obj: dict, *, keep_metadata: bool = False) -> dict:
        """Store a new object (owned by the store from now on). keep_metadata: restore a saved object as is."""
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        with self.lock:
            bucket = self._bucket(kind)
            if key in bucket:
                raise already_exists(kind, key[1])
            if keep_metadata:
                self.resource_version = max(self.resource_version, int(meta.get("resourceVersion", "0") or 0))
            else:
                meta["uid"] = meta.get("uid") or str(uuid.uuid4())
                meta["creationTimestamp"] = now_iso()
                meta["resourceVersion"] = self._next_rv()
                meta.pop("deletionTimestamp", None)
            bucket[key] = entry = Stored(obj)
            self._notify("ADDED", kind, key[0], obj)
            self._record(kind, WatchEvent(self.resource_version, "ADDED", key[0], obj, None, entry))
            return obj

    def put(self, kind: str, obj: dict, *, expect_rv: str | None = None) -> dict:
        """Replace an existing object with `obj` (a fresh dict). expect_rv: optimistic-concurrency precondition."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        with self.lock:
            bucket = self._bucket(kind)
            old = bucket.get(key)
            if old is None:
                raise not_found(kind, key[1])
            if expect_rv and expect_rv != old.obj["metadata"].get("resourceVersion"):
                raise conflict(kind, key[1])
            meta["resourceVersion"] = self._next_rv()
            bucket[key] = entry = Stored(obj)
            self._notify("MODIFIED", kind, key[0], obj)
            self._record(kind, WatchEvent(self.resource_version, "MODIFIED", key[0], obj, old.obj, entry))
            return obj

    def mutate(self, kind: str, namespace: str, name: str, change: Callable[[dict], object]) -> dict:
        """Copy the stored object, apply `change` to the copy, store it. `change` returning False means no-op."""
        with self.lock:
            current = self.require(kind, namespace, name)
            copy = deep_copy(current)
            if change(copy) is False:
                return current
            return self.put(kind, copy)

    def remove(self, kind: str, namespace: str, name: str) -> dict:
        with self.lock:
            entry = self._bucket(kind).pop((namespace, name), None)
            if entry is None:
                raise not_found(kind, name)
            self.resource_version += 1
            self._notify("DELETED", kind, namespace, entry.obj)
            # a watch sees the deleted object at the deletion's revision (etcd3 watcher: the delete's revision)
            gone = dict(entry.obj, metadata=dict(entry.obj["metadata"], resourceVersion=str(self.resource_version)))
            self._record(kind, WatchEvent(self.resource_version, "DELETED", namespace, gone, entry.obj))
            return entry.obj

    def _notify(self, verb: str, kind: str, namespace: str, obj: dict | None) -> None:
        for fn in self.on_change:
            fn(verb, kind, namespace, obj)

    def dump(self) -> dict[str, list[dict]]:
        with self.lock:
            return {kind: [e.obj for e in bucket.values()] for kind, bucket in self._kinds.items()}

    def restore(self, objects: dict[str, Iterable[dict]]) -> None:
        with self.lock:
            for kind, items in objects.items():
                for obj in items:
                    self.create(kind, deep_copy(obj), keep_metadata=True)
