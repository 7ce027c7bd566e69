"""Consistency checks the simulator can run after every event (tests switch them on)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remedy.domain.model import NodeState

if TYPE_CHECKING:
    from remedy.goodput.sim import FleetSim


def check_fleet(sim: FleetSim) -> None:
    """No node in two places, the pool holds only spares, slots hold only active nodes, the job never
    trains short of more nodes than an elastic job may, and the SPARE count equals the pool plus spares handed out."""
    in_slots = [n for n in sim.slots if n is not None]
    if len(set(in_slots)) != len(in_slots):
        raise AssertionError("a node sits in two job slots")
    pool = list(sim.spare_pool)
    if len(set(pool)) != len(pool) or set(pool) & set(in_slots):
        raise AssertionError("a node is both a spare and in the job (or twice in the pool)")
    for n in in_slots:
        if sim.state[n] is not NodeState.ACTIVE:
            raise AssertionError(f"node {n} is in a slot but {sim.state[n].value}")
    for n in pool:
        if sim.state[n] is not NodeState.SPARE:
            raise AssertionError(f"node {n} is in the spare pool but {sim.state[n].value}")
    if sum(1 for s in sim.state if s is NodeState.SPARE) != len(pool) + len(sim.spares_granted) + len(sim.hot):
        raise AssertionError("spare count disagrees with the pool")
    if sim.phase == "running" and (sim.holds or sum(s is None for s in sim.slots) > sim.sc.elastic_short_nodes):
        raise AssertionError("the job trains without all its nodes")
    if sim.phase == "running" and abs(sim.run_size - sum(s is not None for s in sim.slots) / len(sim.slots)) > 1e-9 \
            and sim.run_size == 1.0:
        raise AssertionError("a node left a job counted as training at full size")
