"""What the gate sees of the fleet (`procedure.fleet_view`, `FleetView.from_nodes`): scope sizes count nodes that
serve or are being remediated (repair included), never spares, burn-in or retired ones; quarantined nodes not yet
on the board are in remediation; repair and retired are out of service. Sorted in one pass (a decision reads
12,500 nodes), with topologies shared between nodes as the watch-fed cache hands them out, or not."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from remedy.config import load_settings
from remedy.domain.model import Node, NodeState, Topology
from remedy.ledger import Ledger
from remedy.safety import procedure
from remedy.safety.board import BreakerBoard
from remedy.safety.scopes import FleetView, scopes_of

STATES = [None, *NodeState]


def _fleet(n: int, shared: bool, seed: int = 7) -> list[Node]:
    rng = random.Random(seed)
    topologies = {}
    nodes = []
    for i in range(n):
        key = (f"rack-{rng.randrange(12)}", f"sw-{rng.randrange(5)}", rng.choice(["", "pdu-1", "pdu-2"]))
        topo = topologies.setdefault(key, Topology(*("z", *key))) if shared else Topology(*("z", *key))
        nodes.append(Node(f"node-{i}", topology=topo, state=rng.choice(STATES), ready=rng.random() > 0.2))
    return nodes


def _naive_counts(nodes) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in nodes:
        for key in scopes_of(node.topology):
            counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("shared", [True, False])
def test_scope_sizes_are_the_per_node_count(shared):
    nodes = _fleet(600, shared)
    assert dict(FleetView.from_nodes(nodes).nodes_in_scope) == _naive_counts(nodes)


def test_a_node_listed_twice_is_refused():
    nodes = _fleet(5, True)
    with pytest.raises(ValueError, match="node-3 listed twice"):
        FleetView.from_nodes([*nodes, nodes[3]])


class Ports:
    def __init__(self, led, nodes) -> None:
        self.settings, self.ledger, self._nodes = load_settings(), led, nodes

    def gpu_nodes(self):
        return self._nodes


def test_fleet_view_sorts_every_state_as_the_gate_counts_it(tmp_path):
    nodes = _fleet(400, True)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        led.migrate()
        led.upsert_nodes(nodes)
        spares = [n for n in nodes if n.state is NodeState.SPARE]
        for n in spares[::2]:  # half the spares passed a check just now: ready spares if the node is ready
            led.transition(n.name, NodeState.SPARE, reason="test", requested_by="test")
            led.record_validation(n.name, level="quick", passed=True, summary={}, requested_by="test")
        s = load_settings()
        board = BreakerBoard.rebuild([], [], (), s.breaker, s.budget)
        view = procedure.fleet_view(Ports(led, nodes), board, datetime.now(UTC))

    serving = [n for n in nodes if n.state not in (NodeState.SPARE, NodeState.BURN_IN, NodeState.RETIRED)]
    assert dict(view.nodes_in_scope) == _naive_counts(serving)
    assert view.in_remediation == {n.name for n in nodes if n.state is NodeState.QUARANTINED}
    assert view.out_of_service == {n.name: n.state.value for n in nodes
                                   if n.state in (NodeState.REPAIR, NodeState.RETIRED)}
    assert view.ready_spares == sum(1 for n in spares[::2] if n.ready) > 0
    assert set(STATES) <= {n.state for n in nodes}  # the sample has every state, unmanaged included
