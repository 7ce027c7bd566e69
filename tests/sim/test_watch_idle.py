"""A watch with bookmarks on a cluster where nothing changes waits, it does not poll: once its bookmark was due with
the revision standing still, the simulator's watch loop used to look again on every pass until the watch's
timeout (a core per idle watch: `remedy up`'s node cache holds one for its whole session). It looks again about
once a second instead, and still sends the bookmark once the revision moves."""

from __future__ import annotations

import json
import threading
import time

import httpx

import remedy.sim.watch as watch_module
from remedy.sim.cluster import build_cluster
from remedy.sim.server import SimServer
from remedy.sim.store import Watcher


def test_an_idle_watch_past_its_bookmark_time_waits_and_bookmarks_once_the_revision_moves(monkeypatch):
    monkeypatch.setattr(watch_module, "BOOKMARK_SECONDS", 0.5)  # the minute of the watch cache, shortened
    # passes per watcher: watches other tests in this process left open (until their own timeout) drain too
    drains: dict[int, int] = {}
    real_drain = Watcher.drain

    def counted(self, timeout):
        drains[id(self)] = drains.get(id(self), 0) + 1
        return real_drain(self, timeout)

    monkeypatch.setattr(Watcher, "drain", counted)
    with SimServer(build_cluster(nodes=8, spares=1)) as sim:
        rv = httpx.get(f"{sim.url}/api/v1/nodes", timeout=10).json()["metadata"]["resourceVersion"]
        body: list[bytes] = []

        def run() -> None:
            with httpx.stream("GET", f"{sim.url}/api/v1/nodes?watch=true&allowWatchBookmarks=true"
                              f"&resourceVersion={rv}&timeoutSeconds=5", timeout=30) as r:
                body.extend(r.iter_bytes())

        reader = threading.Thread(target=run)
        reader.start()
        time.sleep(2.5)  # two bookmark times passed with nothing changed
        idle = max(drains.values(), default=0)  # the busiest watcher: this test's, if it spins
        r = httpx.patch(f"{sim.url}/api/v1/nodes/gpu001", json={"metadata": {"labels": {"idle.test/moved": "yes"}}},
                        headers={"content-type": "application/strategic-merge-patch+json"}, timeout=10)
        assert r.status_code == 200, r.text
        reader.join(15)
    assert not reader.is_alive()
    assert idle < 20, f"{idle} passes in 2.5 s of an idle watch: it polls instead of waiting"
    events = [json.loads(line) for line in b"".join(body).splitlines() if line.strip()]
    types = [e["type"] for e in events]
    assert "MODIFIED" in types and "BOOKMARK" in types[types.index("MODIFIED"):], types
