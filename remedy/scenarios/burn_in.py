"""Burn-in scenario: three new nodes arrive, one with a pending row remap. Two prove themselves and join the warm
spare pool; the bad one goes to repair. Then a spare cycle reports the pool's health (target size, diversity)."""

from __future__ import annotations

from typing import Any

from remedy.scenarios import DemoContext, Scenario

NEW_NODES = ["gpu061", "gpu062", "gpu063"]  # rack-8, no spare there yet
BAD_NODE = "gpu062"


def burn_in_new_nodes(ctx: DemoContext) -> dict[str, Any]:
    from flows.burn_in import burn_in
    from flows.spare_cycle import spare_cycle
    from remedy import runtime
    from remedy.sim.faults import inject

    for node in NEW_NODES:  # delivered, racked, not yet managed: no pool label
        runtime.cluster().set_labels(node, {runtime.settings().labels.pool: None})
    inject(ctx.sim.cluster, "row-remap-pending", BAD_NODE, gpu=4)
    ctx.say(f"new nodes {', '.join(NEW_NODES)}; planted a pending row remap on {BAD_NODE} GPU 4")
    out = burn_in(nodes=NEW_NODES, level="quick", dry_run=ctx.dry_run)
    pool = spare_cycle(dry_run=ctx.dry_run)
    expected = sorted(set(NEW_NODES) - {BAD_NODE})
    if ctx.dry_run:
        status = "planned"
    elif out["spares"] == expected and out["failed"] == [BAD_NODE]:
        status = "burned-in"
    else:
        status = "unexpected"
    return {"node": ", ".join(NEW_NODES), "status": status, "burn_in": out["counts"],
            "why": out["nodes"][BAD_NODE].get("why", ""), "pool": pool["sizing"]["explain"],
            "diversity": [w["message"] for w in pool["diversity"]]}


SCENARIOS = [
    Scenario("burn-in", "three new nodes burned in: two join the spare pool, one with a pending row remap goes to "
             "repair; then the pool's health", burn_in_new_nodes, sim_options={"training_job": False},
             ok_statuses=("burned-in", "planned")),
]
