"""Capacity budget: how many managed GPU nodes automation may have out of service at once.

medik8s node-healthcheck-operator turns "max unhealthy" into one minimum-healthy gate (`getMinHealthy`); we do the
same with both limits of `remedy.config.CapacityBudget` (absolute nodes and percent of the fleet, stricter wins).
The gate also refuses everything when more nodes look unhealthy than the budget allows out: a detector that
suddenly flags 20 % of a fleet is more likely broken than 20 % of the GPUs, and cordoning a healthy fleet is the
worst thing automation could do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from remedy.config import CapacityBudget


def max_out_of_service(total: int, budget: CapacityBudget) -> int:
    """Most nodes automation may have out at once: min(absolute cap, floor(percent × total)).

    Rounded down on purpose: 10 % of 15 nodes allows 1, not 2 (medik8s rounds minHealthy up, which is the same).
    """
    if total < 0:
        raise ValueError(f"total managed nodes must be >= 0, got {total}")
    by_percent = math.floor(total * budget.max_percent_in_remediation / 100.0 + 1e-9)
    return max(0, min(budget.max_nodes_in_remediation, by_percent))


def min_healthy(total: int, budget: CapacityBudget) -> int:
    """The same budget seen as the minimum number of healthy nodes (medik8s minHealthy)."""
    return total - max_out_of_service(total, budget)


def allowed_disruptions(total: int, unhealthy_now: int, budget: CapacityBudget) -> int:
    """How many unhealthy nodes automation may hold out of service right now (0 = hold everything).

    `unhealthy_now` counts every node that is out or looks bad at this moment (under remediation, flagged by the
    detector, and the one being decided). If that is more than the budget, the minimum-healthy gate fails and the
    answer is 0: hold all automation, the detector is suspect. Otherwise it is the budget itself; the caller acts
    while the nodes already out of service number fewer than it.
    """
    if unhealthy_now < 0:
        raise ValueError(f"unhealthy node count must be >= 0, got {unhealthy_now}")
    if unhealthy_now > total:
        raise ValueError(f"{unhealthy_now} unhealthy nodes cannot exceed the {total} managed nodes")
    healthy = total - unhealthy_now
    if healthy < min_healthy(total, budget):
        return 0
    return max_out_of_service(total, budget)


@dataclass(frozen=True)
class BudgetCheck:
    """Result of the capacity gate for one candidate, with its plain-English explanation."""

    ok: bool
    detector_suspect: bool
    out_now: int
    unhealthy_now: int
    limit: int
    detail: str


def check_budget(total: int, out_now: int, unhealthy_now: int, budget: CapacityBudget) -> BudgetCheck:
    """May one more node go out of service? `out_now` = already out; `unhealthy_now` includes the candidate."""
    cap = max_out_of_service(total, budget)
    allowed = allowed_disruptions(total, unhealthy_now, budget)
    why_cap = (
        f"budget {cap} = min({budget.max_nodes_in_remediation} nodes, "
        f"{budget.max_percent_in_remediation:g}% of {total})"
    )
    if cap == 0:
        return BudgetCheck(
            False, False, out_now, unhealthy_now, 0, f"{why_cap} allows no node out: raise the budget or act by hand"
        )
    # more unhealthy than the budget, and not just because this one node joins those already out
    if allowed == 0 and unhealthy_now > out_now + 1:
        return BudgetCheck(
            False,
            True,
            out_now,
            unhealthy_now,
            cap,
            f"{unhealthy_now} of {total} nodes look unhealthy at once, more than the {why_cap}: the detector is "
            "more likely wrong than that many nodes — holding all automation, a human must look",
        )
    if out_now >= allowed:
        return BudgetCheck(
            False,
            False,
            out_now,
            unhealthy_now,
            cap,
            f"{out_now} node{'s' if out_now != 1 else ''} already out of service, {why_cap}: wait for one to come back or get approval",
        )
    return BudgetCheck(True, False, out_now, unhealthy_now, cap, f"{out_now + 1} of {why_cap} in use")
