"""Conformance: `watch=true` answers as kube-apiserver's watch cache does, on the simulator and the real server.

The adapter's node cache (remedy.adapters.kubernetes.NodeCache) relies on each of these: a watch started at a list's
resourceVersion brings every later change, a watch too far back is a 410 it answers by listing again, bookmarks move
its resourceVersion on, a selector's edge turns into ADDED/DELETED, and the server ends a watch at timeoutSeconds.
Sources: Kubernetes v1.36.2, staging/src/k8s.io/apiserver/pkg/storage/cacher/{cacher.go,watch_cache.go,
cache_watcher.go}, staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/watch.go (WatchEvent) and
staging/src/k8s.io/apimachinery/pkg/watch/watch.go (the event types).

A watch is read whole after the server ends it (short timeoutSeconds), while the test writes from another thread:
the real lane's proxy hands the answer over only once it is complete."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.sim.conformance.wire import raw, strict

SMP = "application/strategic-merge-patch+json"


def _list_rv(sim, path: str = "/api/v1/nodes") -> str:
    code, _, body = raw(sim, "GET", path)
    assert code == 200
    return json.loads(body)["metadata"]["resourceVersion"]


def watch(sim, query: str, during=None, seconds: int = 3, path: str = "/api/v1/nodes"):
    """(status, headers, events, seconds the answer took) of `GET path?watch=true&query&timeoutSeconds=seconds`,
    with `during()` run once the watch has had a moment to start."""
    out: dict = {}

    def run() -> None:
        t = time.monotonic()
        out["code"], out["headers"], out["body"] = raw(sim, "GET", f"{path}?watch=true&timeoutSeconds={seconds}"
                                                       + (f"&{query}" if query else ""))
        out["took"] = time.monotonic() - t

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    if during is not None:
        during()
    thread.join(seconds + 8)
    assert not thread.is_alive(), "the server did not end the watch at timeoutSeconds"
    events = [json.loads(line) for line in out["body"].splitlines() if line.strip()]
    return out["code"], out["headers"], events, out["took"]


def _label(sim, node: str, key: str, value: str | None) -> str:
    code, _, body = raw(sim, "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: value}}}, SMP)
    assert code == 200, body
    return json.loads(body)["metadata"]["resourceVersion"]


def test_a_watch_from_a_lists_resource_version_brings_every_later_change(sim, api_client):
    """cacher.go Watch → watch_cache.go getAllEventsSinceLocked: the events after the given revision, in order;
    each a WatchEvent {type, object} (meta/v1 watch.go), one JSON object per line, the answer 200 application/json.
    Each MODIFIED carries the object as stored at that revision."""
    rv = _list_rv(sim)
    written: list[str] = []

    def during():
        written.append(_label(sim, "gpu003", "watch.test/step", "1"))
        written.append(_label(sim, "gpu003", "watch.test/step", "2"))

    code, headers, events, _ = watch(sim, f"resourceVersion={rv}", during)
    assert code == 200 and headers["content-type"].startswith("application/json")
    mine = [e for e in events if e["object"]["metadata"]["name"] == "gpu003"
            and "watch.test/step" in (e["object"]["metadata"].get("labels") or {})]
    assert [e["type"] for e in mine] == ["MODIFIED", "MODIFIED"]
    assert [e["object"]["metadata"]["labels"]["watch.test/step"] for e in mine] == ["1", "2"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in mine] == written
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(rv)
    for e in mine:
        strict(api_client, "V1Node", e["object"])


def test_a_watch_at_resource_version_0_starts_with_every_object_as_added(sim):
    """cacher.go Watch with resourceVersion "0" ("Start at Any"): the watch begins with a synthetic ADDED for every
    object that matches, then the changes. (Unset is the same after a consistent read; with the Debian etcd 3.4 of
    the real lane, which has no progress notifications, that read waits for a node event and otherwise ends in an
    ERROR 504 "Too large resource version" after 3 s, so the lane pins "0".)"""
    _, _, events, _ = watch(sim, "labelSelector=remedy.io%2Fpool%3Dspare&resourceVersion=0", seconds=1)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events[:2]) == [
        ("ADDED", "gpu008"), ("ADDED", "gpu016")]
    assert {e["object"]["metadata"]["name"] for e in events} == {"gpu008", "gpu016"}


@pytest.mark.simulator_only("a young real server's watch cache still reaches back to revision 1 (checked on v1.36.2: a "
                            "watch from 1 replays every node event); expiring a revision needs etcd compaction and a "
                            "full window, which the lane cannot force")
def test_a_resource_version_older_than_the_window_is_an_expired_error_event(sim, api_client):
    """cacher.go Watch: once the request is admitted, an error is a watch event of type ERROR rather than the
    answer's status (newErrWatcher), so the answer is 200 with one ERROR event whose object is a Status 410 Expired
    worded by watch_cache.go getAllEventsSinceLocked: "too old resource version: X (Y)". client-go's reflector
    lists again on it (reflector.go isExpiredError); so does the adapter's node cache."""
    code, _, events, took = watch(sim, "resourceVersion=1", seconds=5)
    assert code == 200 and [e["type"] for e in events] == ["ERROR"]
    status = strict(api_client, "V1Status", events[0]["object"])
    assert (status.status, status.code, status.reason) == ("Failure", 410, "Expired")
    assert status.message.startswith("too old resource version: 1 (")
    assert took < 4, "the expired watch ends at once, not at its timeout"


def test_bookmarks_carry_only_the_kind_and_the_resource_version(sim):
    """allowWatchBookmarks=true: BOOKMARK events (staging/src/k8s.io/apimachinery/pkg/watch/watch.go) whose object is
    the kind's empty object (cacher.go: c.newFunc(), encoded with Go's zero values) with only
    metadata.resourceVersion, the revision the watcher has seen everything up to; the watch cache sends one every
    minute and one 2 s before the watch's deadline (cache_watcher.go nextBookmarkTime), so a 4-second watch that
    saw a change gets one after about 2 s."""
    rv = _list_rv(sim)
    written: list[str] = []
    # a second watch from the same revision without allowWatchBookmarks sees the same change over the same 4 s, side
    # by side with the first (one 4 s wait for both, not 4 + 3 s one after the other)
    unasked: dict = {}
    plain = threading.Thread(target=lambda: unasked.update(events=watch(sim, f"resourceVersion={rv}", seconds=4)[2]))
    plain.start()
    code, _, events, _ = watch(sim, f"resourceVersion={rv}&allowWatchBookmarks=true",
                               lambda: written.append(_label(sim, "gpu004", "watch.test/bookmark", "yes")), seconds=4)
    plain.join(15)
    marks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
    assert code == 200 and marks, [e["type"] for e in events]
    version = marks[-1]["metadata"].pop("resourceVersion")
    assert int(version) >= int(written[0])
    assert marks[-1] == {"kind": "Node", "apiVersion": "v1", "metadata": {}, "spec": {}, "status": {
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
            "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "",
            "architecture": ""}}}
    # it saw the change (so a bookmark would have been due) and still got none
    assert not plain.is_alive() and "gpu004" in {e["object"]["metadata"]["name"] for e in unasked["events"]}
    assert "BOOKMARK" not in {e["type"] for e in unasked["events"]}, "no bookmarks unless asked for"


def test_a_label_selector_turns_joining_into_added_and_leaving_into_deleted(sim):
    """cache_watcher.go convertToWatchEvent: an object that starts to match the watch's selector arrives as ADDED,
    one that changes and still matches as MODIFIED, one that stops matching as DELETED carrying its previous
    content (the last the watcher matched) at the event's resourceVersion."""
    rv = _list_rv(sim)

    def during():
        _label(sim, "gpu005", "watch.test/set", "in")
        _label(sim, "gpu005", "watch.test/other", "x")
        _label(sim, "gpu005", "watch.test/set", "out")

    _, _, events, _ = watch(sim, f"resourceVersion={rv}&labelSelector=watch.test%2Fset%3Din", during)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "gpu005"), ("MODIFIED", "gpu005"), ("DELETED", "gpu005")]
    gone = events[-1]["object"]["metadata"]
    assert gone["labels"]["watch.test/set"] == "in" and gone["labels"]["watch.test/other"] == "x"
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(set(versions))


def test_a_deleted_object_arrives_with_its_last_state(sim, api_client):
    """A DELETED event carries the object as it was when deleted (etcd3/watcher.go: the previous value of the key);
    its resourceVersion is newer than any the object had while it existed."""
    path = "/api/v1/namespaces/default/configmaps"
    code, _, body = raw(sim, "POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "watch-probe"}, "data": {"k": "v"}})
    assert code == 201, body
    created = json.loads(body)["metadata"]["resourceVersion"]

    def during():
        assert raw(sim, "DELETE", f"{path}/watch-probe")[0] == 200

    _, _, events, _ = watch(sim, f"resourceVersion={created}", during, path=path)
    gone = [e for e in events if e["object"]["metadata"]["name"] == "watch-probe"]
    assert [e["type"] for e in gone] == ["DELETED"]
    cm = strict(api_client, "V1ConfigMap", gone[0]["object"])
    assert cm.data == {"k": "v"} and int(cm.metadata.resource_version) > int(created)


def test_the_server_ends_a_watch_at_timeout_seconds(sim):
    """timeoutSeconds bounds the watch: the server closes the stream then (staging/src/k8s.io/apiserver/pkg/
    endpoints/handlers/get.go ListResource: the watch's timeout is the request's timeoutSeconds)."""
    _, _, _, took = watch(sim, f"resourceVersion={_list_rv(sim)}", seconds=2)
    assert 1.5 <= took < 6
