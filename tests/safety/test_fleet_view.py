"""What the gate sees of the fleet (`procedure.fleet_view`, `FleetView.from_nodes`): scope sizes count nodes that
serve or are being remediated (repair included), never spares, burn-in or retired ones; quarantined nodes not yet
on the board are in remediation; repair and retired are out of service. Sorted in one pass (a decision reads
12,500 nodes), with topologies shared between nodes as the watch-fed cache hands them out, or not."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from remedy.config import load_settings
from remedy.domain.model import Incident, Node, NodeState, Topology
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


# -- the node summary is kept per version of the nodes; the ledger's side is read fresh every decision ------------

def test_summary_is_the_per_node_sort_and_a_version_sums_once():
    from remedy.safety.fleet import FleetNodes, NodeSummaries, summarize

    nodes = _fleet(500, True)
    got = summarize(nodes)
    serving = [n for n in nodes if n.state not in (NodeState.SPARE, NodeState.BURN_IN, NodeState.RETIRED)]
    assert dict(got.nodes_in_scope) == _naive_counts(serving)
    assert set(got.ready_spares) == {n.name for n in nodes if n.state is NodeState.SPARE and n.ready}
    assert got.quarantined == {n.name for n in nodes if n.state is NodeState.QUARANTINED}
    summaries = NodeSummaries()
    first = summaries.of(FleetNodes(nodes, 7))
    assert summaries.of(FleetNodes(nodes, 7)) is first and summaries.sums == 1
    changed = [*nodes[:-1], Node(nodes[-1].name, topology=nodes[-1].topology, state=NodeState.REPAIR)]
    assert summaries.of(FleetNodes(changed, 8)).out_of_service[nodes[-1].name] == "repair"
    assert summaries.of(FleetNodes(changed)) is not summaries.of(FleetNodes(changed))  # no version: summed each time
    assert summaries.sums == 4


class VersionedPorts:
    """The gate's ports with a node list that never changes (one version: its summary is kept) over a ledger."""

    def __init__(self, led, fleet) -> None:
        self.settings, self.ledger, self._fleet = load_settings(), led, fleet

    def gpu_nodes(self):
        return self._fleet

    def lock(self):
        import contextlib

        return contextlib.nullcontext()

    def fence(self, incident_id):
        return None

    def requester(self) -> str:
        return "test"

    def announce(self, transition) -> None:
        pass


def _spare_fleet(tmp_path, n_spares: int):
    from remedy.safety.fleet import FleetNodes, next_version

    nodes = [Node(f"gpu-{i}", topology=Topology("z", f"rack-{i}", f"sw-{i}"), state=NodeState.ACTIVE)
             for i in range(40)]
    nodes += [Node(f"spare-{i}", topology=Topology("z", "rack-s", "sw-s"), state=NodeState.SPARE)
              for i in range(n_spares)]
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger(url)
    led.migrate()
    led.upsert_nodes(nodes)
    for i in range(n_spares):
        led.transition(f"spare-{i}", NodeState.SPARE, reason="test", requested_by="test")
        led.record_validation(f"spare-{i}", level="quick", passed=True, summary={}, requested_by="test")
    return url, led, FleetNodes(nodes, next_version())  # a number no other list of this process has


def test_ledger_writes_by_another_instance_reach_the_next_view_while_the_nodes_summary_is_kept(tmp_path):
    """A lemon flagged, a spare promoted and a remediation started by another process (another Ledger on the same
    database) all show in the very next fleet view, though the nodes were summed once for every view."""
    from remedy.domain.model import Action, ActionOutcome
    from remedy.safety.fleet import SUMMARIES
    from remedy.spares.lemons import record_review

    url, led, fleet = _spare_fleet(tmp_path, 3)
    ports, s = VersionedPorts(led, fleet), load_settings()
    board = lambda: procedure.load_board(ports)  # noqa: E731
    first = procedure.fleet_view(ports, board())
    sums = SUMMARIES.sums
    assert first.ready_spares == 3 and first.spare_claims == frozenset()
    with Ledger(url) as other:
        record_review(other, {"spare-0": {"score": 9.0}}, reviewed_at=datetime.now(UTC), requested_by="lemons")
        assert procedure.fleet_view(ports, board()).ready_spares == 2  # the lemon is no spare any more
        check = procedure.decide_once(_DecidingPorts(other, fleet), procedure.GateRequest(
            node="gpu-3", incident_id=None, signal="xid", detected_at=datetime.now(UTC), dry_run=False))
        assert check.act
        rec, _ = other.start_action(Action(kind="set_state_active", node="spare-1", requested_by="test",
                                           detail={"replaces": "gpu-3"}))
        other.finish_action(rec.id, ActionOutcome.SUCCEEDED)
    view = procedure.fleet_view(ports, board())
    assert "gpu-3" in board().active and view.spare_claims == {"gpu-3"}
    assert SUMMARIES.sums == sums  # every view above reused the one summary of the nodes
    del s


class _DecidingPorts(VersionedPorts):
    def log(self, message: str) -> None:
        pass


def test_a_decision_written_by_another_process_holds_the_next_one_here(tmp_path):
    """The failure another process let through (written through another Ledger) counts in this process's next
    decision: the third failure in ten minutes trips the cluster's breaker (limit 2 at 40 nodes), though this
    process's node summary was kept from before that decision."""
    url, led, fleet = _spare_fleet(tmp_path, 30)
    ports = _DecidingPorts(led, fleet)

    def decide(p, node: str):
        incident, _ = p.ledger.open_incident(Incident(node, "xid", gpu=0, xid=79), window_seconds=600)
        return procedure.decide_once(p, procedure.GateRequest(node=node, incident_id=incident.id, signal="xid",
                                                              detected_at=datetime.now(UTC), dry_run=False,
                                                              needs_spare=False))

    assert decide(ports, "gpu-0").act
    with Ledger(url) as other:
        assert decide(_DecidingPorts(other, fleet), "gpu-1").act
    held = decide(ports, "gpu-2")
    assert not held.act and held.scope == "cluster:cluster", held.explain
    assert decide(_DecidingPorts(Ledger(url), fleet), "gpu-3").scope == "cluster:cluster"  # and open for everyone
