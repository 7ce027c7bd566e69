"""Replacement scenarios: a node dies, a warm spare takes its place."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from remedy.scenarios import DemoContext, Scenario

NODE = "gpu042"


def xid79(ctx: DemoContext) -> dict[str, Any]:
    from flows.replace_node import replace_node  # imported before the fault, so detection time is not import time
    from remedy.sim.faults import inject

    detected_at = datetime.now(timezone.utc)
    inject(ctx.sim.cluster, "xid", NODE, gpu=3, code=79)
    ctx.say(f"injected XID 79 (GPU fell off the bus) on {NODE} GPU 3")
    return replace_node(node=NODE, cause="XID 79", signal="xid", xid=79, gpu=3,
                        detected_at=detected_at.isoformat(), dry_run=ctx.dry_run)


SCENARIOS = [
    Scenario("xid79", "GPU fell off the bus (XID 79): replace the node from the warm spare pool", xid79),
]
