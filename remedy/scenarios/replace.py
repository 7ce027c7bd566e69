"""Replacement scenarios: a node dies and a warm spare takes its place; a rack storm trips the breaker; the spare
pool runs dry; no spare is ready and a low-priority session is preempted for the gang job (with approval).

Each runs production's path (`via_triage`). XID 79 (fallen off the bus) is a reboot-class fault: triage replaces
first only while a spare is ready, and reboots in place otherwise. So the scenarios about running out of spares use
XID 64 (row remapping failed: the bank has no spare rows left), which is replaced whatever the pool holds."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

from remedy.scenarios import DemoContext, Scenario, via_triage

NODE = "gpu042"
STORM_RACK_NODES = ["gpu009", "gpu010", "gpu011", "gpu012", "gpu013"]  # rack-2
EXHAUST_NODES = ["gpu003", "gpu019", "gpu027"]  # three racks, so no breaker trips: only the pool runs out


def _now() -> str:
    return datetime.now(UTC).isoformat()


@contextlib.contextmanager
def _answering(ctx: DemoContext):
    """--approve / --deny: a simulated operator answers approvals through the real path; else a person does."""
    if ctx.approve is None:
        ctx.say("approvals wait for a person: open the paused run in the Prefect UI (or use --approve/--deny)")
        yield
        return
    from remedy.approvals.auto import AutoApprover

    with AutoApprover(ctx.approve, by="demo-operator"):
        yield


def _demo_approval_timeout() -> None:
    os.environ.setdefault("REMEDY_APPROVALS__TIMEOUT_SECONDS", "300")
    from remedy import runtime

    runtime.reset()


def xid79(ctx: DemoContext) -> dict[str, Any]:
    import flows.triage  # noqa: F401 — imported before the fault, so detection time is not import time
    from remedy.sim.faults import inject

    detected_at = _now()
    inject(ctx.sim.cluster, "xid", NODE, gpu=3, code=79)
    ctx.say(f"injected XID 79 (GPU fell off the bus) on {NODE} GPU 3")
    with _answering(ctx) if ctx.approve is not None else contextlib.nullcontext():
        return via_triage(ctx, NODE, xid=79, gpu=3, detected_at=detected_at)


def rack_storm(ctx: DemoContext) -> dict[str, Any]:
    """Five nodes of one rack fail within seconds: a switch or PDU, not five bad nodes. The rack breaker acts on
    the first failures, holds the rest and asks a person once; approving re-closes it and the held work goes on."""
    import flows.triage  # noqa: F401
    from remedy.sim.faults import inject

    _demo_approval_timeout()
    runs: dict[str, dict[str, Any]] = {}

    def one(node: str, detected_at: str) -> None:
        runs[node] = via_triage(ctx, node, xid=79, gpu=0, detected_at=detected_at)

    with _answering(ctx):
        threads = []
        for node in STORM_RACK_NODES:
            detected_at = _now()
            inject(ctx.sim.cluster, "xid", node, gpu=0, code=79)
            ctx.say(f"injected XID 79 on {node} (rack-2)")
            t = threading.Thread(target=one, args=(node, detected_at))
            t.start()
            threads.append(t)
            time.sleep(0.3)
        for t in threads:
            t.join()
    from remedy import runtime

    statuses = {n: runs[n]["status"] for n in STORM_RACK_NODES}
    replaced = sorted(n for n, s in statuses.items() if s == "replaced")
    # a run that was held and then approved reports the gate it finally passed: the trip is in the ledger
    tripped = sorted({f"{e.scope_kind}:{e.scope}" for e in runtime.ledger().breaker_events() if e.to_state == "open"})
    return {"node": "rack-2", "status": "breaker-tripped" if tripped else "no-trip", "tripped": tripped,
            "runs": statuses,
            "replaced": replaced, "gates": {n: runs[n].get("gate") for n in STORM_RACK_NODES}}


def spares_exhausted(ctx: DemoContext) -> dict[str, Any]:
    """Failures in three racks with two spares and a reserve of one: the second failure needs a person to spend
    the reserve; the third finds no spare at all and escalates — the failed node stays out, no half-replacement."""
    import flows.triage  # noqa: F401
    from remedy.sim.faults import inject

    _demo_approval_timeout()
    runs = []
    with _answering(ctx):
        for node in EXHAUST_NODES:
            detected_at = _now()
            inject(ctx.sim.cluster, "xid", node, gpu=1, code=64)
            ctx.say(f"injected XID 64 (row remapping failed) on {node}")
            runs.append(via_triage(ctx, node, xid=64, gpu=1, detected_at=detected_at))
    last = runs[-1]
    return {"node": ", ".join(EXHAUST_NODES), "status": last["status"],
            "runs": {r["node"]: r["status"] for r in runs},
            "why": last.get("why") or last.get("gate"),
            "replaced": [r["replacement"] for r in runs if r["status"] == "replaced"]}


def preempt(ctx: DemoContext) -> dict[str, Any]:
    """Seed 002 §4.3.5: 63 nodes, 60 training, no ready spare, 3 nodes running single-node interactive sessions.
    A node of the 60-node gang job dies; rather than leave the job unable to start, gpu-remedy plans to preempt the
    cheapest session, a person approves (--approve / --deny), and the freed node takes the job's pod.
    With no spare at all there is no reserve to ask about: the preemption is the one question."""
    import flows.triage  # noqa: F401
    from remedy.sim.faults import inject

    _demo_approval_timeout()
    before = ctx.sim.cluster.sessions()
    ctx.say(f"no ready spare; interactive sessions (priority 10) on {', '.join(sorted(before.values()))}")
    with _answering(ctx):
        detected_at = _now()
        inject(ctx.sim.cluster, "xid", NODE, gpu=3, code=64)
        ctx.say(f"injected XID 64 (row remapping failed) on {NODE}: the 60-node job is one node short")
        run = via_triage(ctx, NODE, xid=64, gpu=3, detected_at=detected_at)
    after = ctx.sim.cluster.sessions()
    status = run["status"]
    decision = ((run.get("preemption") or {}).get("approval") or {}).get("decision")
    if status == "no-spare" and decision in ("deny", "timeout"):
        status = "preemption-denied"
    return run | {"status": status, "sessions_before": before, "sessions_after": after,
                  "preempted": sorted(set(before) - set(after))}


SCENARIOS = [
    Scenario("xid79", "GPU fell off the bus (XID 79): NVIDIA's fix is a reboot; with a warm spare ready triage "
             "replaces first (less job downtime), then reboots the failed node off the critical path", xid79),
    Scenario("rack-storm", "XID 79 on 5 nodes of one rack within seconds: the breakers of the rack, its switch and "
             "its PDU trip; a person approves and the held work goes on while spares last",
             rack_storm, ok_statuses=("breaker-tripped",)),
    Scenario("spares-exhausted", "row remapping failures (XID 64, always replaced) outrun the spare pool: spend the "
             "reserve with approval, then escalate", spares_exhausted, sim_options={"spares": 2},
             ok_statuses=("no-spare", "held")),
    Scenario("preempt", "XID 64 and no spare ready: preempt a low-priority session for the 60-node job, with approval",
             preempt, sim_options={"spares": 0, "sessions": 3},
             ok_statuses=("preempted", "planned", "preemption-denied")),
]
