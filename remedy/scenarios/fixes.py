"""In-place fix scenarios: the XID ladder on one node (restart the app, reset the GPU, or climb to replacement)."""

from __future__ import annotations

from tasks.states import run_subflow

import contextlib
from datetime import datetime, timezone
from typing import Any

from remedy.scenarios import DemoContext, Scenario

NODE = "gpu042"


def _answering(ctx: DemoContext):
    """--approve/--deny: answer any approval the run asks for, the way a person would."""
    if ctx.approve is None:
        return contextlib.nullcontext()
    from remedy.approvals.auto import AutoApprover

    return AutoApprover(decision=ctx.approve)


def _fix(ctx: DemoContext, xid: int, gpu: int, detected_at: datetime) -> dict[str, Any]:
    from flows.fix_in_place import fix_in_place

    with _answering(ctx):
        return run_subflow(fix_in_place, node=NODE, xid=xid, gpu=gpu, detected_at=detected_at.isoformat(), dry_run=ctx.dry_run)


def xid94(ctx: DemoContext) -> dict[str, Any]:
    import flows.fix_in_place  # noqa: F401 — imported before the fault, so detection time is not import time
    from remedy.sim.faults import inject

    detected_at = datetime.now(timezone.utc)
    inject(ctx.sim.cluster, "xid", NODE, gpu=5, code=94)
    ctx.say(f"injected XID 94 (contained ECC error: the app must restart) on {NODE} GPU 5")
    return _fix(ctx, 94, 5, detected_at)


def xid145(ctx: DemoContext) -> dict[str, Any]:
    import flows.fix_in_place  # noqa: F401
    from remedy.sim.faults import inject

    detected_at = datetime.now(timezone.utc)
    inject(ctx.sim.cluster, "xid", NODE, gpu=2, code=145)
    ctx.say(f"injected XID 145 (NVLink RLW error: reset the GPU) on {NODE} GPU 2")
    return _fix(ctx, 145, 2, detected_at)


def reset_fails(ctx: DemoContext) -> dict[str, Any]:
    import flows.fix_in_place  # noqa: F401
    from remedy.sim.faults import inject

    detected_at = datetime.now(timezone.utc)
    inject(ctx.sim.cluster, "xid", NODE, gpu=2, code=145)
    inject(ctx.sim.cluster, "reset-fails", NODE, gpu=2)
    with ctx.sim.cluster.lock:  # a hardware fault: a reboot does not clear it either
        ctx.sim.cluster.health[NODE].gpus[2].reboot_clears = False
    ctx.say(f"injected XID 145 on {NODE} GPU 2 that neither a GPU reset nor a reboot clears")
    return _fix(ctx, 145, 2, detected_at)


SCENARIOS = [
    Scenario("xid94", "Contained error (XID 94): restart the job's pods, the node stays in", xid94,
             ok_statuses=("restarted", "planned")),
    Scenario("xid145", "NVLink error (XID 145): drain, reset the GPU, verify with NVML, uncordon", xid145,
             ok_statuses=("fixed", "planned")),
    Scenario("reset-fails", "XID 145 that a GPU reset cannot clear: reset → reboot → replace from the spare pool",
             reset_fails, ok_statuses=("replaced", "planned")),
]
