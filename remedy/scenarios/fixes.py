"""Fix scenarios, as triage runs them: restart the app in place; reset the GPU in place when no spare is ready;
replace first and fix the failed node off the critical path when one is (and to repair when its fix fails)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from remedy.scenarios import DemoContext, Scenario, via_triage

NODE = "gpu042"


def _answering(ctx: DemoContext):
    """--approve/--deny: answer any approval the run asks for, the way a person would."""
    if ctx.approve is None:
        return contextlib.nullcontext()
    from remedy.approvals.auto import AutoApprover

    return AutoApprover(decision=ctx.approve)


def _fix(ctx: DemoContext, xid: int, gpu: int, detected_at: datetime) -> dict[str, Any]:
    with _answering(ctx):
        return via_triage(ctx, NODE, xid=xid, gpu=gpu, detected_at=detected_at.isoformat())


def xid94(ctx: DemoContext) -> dict[str, Any]:
    import flows.triage  # noqa: F401 — imported before the fault, so detection time is not import time
    from remedy.sim.faults import inject

    detected_at = datetime.now(UTC)
    inject(ctx.sim.cluster, "xid", NODE, gpu=5, code=94)
    ctx.say(f"injected XID 94 (contained ECC error: the app must restart) on {NODE} GPU 5")
    return _fix(ctx, 94, 5, detected_at)


def xid145(ctx: DemoContext) -> dict[str, Any]:
    import flows.triage  # noqa: F401
    from remedy.sim.faults import inject

    detected_at = datetime.now(UTC)
    inject(ctx.sim.cluster, "xid", NODE, gpu=2, code=145)
    ctx.say(f"injected XID 145 (NVLink RLW error: reset the GPU) on {NODE} GPU 2")
    return _fix(ctx, 145, 2, detected_at)


def reset_fails(ctx: DemoContext) -> dict[str, Any]:
    import flows.triage  # noqa: F401
    from remedy.sim.faults import inject

    detected_at = datetime.now(UTC)
    inject(ctx.sim.cluster, "xid", NODE, gpu=2, code=145)
    inject(ctx.sim.cluster, "reset-fails", NODE, gpu=2)
    with ctx.sim.cluster.lock:  # a hardware fault: a reboot does not clear it either
        ctx.sim.cluster.health[NODE].gpus[2].reboot_clears = False
    ctx.say(f"injected XID 145 on {NODE} GPU 2 that neither a GPU reset nor a reboot clears")
    return _fix(ctx, 145, 2, detected_at)


SCENARIOS = [
    Scenario("xid94", "Contained error (XID 94): restart the job's pods, the node stays in", xid94,
             ok_statuses=("restarted", "planned")),
    Scenario("xid145", "NVLink error (XID 145) with no spare ready: drain, reset the GPU, verify with NVML, uncordon "
             "(with a spare ready, triage would replace first)", xid145, sim_options={"spares": 0},
             ok_statuses=("fixed", "planned")),
    Scenario("reset-fails", "XID 145 that neither a GPU reset nor a reboot clears: the job gets a spare first; the "
             "reset and reboot off the critical path fail, so the node goes to repair", reset_fails,
             ok_statuses=("replaced", "planned")),
]
