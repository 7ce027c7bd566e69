"""GET pods/<name>/log: the lines a pod has produced so far, `tailLines`, `container`, and `follow=true`
streaming lines as the pod produces them (chunked) until it finishes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from remedy.sim.controller import finished
from remedy.sim.store import bad_request

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster


def pod_log(cluster: Cluster, ns: str, name: str, query: dict) -> tuple[bytes | Iterator[bytes], bool]:
    """(body, streaming) for the log request."""
    pod = cluster.store.require("Pod", ns, name)
    containers = [c.get("name") for c in pod.get("spec", {}).get("containers") or []]
    container = query.get("container")
    if container and container not in containers:
        raise bad_request(f"container {container} is not valid for pod {name}")
    if not container and len(containers) > 1:
        raise bad_request(f"a container name must be specified for pod {name}, choose one of: "
                          f"[{' '.join(containers)}]")
    if not pod.get("spec", {}).get("nodeName"):
        raise bad_request(f'container "{container or containers[0]}" in pod "{name}" is waiting to start: '
                          "ContainerCreating")
    tail = query.get("tailLines")
    try:
        tail_n = int(tail) if tail not in (None, "") else None
    except ValueError:
        raise bad_request(f"tailLines must be an integer, got {tail!r}") from None
    visible = cluster.visible_log(ns, name)
    lines = visible if tail_n is None else (visible[-tail_n:] if tail_n > 0 else [])
    if query.get("follow") not in ("true", "1", "True"):
        return "".join(line + "\n" for line in lines).encode(), False
    return _follow(cluster, ns, name, pod["metadata"]["uid"], lines, len(visible)), True


def _follow(cluster: Cluster, ns: str, name: str, uid: str, first: list[str], sent: int) -> Iterator[bytes]:
    """Stream lines as the pod produces them; end when the pod has finished (or is gone)."""
    if first:
        yield "".join(line + "\n" for line in first).encode()
    while True:
        pod = cluster.store.get("Pod", ns, name)
        gone = pod is None or pod["metadata"].get("uid") != uid
        lines = cluster.visible_log(ns, name)
        if len(lines) > sent:
            yield "".join(line + "\n" for line in lines[sent:]).encode()
            sent = len(lines)
        if gone:
            return
        all_lines = len(cluster.logs.get((ns, name), []))
        if finished(pod) and sent >= all_lines:
            return
        time.sleep(0.02)
