"""Remediation policies compared on the simulator's scenarios, with the simulator's own speed.

For each scenario × policy: goodput and its c/f/q split, incident downtime p50/p90, GPU-hours lost to failed
retries, spares consumed and retry-chain success (means over seeds; downtimes pooled), and the median wall
time per run with its ratio to naive auto-replace on the same scenario (measured in the same run: what the
domain calls of the gpu-remedy policy cost). The 16,384-GPU × 55-day target is ≤ 10 s per run.
gpu-remedy's variants (remedy.goodput.compare.VARIANTS) switch one behaviour off each, to show what it buys.
The acceptance lines compare gpu-remedy with auto-replace on the same seeds; `floor` is the share of the scenario's
faults that only a replacement clears (the repair share cannot go below it). A PNG (goodput by policy; downtime
distributions) goes to bench/out/policies.png.

    .venv/bin/python bench/policies.py [--seeds 3] [--scenarios seed000-1k,seed002-63,meta-16k,llama3-405b] [--no-plots]
                                       [--bound]

--bound adds a ceiling: gpu-remedy told which fix clears each fault and which warnings are true, on the same seeds.

What the targets mean in these scenarios (issue 15's acceptance; measured numbers in docs/architecture.md):
- repair share ≤ 40 % of auto-replace's: auto-replace sends every failed node to repair; a fault that only a
  replacement clears goes to repair under any policy, so gpu-remedy's share cannot fall below the share of such
  faults in the scenario's mix (`floor`, printed). Llama 3's published root causes put that floor at 50 %: the
  40 % cap cannot be met there by any policy, and the verdict says so.
- seed000-1k ≥ 93.2 %: the ceiling (perfect knowledge of every fault's fix and every warning's truth, same seeds)
  stays below 93.2 %, so no choice rule reaches it under this scenario's inputs; only different inputs could
  (faster joins or reloads, more warnings).
- meta-16k ≥ auto-replace + 1.0: met since spares with the fewest recent incidents go first (`select_spare`); the
  per-seed spread is wide (sd ≈ 0.8 points), so the table prints the paired 95 % interval: run --seeds 30 to see it
  clear of the target. What separates gpu-remedy from the ceiling is knowledge it cannot have (which fix clears this
  fault rather than the odds of its class; which warnings are true). With a job failing every 108 min a warned failure
  often finds the job already down, so warnings are acted on only when that still pays
  (`choose_on_warning(job_mtbf_minutes=…)`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from remedy.goodput.compare import ALL_POLICIES, pooled_goodput, simulate
from remedy.goodput.model import goodput as analytic_goodput
from remedy.goodput.model import goodput_renewal
from remedy.goodput.results import SimResult
from remedy.goodput.scenarios import SCENARIOS

OUT = Path(__file__).resolve().parent / "out"
TARGET_16K_SECONDS = 10.0
# issue 15's acceptance: gpu-remedy's goodput floor per scenario (absolute, or auto-replace + points) and the
# most nodes it may send to repair as a share of auto-replace's
TARGETS = {"seed000-1k": ("abs", 0.932), "meta-16k": ("plus", 0.010), "seed002-63": ("abs", 0.964)}
MAX_REPAIR_SHARE = 0.40


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None


def _pct(x):
    return "-" if x is None else f"{x:6.1%}"


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def _lemons(rs: list[SimResult]) -> str:
    """Flagged (correct) of the fleet's lemons, summed over seeds."""
    flagged = sum(r.lemons_flagged for r in rs)
    right = sum(r.lemons_flagged_correctly for r in rs)
    total = sum(r.lemons_in_fleet for r in rs)
    return f"{flagged} ({right})/{total}" if total or flagged else "-"


def run(scenarios: list[str], seeds: int) -> dict[tuple[str, str], list[SimResult]]:
    out: dict[tuple[str, str], list[SimResult]] = {}
    for sc in scenarios:
        for policy in ALL_POLICIES:
            out[(sc, policy)] = [simulate(sc, policy, seed=s) for s in range(seeds)]
    return out


def replace_share(name: str) -> float:
    """Share of the scenario's faults that only a replacement clears: whatever the policy, those nodes go to repair,
    so the repair share cannot fall below about this (auto-replace sends every failed node)."""
    mix = SCENARIOS[name].fault_mix
    total = sum(k.share for k in mix)
    return sum(k.share * dict(k.needs).get("replace", 0.0) / sum(dict(k.needs).values()) for k in mix) / total


def paired_ci(base: list[SimResult], ours: list[SimResult]) -> str:
    """95 % interval of gpu-remedy − auto-replace in points, from the per-seed differences (same seed, same failure
    draws up to the policies' divergence): how far the seeds' spread lets the pooled Δ be trusted."""
    diffs = [100 * (pooled_goodput([o]) - pooled_goodput([b])) for b, o in zip(base, ours)]
    if len(diffs) < 2:
        return "-"
    m, half = statistics.mean(diffs), 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return f"{m - half:+.2f} … {m + half:+.2f}"


def acceptance(results: dict[tuple[str, str], list[SimResult]]) -> str:
    """gpu-remedy against auto-replace on the same seeds, with issue 15's targets."""
    lines = [f"{'scenario':12} {'auto-replace':>12} {'gpu-remedy':>10} {'Δ points':>8} {'95% CI, paired':>16} "
             f"{'target':>16} {'to repair (gpu-remedy/auto-replace)':>36} {'floor':>6} verdict"]
    for sc in dict.fromkeys(s for s, _ in results):
        base, ours = results.get((sc, "auto-replace")), results.get((sc, "gpu-remedy"))
        if not base or not ours:
            continue
        g0, g1 = pooled_goodput(base), pooled_goodput(ours)
        r0, r1 = sum(r.nodes_to_repair for r in base), sum(r.nodes_to_repair for r in ours)
        kind, value = TARGETS.get(sc, ("plus", 0.0))
        floor = value if kind == "abs" else g0 + value
        share = r1 / r0 if r0 else 0.0
        ok = g1 >= floor and share <= MAX_REPAIR_SHARE
        verdict = "met" if ok else "NOT MET"
        if share > MAX_REPAIR_SHARE and replace_share(sc) > MAX_REPAIR_SHARE:
            verdict += " (repair cap below the floor: no policy can meet it)"
        lines.append(f"{sc:12} {g0:12.2%} {g1:10.2%} {100 * (g1 - g0):+8.2f} {paired_ci(base, ours):>16} "
                     f"{'≥ ' + format(floor, '.2%'):>16} "
                     f"{f'{r1}/{r0} = {share:.0%} (≤ {MAX_REPAIR_SHARE:.0%})':>36} {replace_share(sc):6.0%} "
                     f"{verdict}")
    lines.append("why gpu-remedy sent nodes to repair, and what waited for a person (all seeds):")
    for sc in dict.fromkeys(s for s, _ in results):
        ours = results.get((sc, "gpu-remedy"))
        if not ours:
            continue
        reasons: dict[str, int] = {}
        for r in ours:
            for why, n in r.repair_reasons.items():
                reasons[why] = reasons.get(why, 0) + n
        text = ", ".join(f"{why} {n}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])) or "none"
        lines.append(f"  {sc:12} {text}; approvals asked {sum(r.approvals for r in ours)}, "
                     f"spare shortfalls {sum(r.spare_shortfalls for r in ours)}, "
                     f"warning swaps {sum(r.warning_swaps for r in ours)} ({sum(r.failures_avoided for r in ours)} "
                     f"failures avoided); lemons picked for retirement (true lemons)/in the fleet {_lemons(ours)}, "
                     f"retired {sum(r.nodes_retired for r in ours)}")
    return "\n".join(lines)


def table(results: dict[tuple[str, str], list[SimResult]]) -> str:
    head = (
        f"{'scenario':11} {'policy':33} {'goodput':>7} {'c':>6} {'f':>6} {'q':>6} {'down p50':>9} {'down p90':>9} "
        f"{'failed-retry GPU-h':>18} {'spares':>7} {'chain ok':>8} {'lemons flagged':>14} {'wall s':>7} {'× auto-repl':>11}"
    )
    lines = [head, "-" * len(head)]
    for (sc, policy), rs in results.items():
        base = statistics.median(r.wall_seconds for r in results[(sc, "auto-replace")])
        wall = statistics.median(r.wall_seconds for r in rs)
        downs = [d for r in rs for d in r.downtimes_minutes]
        lines.append(
            f"{sc:11} {policy:33} {_pct(pooled_goodput(rs)):>7} {_pct(_mean(r.checkpoint for r in rs)):>6} "
            f"{_pct(_mean(r.failure_loss for r in rs)):>6} {_pct(_mean(r.queue_wait for r in rs)):>6} "
            f"{_q(downs, 0.5) or 0:7.0f} m {_q(downs, 0.9) or 0:7.0f} m "
            f"{_mean(r.failed_retry_gpu_hours for r in rs):18.0f} {_mean(r.spares_consumed for r in rs):7.1f} "
            f"{_pct(_mean(r.retry_chain_success for r in rs)):>8} {_lemons(rs):>14} "
            f"{wall:7.2f} {wall / base if base else float('nan'):10.2f}×"
        )
    missing = sorted({m for rs in results.values() for r in rs for m in r.missing_domain})
    if missing:
        lines.append(f"gpu-remedy lacks domain code: {', '.join(missing)}")
    return "\n".join(lines)


def seed000_check(results: dict[tuple[str, str], list[SimResult]]) -> str:
    """Simulator vs seed 000's published whole percents (81 manual, 92 automated)."""
    lines = []
    for policy, remediation, published in (("manual", 60.0, 81), ("auto-replace", 5.0, 92)):
        rs = results.get(("seed000-1k", policy))
        if not rs:
            continue
        kw = dict(mtbf_hours=8, checkpoint_interval_minutes=30, checkpoint_cost_minutes=1, remediation_minutes=remediation)
        lines.append(
            f"seed 000 {policy:12}: simulated {pooled_goodput(rs):.2%}, renewal model {goodput_renewal(**kw):.2%}, "
            f"article's first-order {analytic_goodput(**kw).goodput:.2%}, published {published}%"
        )
    return "\n".join(lines)


def bound(scenarios: list[str], seeds: int, results) -> str:
    """How far better choices could go: gpu-remedy told what it cannot know — which fix clears each fault, which
    warnings are true — on the same seeds. Not a policy: a ceiling for the targets above."""
    from remedy.goodput.compare import make_policy
    from remedy.goodput.gpu_remedy_policy import GpuRemedy
    from remedy.goodput.scenarios import scenario
    from remedy.goodput.sim import FleetSim
    from remedy.remediate.choice import FixOdds

    class Knowing(GpuRemedy):
        def handle(self, sim, inc):  # note which incident is choosing, for _odds
            gen, value = super().handle(sim, inc), None
            while True:
                self._current = inc
                try:
                    wanted = gen.send(value)
                except StopIteration:
                    return
                value = yield wanted

        def _odds(self, resolution):
            need = self._current.fault.needs
            return {"restart": FixOdds(1, 1, 1), "reset": FixOdds(0, 1, 1), "reboot": FixOdds(0, 0, 1)}.get(
                need, FixOdds(0, 0, 0))

        def on_warning(self, sim, node, lead):
            if node in sim.pending:  # only true warnings
                yield from super().on_warning(sim, node, lead)

        def _warning_odds(self, sc, record):
            return 1.0, math.inf  # it knows the warning is true and acts on it whatever else stops the job

    lines = ["ceiling: gpu-remedy knowing which fix clears each fault and which warnings are true (same seeds)"]
    for sc in scenarios:
        runs = [FleetSim(scenario(sc), Knowing(name="knowing", learn_warning_precision=False), seed=s).run() for s in range(seeds)]
        g0 = pooled_goodput(results[(sc, "auto-replace")]) if (sc, "auto-replace") in results else pooled_goodput(
            [FleetSim(scenario(sc), make_policy("auto-replace"), seed=s).run() for s in range(seeds)])
        g = pooled_goodput(runs)
        lines.append(f"  {sc:12} {g:.2%} ({100 * (g - g0):+.2f} points over auto-replace)")
    return "\n".join(lines)


def plots(results: dict[tuple[str, str], list[SimResult]]) -> list[Path]:
    from remedy.goodput.plots import plot_comparison

    return [plot_comparison(results, OUT / "policies.png")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--bound", action="store_true", help="also print the ceiling: gpu-remedy with perfect knowledge")
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(unknown)} (choose from {', '.join(SCENARIOS)})")
    t0 = time.perf_counter()
    results = run(scenarios, args.seeds)
    print(f"{args.seeds} seed(s) per cell; scenario lengths: "
          + ", ".join(f"{s} {SCENARIOS[s].days:g} d" for s in scenarios))
    print(table(results))
    print(acceptance(results))
    if args.bound:
        print(bound(scenarios, args.seeds, results))
    check = seed000_check(results)
    if check:
        print(check)
    if "meta-16k" in scenarios:
        worst = max(r.wall_seconds for (sc, _), rs in results.items() if sc == "meta-16k" for r in rs)
        verdict = "OK" if worst <= TARGET_16K_SECONDS else "OVER TARGET"
        print(f"16,384 GPUs × 55 days: slowest run {worst:.2f} s (target ≤ {TARGET_16K_SECONDS:g} s): {verdict}")
    if not args.no_plots:
        for p in plots(results):
            print(f"wrote {p}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
