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


@lru_cache(maxsize=1)
def settings() -> RemedySettings:
    return load_settings()


@lru_cache(maxsize=2)
def cluster(dry_run: bool | None = None) -> ClusterPort:
    """The ClusterPort for this process; `dry_run` None means the configured default."""
    from remedy.adapters.kubernetes import KubernetesCluster

    return KubernetesCluster(settings(), dry_run=dry_run)


@lru_cache(maxsize=1)
def ledger() -> Ledger:
    from remedy.ledger import Ledger

    with _lock:
        led = Ledger(settings().db_url)
        led.migrate()
    return led


def reset() -> None:
    """Forget cached settings and adapters (tests and the demo change the environment between runs)."""
    cluster.cache_clear()
    ledger.cache_clear()
    settings.cache_clear()
