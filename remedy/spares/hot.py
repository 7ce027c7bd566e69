"""How many hot spares the job should hold: what each saves per failure against what its idle node costs.

A hot spare is a warm spare moved into the job's pool ahead of time (remedy.elastic): untainted, labelled
`remedy.io/spare-role=hot`, image pulled, nothing else scheduled on it. A failure then swaps in seconds instead of
waiting for a spare to join. Its price: its node is the job's and idle, so its GPUs count in the job's goodput
denominator (goodput = useful GPU-hours / (job nodes + hot spares) GPU-hours), one node-minute per minute.

The k-th hot spare is used only when k−1 other failures arrived while the pool was being refilled (a warm spare
made hot again takes about one join): with X ~ Poisson(λ × refill), λ = job nodes / node MTBF,

    benefit_k per hour = λ × saving per failure × P(X ≥ k − 1)        cost_k per hour = 60 node-minutes

and the pool holds every k whose benefit is at least its cost, up to the configured most (`spares.hot_spares`) and
the warm spares ready to become hot. The saving per failure is remedy.elastic's: the best way on without a hot
spare minus the hot swap.
"""

from __future__ import annotations

from dataclasses import dataclass

from remedy.elastic import Continuation, Elasticity, choose_continuation
from remedy.spares.pool import poisson_tail

NODE_MINUTES_PER_HOUR = 60.0


@dataclass(frozen=True)
class HotPoolSizing:
    target: int  # hot spares to hold
    most: int  # the configured ceiling (spares.hot_spares) and the ready warm spares, whichever is less
    saving_per_failure: float  # node-minutes a hot swap saves over the best way on without one
    failures_per_hour: float
    rows: tuple[tuple[int, float, float], ...]  # (k, benefit node-min/h, cost node-min/h)

    def explain(self) -> str:
        head = (f"hold {self.target} hot spare(s) (at most {self.most}): a hot swap saves "
                f"{self.saving_per_failure:.0f} node-min per failure, {self.failures_per_hour:.3f} failures/h")
        table = [f"  hot spare {k}: saves {b:.1f} node-min/h, costs {c:.0f}" for k, b, c in self.rows]
        return "\n".join([head, *table])


def size_hot_pool(e: Elasticity, node_mtbf_hours: float, most: int, ready_warm: int) -> HotPoolSizing:
    """The hot spares worth holding for the job `e` describes (its `hot_spares` are ignored: sized from none)."""
    ceiling = max(0, min(most, ready_warm + len(e.hot_spares)))
    without = choose_continuation(Elasticity(e.desired, e.elastic, (), e.spare_ready, e.join_minutes,
                                             e.lead_minutes, e.reload_minutes, e.restart_minutes))
    with_hot = choose_continuation(Elasticity(e.desired, e.elastic, ("hot",), e.spare_ready, e.join_minutes,
                                              e.lead_minutes, e.reload_minutes, e.restart_minutes))
    saving = max(0.0, without.costs[without.choice] - with_hot.costs[Continuation.HOT_SWAP])
    lam = e.desired / node_mtbf_hours
    refill_hours = e.join_minutes / 60.0
    rows = []
    target = 0
    for k in range(1, ceiling + 1):
        used = 1.0 if k == 1 else poisson_tail(k - 2, lam * refill_hours)  # P(X ≥ k−1) = P(X > k−2)
        benefit = lam * saving * used
        rows.append((k, benefit, NODE_MINUTES_PER_HOUR))
        if benefit < NODE_MINUTES_PER_HOUR:
            break
        target = k
    return HotPoolSizing(target, ceiling, saving, lam, tuple(rows))


__all__ = ["HotPoolSizing", "size_hot_pool"]
