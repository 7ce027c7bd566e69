"""What a detector's own record buys: gpu-remedy learning each detector's precision, against being told it, against
ignoring warnings, with auto-replace the baseline — on the same seeds, for a detector as reliable as the shipped
scenarios assume (half a false alarm per true warning) and for a noisy one (four false alarms per true warning:
busy but healthy nodes flagged).

gpu-remedy learns the precision from the warnings it leaves to run (remedy.warn.record); `keep_checking` leaves
one in three to run while the record cannot yet show that acting pays. "told" weighs the scenario's true
precision, which no deployment knows: the bound of what learning can reach. "swaps on false alarms" are healthy
nodes taken out of the job.

    .venv/bin/python bench/warning_record.py [--seeds 5] [--scenario seed000-1k] [--days 365] [--share 0.3]
"""

from __future__ import annotations

import argparse

from remedy.goodput.compare import make_policy, pooled_goodput
from remedy.goodput.gpu_remedy_policy import GpuRemedy
from remedy.goodput.scenarios import scenario
from remedy.goodput.sim import FleetSim

POLICIES = ("auto-replace", "gpu-remedy/no-warnings", "gpu-remedy", "gpu-remedy, never left to check",
            "gpu-remedy/told-warning-precision")
DETECTORS = {"as assumed (1 false per 2 true)": 0.5, "noisy (4 false per true)": 4.0}


def _policy(name: str):
    if name == "gpu-remedy, never left to check":  # learns the record but acts on every warning that pays on it
        return GpuRemedy(name=name, check_detectors=False)
    return make_policy(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--scenario", default="seed000-1k")
    ap.add_argument("--days", type=float, default=None, help="the scenario's own length unless given")
    ap.add_argument("--share", type=float, default=0.3, help="share of failures a detector warns about")
    args = ap.parse_args()
    print(f"{args.scenario}, {args.share:.0%} of failures warned about, {args.seeds} seeds (the same for every row)")
    print(f"{'detector':32} {'policy':34} {'goodput':>8} {'vs auto-replace':>15} {'warnings':>9} {'swaps':>6} "
          f"{'on false alarms':>15} {'failures avoided':>16}")
    for label, false_per_true in DETECTORS.items():
        over = {"warning_share": args.share, "false_warnings_per_true": false_per_true}
        sc = scenario(args.scenario, **over, **({"days": args.days} if args.days else {}))
        base = None
        for name in POLICIES:
            runs = [FleetSim(sc, _policy(name), seed=s).run() for s in range(args.seeds)]
            g = pooled_goodput(runs)
            base = g if base is None else base
            swaps = sum(r.warning_swaps for r in runs)
            avoided = sum(r.failures_avoided for r in runs)
            print(f"{label:32} {name:34} {g:8.2%} {100 * (g - base):+14.2f}p {sum(r.warnings for r in runs):9d} "
                  f"{swaps:6d} {swaps - avoided:15d} {avoided:16d}")
    print("p: points of goodput; a swap on a false alarm is one whose node had no fault coming "
          "(swaps − failures avoided)")


if __name__ == "__main__":
    main()
