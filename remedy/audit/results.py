"""Typed results of the NFS audit's tasks (issue 29, item 2): what a task read or did, not a dict. No Prefect."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class NfsMetrics:
    """One Prometheus read: per node, export and op the latency split (slot wait vs network+server), and per
    node and export the transport load (remedy.audit.prometheus.PrometheusSource)."""

    ops: pd.DataFrame
    transports: pd.DataFrame


@dataclass(frozen=True)
class SlackNotice:
    """A notice posted (its message timestamp), or not, and why (`skip`)."""

    posted: bool
    ts: str | None = None
    skip: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As the run's result shows it: the fields that say something."""
        return {k: v for k, v in asdict(self).items() if v is not None}
