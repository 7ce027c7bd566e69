"""Bounds for the gpu-remedy policy: the same policy told what it cannot know, to show how far better choices could go.

Not policies (no deployment has this knowledge); `bench/policies.py` prints them beside the policies, same seeds:
- `per-code`: told each error code's true fix odds (the scenario's mix: what a ledger with endless history would learn
  per XID / signal), spare taken at the checkpoint as before issue 34;
- `per-code+early`: that, plus the spare promoted as soon as acting on a warning is decided (no extra knowledge);
- `per-fault`: told which fix clears *this* fault and which warnings are true (the old "ceiling").
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

from remedy.domain.xid import Resolution
from remedy.goodput.events import Process
from remedy.goodput.gpu_remedy_policy import GpuRemedy
from remedy.goodput.scenarios import FIX_LEVELS, Scenario
from remedy.remediate.choice import FixOdds

BOUNDS = ("per-code", "per-code+early", "per-fault")


def true_code_odds(sc: Scenario) -> dict[str, FixOdds]:
    """Each error code's chance that a restart / reset / reboot clears it, from the scenario's fault mix: a kind's
    share is split evenly over its XIDs (the simulator draws one uniformly); a kind without an XID is coded by its
    signal; an upstream cause is cleared by no fix on the node."""
    weights: dict[str, list[tuple[float, dict[str, float]]]] = {}
    for kind in sc.fault_mix:
        needs = dict(kind.needs)
        total = sum(needs.values())
        dist = {k: v / total for k, v in needs.items()}
        codes = [f"xid-{x}" for x in kind.xids] or [kind.signal]
        for code in codes:
            weights.setdefault(code, []).append((kind.share / len(codes), dist))
    out = {}
    for code, parts in weights.items():
        w = sum(s for s, _ in parts)

        def upto(level: str, parts=parts, w=w) -> float:
            depth = FIX_LEVELS.index(level)
            return float(sum(s * sum(p for k, p in d.items() if k in FIX_LEVELS[: depth + 1]) for s, d in parts) / w)

        out[code] = FixOdds(upto("restart"), upto("reset"), upto("reboot"))
    return out


@dataclass
class KnowsPerCode(GpuRemedy):
    """gpu-remedy told each error code's true fix odds (instead of learning them)."""

    name: str = "bound: per-code"
    _table: dict[str, FixOdds] = field(default_factory=dict)

    def handle(self, sim, inc) -> Process:
        if not self._table:
            self._table = true_code_odds(sim.sc)
        yield from super().handle(sim, inc)

    def _odds(self, resolution: Resolution, code: str = "") -> FixOdds:
        return self._table.get(code) or super()._odds(resolution, code)


@dataclass
class KnowsPerFault(GpuRemedy):
    """gpu-remedy told which fix clears each fault and which warnings are true."""

    name: str = "bound: per-fault"
    learn_warning_precision: bool = False

    def handle(self, sim, inc) -> Process:  # note which incident is choosing, for _odds
        gen: Generator = super().handle(sim, inc)
        value = None
        while True:
            self._current = inc
            try:
                wanted = gen.send(value)
            except StopIteration:
                return
            value = yield wanted

    def _odds(self, resolution: Resolution, code: str = "") -> FixOdds:
        need = self._current.fault.needs
        return {"restart": FixOdds(1, 1, 1), "reset": FixOdds(0, 1, 1), "reboot": FixOdds(0, 0, 1)}.get(
            need, FixOdds(0, 0, 0))

    def on_warning(self, sim, node: int, lead: float) -> Process:
        if node in sim.pending:  # only true warnings
            yield from super().on_warning(sim, node, lead)

    def _warning_odds(self, sc, record) -> tuple[float, float]:
        return 1.0, math.inf  # it knows the warning is true and acts on it whatever else stops the job


def make_bound(name: str) -> GpuRemedy:
    if name == "per-code":
        return KnowsPerCode(early_promotion=False)
    if name == "per-code+early":
        return KnowsPerCode(name="bound: per-code+early")
    if name == "per-fault":
        return KnowsPerFault()
    raise ValueError(f"unknown bound {name!r} (choose from: {', '.join(BOUNDS)})")
