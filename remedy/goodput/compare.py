"""Run policies on scenarios: the one entry point the CLI, the benchmark and the tests share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from remedy.config import RemedySettings
from remedy.errors import RemedyError
from remedy.goodput.policies import AutoRebootReplace, AutoReplace, AutoRetry, Manual
from remedy.goodput.results import SimResult
from remedy.goodput.scenarios import SCENARIOS, Scenario, scenario
from remedy.goodput.sim import FleetSim

# Baselines first: auto-replace-reboot is the strongest one without fault knowledge (reboot + burn-in before repair).
POLICY_NAMES = ("manual", "auto-retry", "auto-replace", "auto-replace-reboot", "gpu-remedy")
# gpu-remedy with one behaviour switched off, to show what each buys (same domain code, same seeds).
VARIANTS: dict[str, dict[str, Any]] = {  # keyword arguments of GpuRemedy
    "gpu-remedy/no-warnings": {"act_on_warnings": False},
    "gpu-remedy/repair-at-once": {"repair_in_background": False},  # a replaced node goes straight to repair
    # weighs warnings by the scenario's true precision instead of learning it: knowledge no deployment has
    "gpu-remedy/told-warning-precision": {"learn_warning_precision": False},
    # issue 34's cheap wins, one at a time
    "gpu-remedy/per-class-odds": {"learn_per_code": False},  # fix odds per resolution class, not per error code
    "gpu-remedy/no-early-promotion": {"early_promotion": False},  # the spare is taken at the checkpoint
    "gpu-remedy/no-outage-swaps": {"swap_in_outages": False},  # a warning during another outage is dropped
    # acts on a detector only once its record shows acting pays (no warning acted on before)
    "gpu-remedy/act-on-evidence": {"check_every": 1},
    # a warning may take a spare whenever one is left above the reserve (before: the pool keeps its sizing target)
    "gpu-remedy/warnings-to-the-reserve": {"warning_pool_floor": False},
    "gpu-remedy/replace-suspects": {"replace_suspects": True},
}
ALL_POLICIES = (*POLICY_NAMES, *VARIANTS)


class SimulationError(RemedyError):
    """A simulation request that cannot run (unknown policy or scenario, bad days or seed)."""


def make_policy(name: str, settings: RemedySettings | None = None):
    """A fresh policy object (policies keep per-run state, so use one per run)."""
    if name == "manual":
        return Manual()
    if name == "auto-retry":
        return AutoRetry()
    if name == "auto-replace":
        return AutoReplace()
    if name == "auto-replace-reboot":
        return AutoRebootReplace()
    if name == "gpu-remedy" or name in VARIANTS:
        from remedy.goodput.gpu_remedy_policy import GpuRemedy

        return GpuRemedy(settings or RemedySettings(), name=name, **VARIANTS.get(name, {}))
    raise SimulationError(f"unknown policy {name!r} (choose from: {', '.join(ALL_POLICIES)})")


def simulate(
    scenario_or_name: str | Scenario,
    policy: str,
    *,
    days: float | None = None,
    seed: int = 0,
    settings: RemedySettings | None = None,
    check_invariants: bool = False,
) -> SimResult:
    """One run of `policy` on a scenario (by name or object); `days` overrides the scenario's length."""
    if isinstance(scenario_or_name, Scenario):
        sc = scenario_or_name if days is None else Scenario.model_validate({**scenario_or_name.model_dump(), "days": days})
    else:
        if scenario_or_name not in SCENARIOS:
            raise SimulationError(f"unknown scenario {scenario_or_name!r} (choose from: {', '.join(SCENARIOS)})")
        if days is not None and not days > 0:
            raise SimulationError(f"--days must be a positive number, got {days}")
        sc = scenario(scenario_or_name, **({"days": days} if days is not None else {}))
    if not isinstance(seed, int) or seed < 0:
        raise SimulationError(f"--seed must be a whole number ≥ 0, got {seed!r}")
    return FleetSim(sc, make_policy(policy, settings), seed=seed, check_invariants=check_invariants).run()


def simulate_grid(
    scenarios: Iterable[str], policies: Iterable[str], *, days: float | None = None, seed: int = 0,
    settings: RemedySettings | None = None,
) -> list[SimResult]:
    """Every policy on every scenario, same seed (so the failure draws start from the same stream)."""
    return [simulate(s, p, days=days, seed=seed, settings=settings) for s in scenarios for p in policies]


def pooled_goodput(results: Iterable[SimResult]) -> float:
    """Goodput over several runs, weighted by simulated time (useful minutes / total minutes)."""
    rs = list(results)
    total = sum(r.minutes["total"] for r in rs)
    if not total:
        raise SimulationError("no simulated time to pool")
    return sum(r.minutes["useful"] for r in rs) / total * rs[0].efficiency
