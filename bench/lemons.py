"""Lemon scoring on the planted fleet (remedy.lemon.generator: 200 nodes, 60 days, 8 lemons at three severities,
20 busy-but-healthy nodes full of application XIDs, noisy neighbours, a moved GPU and a re-created node).

Two rules on the same fleets in the same run:

- every incident: what gpu-remedy did before issue 14 (the lemon review read every incident the ledger had not
  closed as ignored, by node name, and scored them all);
- node-attributable: remedy.lemon.attribution (node-level XIDs, hardware signals and failed checks only; re-sends,
  job symptoms and job-caused faults left out; history follows the GPU's serial).

Per seed and pooled: precision and recall against the planted lemons, the false candidates by population, and the
median scoring time.

    .venv/bin/python bench/lemons.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

from remedy.lemon.attribution import EVERY_INCIDENT, NODE_ATTRIBUTABLE
from remedy.lemon.generator import generate_fleet, precision_recall
from remedy.lemon.scoring import score_fleet

RULES = (EVERY_INCIDENT, NODE_ATTRIBUTABLE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="fleets to generate (seeds 0..N-1)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        print("bench/lemons.py: --seeds must be at least 1")
        return 2

    totals = {r.name: {"hit": 0, "flagged": 0, "planted": 0, "busy": 0, "neighbour": 0, "other": 0, "times": []}
              for r in RULES}
    print(f"{'seed':>4}  " + "  ".join(f"{r.name:>26}" for r in RULES))
    for seed in range(args.seeds):
        fleet = generate_fleet(seed)
        cells = []
        for rule in RULES:
            t = time.perf_counter()
            verdicts = score_fleet(fleet.histories, fleet.now, inventory=fleet.inventory, rule=rule)
            tot = totals[rule.name]
            tot["times"].append(time.perf_counter() - t)
            flagged = {v.node for v in verdicts if v.candidate}
            p, r = precision_recall(flagged, fleet.lemons)
            false = flagged - fleet.lemons
            tot["hit"] += len(flagged & fleet.lemons)
            tot["flagged"] += len(flagged)
            tot["planted"] += len(fleet.lemons)
            tot["busy"] += len(false & fleet.busy)
            tot["neighbour"] += len(false & fleet.neighbours)
            tot["other"] += len(false - fleet.busy - fleet.neighbours)
            cells.append(f"P {p:.2f} R {r:.2f} ({len(flagged):>2} flagged)")
        print(f"{seed:>4}  " + "  ".join(f"{c:>26}" for c in cells))

    print()
    print(f"{'rule':<27} {'precision':>9} {'recall':>6} {'false: busy':>11} {'neighbour':>9} {'other':>5} "
          f"{'median ms':>9} {'vs every':>8}")
    base = statistics.median(totals[EVERY_INCIDENT.name]["times"])
    for rule in RULES:
        tot = totals[rule.name]
        precision = tot["hit"] / tot["flagged"] if tot["flagged"] else 1.0
        recall = tot["hit"] / tot["planted"]
        med = statistics.median(tot["times"])
        print(f"{rule.name:<27} {precision:>9.3f} {recall:>6.3f} {tot['busy']:>11} {tot['neighbour']:>9} "
              f"{tot['other']:>5} {med * 1000:>9.1f} {med / base:>7.2f}x")
    print(f"\npooled over {args.seeds} fleet(s) of 200 nodes, 60 days, 8 planted lemons each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
