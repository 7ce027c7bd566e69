"""The simulated training job's side of the checkpoint handshake (remedy.domain.checkpoints).

A training Job that carries `remedy.io/sim-checkpoint-seconds` checkpoints every that many simulated seconds while
its gang is at full size, and publishes what a real job's launcher would: `remedy.io/last-checkpoint` (wall-clock
RFC 3339) and `remedy.io/checkpoint-interval-seconds` (its cadence as a wall clock sees it: simulated seconds ×
time_scale). A `remedy.io/checkpoint-requested` newer than the last checkpoint is answered after
`remedy.io/sim-checkpoint-cost-seconds` (default 60) simulated seconds, also only at full size. This is gpu-remedy's
own convention, not a Kubernetes API: what the simulator pins is that annotations on a Job round-trip through a
merge patch (metadata.annotations is a plain map; apimachinery's ObjectMeta).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from remedy.domain.checkpoints import INTERVAL, LAST, REQUESTED, Checkpoints

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

CADENCE = "remedy.io/sim-checkpoint-seconds"
COST = "remedy.io/sim-checkpoint-cost-seconds"
DEFAULT_COST_SECONDS = 60.0


def _float(value: object, default: float = 0.0) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def sync_checkpoints(cluster: Cluster, job: dict) -> None:
    """Start the job's cadence once; answer a pending request once. Called on every reconcile (cheap)."""
    ann = job["metadata"].get("annotations") or {}
    cadence = _float(ann.get(CADENCE))
    if cadence <= 0:
        return
    ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]
    if uid not in cluster.checkpoint_cadence:
        cluster.checkpoint_cadence.add(uid)
        _tick(cluster, ns, name, uid, cadence)
    seen = Checkpoints.from_annotations(ann)
    if seen.requested and not seen.since(seen.requested) and uid not in cluster.checkpoint_asked:
        cluster.checkpoint_asked.add(uid)
        cost = _float(ann.get(COST), DEFAULT_COST_SECONDS)
        cluster.call_later(cost, lambda: _answer(cluster, ns, name, uid))


def _tick(cluster: Cluster, ns: str, name: str, uid: str, cadence: float) -> None:
    def fire() -> None:
        job = cluster.store.get("Job", ns, name)
        if job is None or job["metadata"]["uid"] != uid:
            cluster.checkpoint_cadence.discard(uid)
            return
        _checkpoint(cluster, job, cadence)
        _tick(cluster, ns, name, uid, cadence)

    cluster.call_later(cadence, fire)


def _answer(cluster: Cluster, ns: str, name: str, uid: str) -> None:
    cluster.checkpoint_asked.discard(uid)
    job = cluster.store.get("Job", ns, name)
    if job is None or job["metadata"]["uid"] != uid:
        return
    _checkpoint(cluster, job, _float((job["metadata"].get("annotations") or {}).get(CADENCE)))


def _full(job: dict) -> bool:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    return not spec.get("suspend") and int(status.get("ready") or 0) >= int(spec.get("parallelism") or 0) > 0


def _checkpoint(cluster: Cluster, job: dict, cadence: float) -> None:
    """A checkpoint completes now, if the whole gang is there to write it (a short gang is restarting)."""
    if not _full(job):
        return
    stamp = datetime.now(UTC).isoformat()
    wall = cluster.scaled(cadence)

    def write(j: dict) -> None:
        a = j["metadata"].setdefault("annotations", {})
        a[LAST] = stamp
        a[INTERVAL] = f"{wall:g}"

    cluster.store.mutate("Job", job["metadata"]["namespace"], job["metadata"]["name"], write)


__all__ = ["CADENCE", "COST", "REQUESTED", "sync_checkpoints"]
