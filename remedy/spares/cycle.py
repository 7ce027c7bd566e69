"""The spare-cycle flow's decisions, Prefect-free: which spares are in the pool, when a failure domain's results stop
the cycle, and the pool's health (ready spares against the Poisson target, diversity warnings).

Fleet rows are what tasks.burn_in.survey_pool returns: name, state, ready, gpu_model, rack, switch, pdu,
validated_at. The flow (flows/spare_cycle.py) runs the steps and calls these.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from remedy.domain.model import Node, NodeState, Topology
from remedy.settings.safety import SpareSettings
from remedy.spares.pool import check_diversity, size_pool

DOMAINS = ("rack", "switch", "pdu")

FleetRow = Mapping[str, Any]


def check_domain(domain: object) -> str:
    """The failure domain the cycle goes through one at a time, or a one-line ValueError."""
    if domain not in DOMAINS:
        raise ValueError(f"spare_cycle: domain must be rack, switch or pdu, got {domain!r}")
    return str(domain)


def spares(fleet: Sequence[FleetRow], *, ready_only: bool = True) -> list[FleetRow]:
    """Nodes in state spare (and Ready, unless ready_only is False)."""
    return [n for n in fleet if n["state"] == NodeState.SPARE.value and (n["ready"] or not ready_only)]


def stop_after_domain(domain: str, name: str, held: int, failed: Sequence[str]) -> str | None:
    """Every spare of a domain (two or more) failing smells of a bad check image or a shared cause (power, switch),
    not of several bad nodes: stop, and let a person look before more spares leave the pool."""
    if held >= 2 and len(failed) == held:
        return (f"every spare in {domain} {name} failed ({', '.join(failed)}): suspect the check or a shared cause "
                "before cycling more spares")
    return None


def pool_health(fleet: Sequence[FleetRow], stale: Collection[str], settings: SpareSettings) -> dict[str, Any]:
    """Ready spares (spare, Ready, not in `stale`) against the Poisson target; diversity warnings. The failures that
    consume spares come from the nodes carrying work, so the fleet size is the active nodes."""
    fresh_names = {n["name"] for n in spares(fleet)} - set(stale)
    ready = [n for n in fleet if n["name"] in fresh_names]
    active = sum(1 for n in fleet if n["state"] == NodeState.ACTIVE.value)
    sizing = size_pool(active, len(ready), settings)
    nodes = [Node(name=n["name"], gpu_model=n["gpu_model"], state=NodeState.SPARE,
                  topology=Topology(rack=n["rack"], switch=n["switch"], pdu=n["pdu"])) for n in ready]
    warnings = check_diversity(nodes, settings)
    return {
        "ready_spares": sorted(fresh_names),
        "sizing": {"active_nodes": active, "ready": sizing.ready, "target": sizing.target,
                   "shortfall": sizing.shortfall, "lam": round(sizing.lam, 6), "risk": sizing.risk,
                   "risk_at_ready": sizing.risk_at_ready, "fleet_mtbf_hours": sizing.fleet_mtbf_hours,
                   "lead_time_hours": sizing.lead_time_hours, "explain": sizing.explain()},
        "diversity": [{"domain": w.domain, "name": w.name, "count": w.count, "total": w.total, "message": w.message}
                      for w in warnings],
    }


def below_target(health: Mapping[str, Any]) -> bool:
    return bool(health["sizing"]["shortfall"] > 0)
