"""`remedy goodput` (the analytic model) and `remedy simulate` (the policy simulator)."""

from __future__ import annotations

import argparse
import json

from remedy.cli_args import fraction, non_negative_int, positive_float, positive_int, writable_file
from remedy.domain.durations import parse_duration
from remedy.errors import RemedyError
from remedy.goodput.compare import ALL_POLICIES, SimulationError, simulate
from remedy.goodput.model import (
    goodput,
    mtbf_hours_for_gpus,
    optimal_checkpoint_interval_minutes,
    published_percent,
)
from remedy.goodput.results import SimResult
from remedy.goodput.scenarios import SCENARIOS, Scenario, ScenarioFileError, load_scenario_file


class GoodputInputError(RemedyError):
    """An argument the goodput model cannot use; the message names it."""


def _duration(text: str) -> str:
    """A duration argument (8h, 30m, 45s; a bare number is minutes), checked when the command line is read."""
    try:
        parse_duration(text, default_unit="m")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return text


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser(
        "goodput",
        help="goodput G = (1 − (c + f + q)) × e of a training cluster",
        description="Goodput of a gang-scheduled training job: checkpoint overhead c, failure loss f, queue wait q. "
        "Durations take a unit: 8h, 30m, 45s.",
    )
    g.add_argument("--gpus", type=positive_int, help="cluster size; gives the MTBF from Meta's figures when --mtbf is absent")
    g.add_argument("--mtbf", type=_duration, help="job mean time between failures, e.g. 8h")
    g.add_argument("--checkpoint-every", type=_duration, help="checkpoint interval, e.g. 30m (default: the Young/Daly optimum)")
    g.add_argument("--checkpoint-cost", type=_duration, default="1m", help="time one checkpoint pauses training (default 1m)")
    g.add_argument("--remediation", type=_duration, default="60m", help="queue wait per failure (60m manual, 5m automated)")
    g.add_argument("--restart-loading", type=_duration, default="0m", help="checkpoint reload per restart (a 60-node B200 cluster measured 31m)")
    g.add_argument("--efficiency", type=fraction, default=1.0, help="compute efficiency e in (0, 1] (default 1)")
    g.add_argument("--json", action="store_true", help="print machine-readable JSON")
    g.set_defaults(func=_goodput)

    s = sub.add_parser(
        "simulate",
        help="compare remediation policies on a simulated cluster (discrete-event)",
        description="Discrete-event fleet simulation of one gang-scheduled job under a remediation policy.",
    )
    s.add_argument("--policy", default="all", choices=(*ALL_POLICIES, "all"),
                   help="one policy, or all of them and gpu-remedy's variants (default)")
    where = s.add_mutually_exclusive_group()
    where.add_argument("--scenario", default="seed000-1k", choices=tuple(SCENARIOS),
                       help="a shipped scenario (files in remedy/goodput/scenario_files/)")
    where.add_argument("--scenario-file", metavar="FILE.yaml", help="play the cluster described in this file")
    s.add_argument("--days", type=positive_float, help="simulated days (default: the scenario's)")
    s.add_argument("--seed", type=non_negative_int, default=0, help="random seed; same seed, same result (default 0)")
    s.add_argument("--seeds", type=positive_int, default=1, help="runs per policy, seeds SEED.. SEED+N-1, pooled (default 1)")
    s.add_argument("--plot", metavar="FILE.png", type=writable_file, help="also draw goodput by policy and the downtime distribution")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON")
    s.set_defaults(func=_simulate)


def _minutes(text: str, what: str) -> float:
    try:
        return parse_duration(text, what=what, default_unit="m") / 60.0
    except ValueError as exc:
        raise GoodputInputError(str(exc)) from None


def _goodput(args: argparse.Namespace) -> int:
    try:
        if args.mtbf:
            mtbf_h, source = _minutes(args.mtbf, "--mtbf") / 60.0, "given"
        elif args.gpus is not None:
            mtbf_h, source = mtbf_hours_for_gpus(args.gpus), f"Meta's figures for {args.gpus} GPUs (log-log)"
        else:
            raise GoodputInputError("give --mtbf (e.g. 8h) or --gpus (MTBF from Meta's published figures)")
        cost = _minutes(args.checkpoint_cost, "--checkpoint-cost")
        if args.checkpoint_every:
            interval, how = _minutes(args.checkpoint_every, "--checkpoint-every"), "given"
        else:
            interval, how = optimal_checkpoint_interval_minutes(cost, mtbf_h), "Young/Daly optimum"
        b = goodput(
            mtbf_hours=mtbf_h,
            checkpoint_interval_minutes=interval,
            checkpoint_cost_minutes=cost,
            remediation_minutes=_minutes(args.remediation, "--remediation"),
            restart_loading_minutes=_minutes(args.restart_loading, "--restart-loading"),
            efficiency=args.efficiency,
        )
    except ValueError as exc:
        raise GoodputInputError(str(exc)) from None
    out = b.as_dict() | {"mtbf_source": source, "interval_source": how, "gpus": args.gpus}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"MTBF {mtbf_h:.2f} h ({source}) → {b.failures_per_period:.2f} failures/day")
    print(f"checkpoint every {interval:.1f} min ({how}), {cost:g} min each")
    print(f"c checkpoint overhead {b.checkpoint_minutes:7.1f} min/day  {b.checkpoint:6.2%}")
    print(f"f failure loss        {b.failure_loss_minutes:7.1f} min/day  {b.failure_loss:6.2%}")
    print(f"q queue wait          {b.queue_wait_minutes:7.1f} min/day  {b.queue_wait:6.2%}")
    print(f"lost                  {b.lost_minutes:7.1f} min/day  {b.lost_fraction:6.2%}")
    print(f"goodput G = (1 − (c+f+q)) × {b.efficiency:g} = {b.goodput:.2%} (published as {published_percent(b.goodput)}%)")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from remedy.config import load_settings
    from remedy.goodput.compare import pooled_goodput

    settings = load_settings(args.config) if getattr(args, "config", None) else None
    if not 1 <= args.seeds <= 100:
        raise SimulationError(f"--seeds must be between 1 and 100, got {args.seeds}")
    if args.scenario_file:
        try:
            sc: str | Scenario = load_scenario_file(args.scenario_file)
        except ScenarioFileError as exc:
            raise SimulationError(str(exc)) from None
    else:
        sc = args.scenario
    policies = ALL_POLICIES if args.policy == "all" else (args.policy,)
    runs = {p: [simulate(sc, p, days=args.days, seed=args.seed + i, settings=settings) for i in range(args.seeds)]
            for p in policies}
    results = [r for rs in runs.values() for r in rs]
    if args.plot:
        from remedy.goodput.plots import plot_comparison

        name = results[0].scenario
        try:
            plot_comparison({(name, p): rs for p, rs in runs.items()}, args.plot)
        except OSError as exc:
            raise SimulationError(f"--plot {args.plot}: cannot write it ({exc.strerror or exc})") from None
    scenario = sc if isinstance(sc, Scenario) else SCENARIOS[sc]
    if args.json:
        print(json.dumps({"scenario": scenario.name, "published": scenario.published,
                          "pooled_goodput": {p: pooled_goodput(rs) for p, rs in runs.items()},
                          "runs": [r.as_dict() for r in results]}, indent=2))
        return 0
    print(format_table(results))
    print(comparison_lines(runs))
    if scenario.published:
        print("published: " + "; ".join(f"{k} {v}" for k, v in scenario.published.items()))
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def comparison_lines(runs: dict[str, list[SimResult]]) -> str:
    """Each policy against each baseline run on the same seeds (auto-replace, and auto-replace-reboot, which reboots
    a pulled node before repair): goodput difference and nodes sent to repair."""
    from remedy.goodput.compare import pooled_goodput

    blocks = []
    for baseline in ("auto-replace", "auto-replace-reboot"):
        base = runs.get(baseline)
        if not base:
            continue
        g0 = pooled_goodput(base)
        r0 = sum(r.nodes_to_repair for r in base)
        lines = [f"against {baseline} on the same seeds:"]
        for p, rs in runs.items():
            if p == baseline:
                continue
            g, rep = pooled_goodput(rs), sum(r.nodes_to_repair for r in rs)
            share = f"{rep / r0:.0%}" if r0 else "-"
            lines.append(f"  {p:26} goodput {100 * (g - g0):+.2f} points; nodes to repair {rep} vs {r0} ({share})")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


COLUMNS = (
    "scenario", "policy", "seed", "goodput", "c", "f", "q", "down p50", "down p90", "failed-retry GPU-h",
    "spares used", "to repair", "warned swaps", "chain ok", "incidents", "wall s",
)


def result_row(r: SimResult) -> list[str]:
    return [
        r.scenario,
        r.policy + (" *" if r.missing_domain else ""),
        str(r.seed),
        _pct(r.goodput),
        _pct(r.checkpoint),
        _pct(r.failure_loss),
        _pct(r.queue_wait),
        _num(r.downtime_p50_minutes, "{:.0f} min"),
        _num(r.downtime_p90_minutes, "{:.0f} min"),
        _num(r.failed_retry_gpu_hours),
        str(r.spares_consumed),
        str(r.nodes_to_repair),
        str(r.warning_swaps),
        _pct(r.retry_chain_success),
        str(r.incidents),
        f"{r.wall_seconds:.2f}",
    ]


def format_table(results: list[SimResult], columns: tuple[str, ...] = COLUMNS) -> str:
    rows = [list(columns)] + [result_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    missing = sorted({m for r in results for m in r.missing_domain})
    if missing:
        lines.append(f"* lacks domain code: {', '.join(missing)}")
    return "\n".join(lines)
