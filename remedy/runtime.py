"""Process-wide access to configuration and adapters, built once from settings.

Prefect tasks receive plain parameters (node names, `dry_run`), not adapter objects, so the same task works in a
served deployment, a Kubernetes-launched flow run and a test. They reach the cluster and the ledger through here.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING

from remedy.config import RemedySettings, load_settings

if TYPE_CHECKING:
    from remedy.adapters.cluster import ClusterPort
    from remedy.ledger import Ledger

_lock = threading.Lock()
_ledger: Ledger | None = None  # this process's one ledger object (see ledger())


@lru_cache(maxsize=1)
def settings() -> RemedySettings:
    return load_settings()


@lru_cache(maxsize=2)
def cluster(dry_run: bool | None = None) -> ClusterPort:
    """The ClusterPort for this process; `dry_run` None means the configured default."""
    from remedy.adapters.kubernetes import KubernetesCluster

    return KubernetesCluster(settings(), dry_run=dry_run)


def ledger() -> Ledger:
    """The ledger of this process: one object, even when threads ask for it at once (a flow run and an approver,
    right after a reset). tasks.leases keeps one lease keeper per ledger object; with two objects a run's approval
    wait held and released its lease through a second keeper, whose release ended the lease the run still used
    (CI, 2026-11-29: the run's next fenced write was refused, "its lease has ended")."""
    global _ledger
    with _lock:
        if _ledger is None:
            from remedy.ledger import Ledger

            led = Ledger(settings().db_url)
            led.migrate()
            _ledger = led
        return _ledger


def reset() -> None:
    """Forget cached settings and adapters (tests and the demo change the environment between runs)."""
    global _ledger
    cluster.cache_clear()
    with _lock:
        _ledger = None
    settings.cache_clear()
