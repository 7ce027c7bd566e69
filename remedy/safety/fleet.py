"""The node side of the gate's fleet view: summed once per change of the node list, not once per decision.

Of 12,500 nodes a decision needs only a summary: how many serve in each scope (rack, switch, PDU, cluster), which
spares are ready, which nodes are quarantined, which are out of service. Summing it walks every node (~100 ms of
Python at 12,500 nodes on a busy 2-core machine), yet between two decisions the nodes rarely change.

So a node list may carry a `version` (`FleetNodes`): the watch-fed node cache
(remedy.adapters.kubernetes.NodeCache) gives every state of its nodes a new number from `next_version` (one
counter for the process), so one number never names two different lists. `NodeSummaries.of` sums a versioned list once and hands
the same summary back while the version holds; a list with no version (listed from the API server, a test's
nodes) is summed every time. A stale summary is therefore impossible: the version moves with every watch event
and every write the cache applies.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from remedy.domain.model import Node, NodeState
from remedy.safety.scopes import ScopeSizes, scope_sizes

NOT_IN_SCOPE = (NodeState.SPARE, NodeState.BURN_IN, NodeState.RETIRED)  # neither serving nor being remediated
OUT_OF_SERVICE = (NodeState.REPAIR, NodeState.RETIRED)


@dataclass(frozen=True)
class FleetNodes:
    """The GPU nodes as the gate reads them; `version` names this exact list (None: unknown, sum it again)."""

    nodes: Sequence[Node]
    version: int | None = None


@dataclass(frozen=True)
class NodeSummary:
    """What a decision reads of the nodes. Scope sizes count every node that serves or is being remediated
    (repair included), so a storm that moves nodes to repair does not shrink the denominator of the percentage
    limits while it is going on."""

    nodes_in_scope: ScopeSizes
    ready_spares: tuple[str, ...] = ()  # spares the cluster reports Ready (the ledger then vets them)
    quarantined: frozenset[str] = frozenset()
    out_of_service: Mapping[str, str] = field(default_factory=dict)  # node → state (repair, retired)


def summarize(nodes: Iterable[Node]) -> NodeSummary:
    """One pass over the nodes, sorting each as the gate counts it."""
    serving: list[Node] = []
    spares: list[str] = []
    quarantined: set[str] = set()
    out: dict[str, str] = {}
    for n in nodes:
        state = n.state
        if state is NodeState.SPARE:
            if n.ready:
                spares.append(n.name)
        elif state is NodeState.QUARANTINED:
            quarantined.add(n.name)
        if state in OUT_OF_SERVICE:
            out[n.name] = state.value
        if state not in NOT_IN_SCOPE:
            serving.append(n)
    return NodeSummary(scope_sizes(serving), tuple(spares), frozenset(quarantined),
                       MappingProxyType(out))


class NodeSummaries:
    """The last versioned list's summary (one slot: the gate reads one fleet)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._summary: NodeSummary | None = None
        self.sums = 0  # how many times a list was summed (a test and the bench read it)

    def of(self, fleet: FleetNodes) -> NodeSummary:
        with self._lock:
            if fleet.version is not None and fleet.version == self._version and self._summary is not None:
                return self._summary
        summary = summarize(fleet.nodes)
        with self._lock:
            self.sums += 1
            if fleet.version is not None:
                self._version, self._summary = fleet.version, summary
        return summary


SUMMARIES = NodeSummaries()
_VERSIONS = itertools.count(1)


def next_version() -> int:
    """A number no other node list of this process has had or will have (the node cache takes one per change)."""
    return next(_VERSIONS)
