"""Named demo scenarios for `remedy demo --scenario NAME` (each module owns its scenarios).

A scenario module defines `SCENARIOS: list[Scenario]`. `Scenario.run(ctx)` injects its faults into the simulator
behind `ctx`, runs the flows, and returns an outcome dict; `remedy.demo` adds the ledger's incidents, actions,
breaker transitions and approvals to it, so every scenario reports the same shape.
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


def all_scenarios() -> dict[str, Scenario]:
    out: dict[str, Scenario] = {}
    for name in SCENARIO_MODULES:
        for sc in importlib.import_module(name).SCENARIOS:
            out[sc.name] = sc
    return out
