"""`watch=true` on a collection, as kube-apiserver serves it from its watch cache
(staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go, watch_cache.go, cache_watcher.go; the wire format is
staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/watch.go WatchEvent, one JSON object per line, chunked).

- `resourceVersion` unset or "0": first a synthetic ADDED for every object there is (in key order), then changes.
  A revision: every change after it; one older than the remembered window is a 200 stream carrying a single
  ERROR event whose object is Status{410, Expired, "too old resource version: X (Y)"} (cacher.go: once the request
  is admitted, errors travel as a watch event; watch_cache.go getAllEventsSinceLocked words the message).
- Label and field selectors filter as cache_watcher.go convertToWatchEvent does: an object that starts to match
  arrives as ADDED, one that keeps matching as MODIFIED, one that stops matching as DELETED carrying its previous
  content at the event's resourceVersion (checked on v1.36.2).
- `allowWatchBookmarks=true`: BOOKMARK events whose object is the kind's empty object (Go's zero value as
  encoded: for a Node an empty spec and a status of empty strings and port 0, checked on v1.36.2) with only
  metadata.resourceVersion set: the revision the watcher has seen everything up to. Sent every minute and about
  two seconds before the watch's deadline (cache_watcher.go nextBookmarkTime, defaultBookmarkFrequency =
  time.Minute), and only once the revision has moved past the watch's start (checked on v1.36.2: a quiet watch
  gets none; one that saw a change gets one at that change's revision).
- `timeoutSeconds`: the server ends the stream then (unset: 30 to 60 minutes, as minRequestTimeout 1800 s).

Not modelled: `sendInitialEvents` (streaming lists), watches at a revision newer than the server's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

from remedy.sim.selectors import parse_field_selector, parse_label_selector
from remedy.sim.store import ApiError, ResourceExpired, Watcher, WatchEvent, bad_request, dumps

BOOKMARK_SECONDS = 60.0  # cacher.go defaultBookmarkFrequency
PRE_TIMEOUT_BOOKMARK = 2.0  # cache_watcher.go: a bookmark 2 s before the deadline
BOOKMARK_RECHECK_SECONDS = 1.0  # a bookmark due while the revision stood still: sent within this once it moves
MIN_REQUEST_TIMEOUT = 1800  # kube-apiserver --min-request-timeout: unset timeoutSeconds is 1-2x this


def watch(cluster, res, ns: str | None, name: str | None, query: dict):
    from remedy.sim.api import Reply

    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), res.kind)
    text = query.get("resourceVersion") or ""
    since: int | None = None
    if text not in ("", "0"):
        try:
            since = int(text)
        except ValueError:
            raise bad_request(f'resourceVersion: Invalid value: "{text}": must be a non-negative integer') from None
    try:
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else \
            MIN_REQUEST_TIMEOUT * (1 + random.random())
    except ValueError:
        raise bad_request(f"timeoutSeconds must be an integer, got {query.get('timeoutSeconds')!r}") from None
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")

    def visible(obj: dict | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if ns is not None and meta.get("namespace", "") != ns:
            return False
        if name is not None and meta["name"] != name:
            return False
        return labels(meta.get("labels") or {}) and fields(obj)

    try:
        watcher, first, at = cluster.store.watch(res.kind, since)
    except ResourceExpired as exc:
        gone = ApiError(410, "Expired", str(exc)).status()
        return Reply(200, iter([_line("ERROR", dumps(gone))]))
    return Reply(200, _stream(cluster.store, res, watcher, first, visible, timeout, bookmarks,
                              at if since is None else since))


# Go's zero value of a kind as the API server encodes it in a BOOKMARK (fields without omitempty stay); kinds not
# listed have only their metadata there.
_ZERO = {
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {
        "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
        "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "",
        "architecture": ""}}},
    "Pod": {"spec": {"containers": None}, "status": {}},
}


def bookmark(res, rv: int) -> bytes:
    obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": str(rv)},
           **_ZERO.get(res.kind, {})}
    return _line("BOOKMARK", dumps(obj))


def _line(type_: str, raw: bytes) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + raw + b"}\n"


def _encode(events: list[WatchEvent], visible: Callable[[dict | None], bool]) -> bytes:
    out = []
    for ev in events:
        now = visible(ev.obj) if ev.type != "DELETED" else False
        before = visible(ev.prev)
        if ev.type == "ADDED":
            kind = "ADDED" if now else None
        elif ev.type == "MODIFIED":
            kind = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else None
        else:
            kind = "DELETED" if before else None
        if kind == "DELETED" and ev.type == "MODIFIED":  # left the selector: its previous content, at this revision
            prev = ev.prev or {}
            out.append(_line(kind, dumps(dict(prev, metadata=dict(prev.get("metadata") or {},
                                                                  resourceVersion=str(ev.rv))))))
        elif kind:
            out.append(_line(kind, ev.raw()))
    return b"".join(out)


def _stream(store, res, watcher: Watcher, first: list[WatchEvent], visible, timeout: float,
            bookmarks: bool, start_rv: int) -> Iterator[bytes]:
    start = time.monotonic()
    deadline = start + timeout
    seen = start_rv  # a bookmark is sent when the revision moved past the watch's start (or the last bookmark)
    next_bookmark = min(start + BOOKMARK_SECONDS, deadline - PRE_TIMEOUT_BOOKMARK) if bookmarks else float("inf")
    try:
        yield _encode(first, visible)
        while not watcher.closed:
            now = time.monotonic()
            if now >= deadline:
                return
            events = watcher.drain(max(0.0, min(deadline, next_bookmark, now + 0.5) - now))
            if events:
                yield _encode(events, visible)
            if time.monotonic() >= next_bookmark:
                with store.lock:  # with nothing queued, this watcher has seen every change up to now
                    rv = None if watcher.queue else store.resource_version
                if rv is not None and rv > seen:
                    seen = rv
                    yield bookmark(res, rv)
                    t, pre = time.monotonic(), deadline - PRE_TIMEOUT_BOOKMARK
                    next_bookmark = min(t + BOOKMARK_SECONDS, pre) if pre > t else float("inf")
                else:  # due, but nothing new to mark: look again shortly (looking on every pass spun a core per
                    # idle watch, from its first minute to its timeout)
                    next_bookmark = time.monotonic() + BOOKMARK_RECHECK_SECONDS
    finally:
        store.stop_watch(watcher)
