"""Typed results of the ledger's tasks (issue 29, item 2). Plain Python, no Prefect."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FleetSynced:
    """The cluster's GPU nodes made known to the ledger: how many it lists, and how many were seen for the first
    time and adopted into the lifecycle from their pool label."""

    nodes: int
    adopted: int
