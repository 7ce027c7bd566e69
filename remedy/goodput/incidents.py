"""What goes wrong in the simulated fleet: a fault on a node, and the incident that follows it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from remedy.goodput.scenarios import UPSTREAM, FaultKind

# A rack-wide outage (PDU, leaf switch): every node NotReady until the upstream cause is fixed.
RACK_FAULT = FaultKind("rack", 0.0, (), "node-not-ready", ((UPSTREAM, 1.0),), not_ready=True)
# A node taken out on a false early warning: nothing is wrong with it.
WARNING_ONLY = FaultKind("warning", 0.0, (), "early-warning", ())


@dataclass
class Fault:
    kind: FaultKind
    xid: int | None
    needs: str  # lowest fix level that clears it, or UPSTREAM (clears at `clears_at` by itself)
    clears_at: float = math.inf
    gpu: int | None = None


@dataclass
class Incident:
    """One fault on one node, from detection to the job training again."""

    id: int
    node: int
    fault: Fault
    start: float
    slot: int | None
    rack: int
    resumed_at: float | None = None
    closed: bool = False
    automatic_retries: int = 0
    failed_retries: int = 0
    human_acted: bool = False
    chain_success: bool | None = None  # set when an automatic restart chain ends
    actions: list[str] = field(default_factory=list)
