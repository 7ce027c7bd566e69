"""Named demo scenarios for `remedy demo --scenario NAME` (each module owns its scenarios).

A scenario module defines `SCENARIOS: list[Scenario]`. `Scenario.run(ctx)` injects its faults into the simulator
behind `ctx`, runs the flows, and returns an outcome dict; `remedy.platform.demo` adds the ledger's incidents, actions,
breaker transitions and approvals to it, so every scenario reports the same shape.

A fault scenario tells production's story, not its own: it records the incident as the alert receiver does and
runs `triage` (`via_triage`), so what the demo shows for an XID is what `remedy up` and a production install do
with it, and what `remedy xid explain` says.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIO_MODULES = (
    "remedy.scenarios.replace",  # xid79
    "remedy.scenarios.burn_in",  # burn-in
    "remedy.scenarios.isolation",  # nan-loss
    "remedy.scenarios.fixes",  # xid94, xid145, reset-fails
)


@dataclass
class DemoContext:
    sim: Any  # remedy.sim.server.SimServer (running)
    workdir: Path
    dry_run: bool = False
    approve: bool | None = None  # --approve / --deny answers approvals unattended; None = wait for a person
    quiet: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # scenario-specific flags (e.g. --bad for nan-loss)

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    run: Callable[[DemoContext], dict[str, Any]]
    sim_options: dict[str, Any] = field(default_factory=dict)  # build_cluster(...) overrides
    ok_statuses: tuple[str, ...] = ("replaced", "planned")


def via_triage(ctx: DemoContext, node: str, *, xid: int, gpu: int, detected_at: str) -> dict[str, Any]:
    """Record the incident as the alert receiver would and run `triage` on it (as a subflow of the demo's run). The
    result is the remediation's own (status, timeline, replacement …) plus what triage chose and why."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import Incident
    from remedy.domain.times import parse_iso
    from tasks.states import run_subflow
    from tasks.tags import tagged

    seen = parse_iso(detected_at, what="detected_at")
    record, _ = runtime.ledger().open_incident(
        Incident(node=node, signal="xid", gpu=gpu, xid=xid, first_seen=seen, last_seen=seen,
                 detail=f"demo: XID {xid} on {node} GPU {gpu}"),
        window_seconds=runtime.settings().receiver.dedup_window_seconds)
    with tagged(node, stage="triage", xid=xid, dry_run=ctx.dry_run):
        out = run_subflow(triage, incident_id=record.id, detected_at=detected_at, dry_run=ctx.dry_run)
    outcome = out.get("outcome")
    done: dict = outcome if isinstance(outcome, dict) else {}
    return {**done, "node": node, "status": done.get("status") or out.get("status"), "path": out.get("path"),
            "triage": out.get("reason"), "choice": out.get("choice"), "recovery": out.get("recovery"),
            "incident_status": out.get("incident_status")}


def all_scenarios() -> dict[str, Scenario]:
    out: dict[str, Scenario] = {}
    for name in SCENARIO_MODULES:
        for sc in importlib.import_module(name).SCENARIOS:
            out[sc.name] = sc
    return out
