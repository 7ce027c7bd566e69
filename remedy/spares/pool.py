"""How many warm spares the fleet needs, and whether they are spread across failure domains.

Sizing (seed 000: "with too few spares, a burst of failures exhausts your pool"): a consumed spare comes back
only after the replacement lead time (repair / RMA / new node). Failures during one lead time are modelled as
Poisson with λ = nodes × lead_time / node_MTBF (or lead_time / fleet_MTBF); the target pool is the smallest k with
P(N > k) ≤ the accepted risk. Seed 000's figures: an 8-GPU node fails every ≈ 47 days; 1,024 GPUs ≈ every 8 h.

Diversity (seed 000: "if all your spares are in one rack and that rack loses power, your backup capacity is gone
exactly when you need it"): warn when one rack, switch or PDU holds more than the configured share of the spares.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from remedy.domain.durations import hours
from remedy.domain.model import Node
from remedy.settings.safety import SpareSettings

DOMAINS = ("rack", "switch", "pdu")


def poisson_pmf(k: int, lam: float) -> float:
    if k < 0:
        return 0.0
    if lam == 0:
        return 1.0 if k == 0 else 0.0
    return math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1))


def poisson_tail(k: int, lam: float) -> float:
    """P(N > k) for N ~ Poisson(lam), summed directly (no 1 − CDF cancellation for small tails)."""
    if lam < 0:
        raise ValueError(f"Poisson rate must be >= 0, got {lam}")
    if k < 0:
        return 1.0
    terms = []
    j = k + 1
    while True:
        p = poisson_pmf(j, lam)
        terms.append(p)
        if j > lam and (p == 0.0 or p < 1e-17 * math.fsum(terms)):
            break
        j += 1
    return min(1.0, math.fsum(terms))


def spares_needed(lam: float, risk: float) -> int:
    """Smallest k with P(N > k) ≤ risk."""
    if not 0 < risk < 1:
        raise ValueError(f"risk must be between 0 and 1, got {risk}")
    if lam == 0:
        return 0
    # One pass: pmf far past the mean, then tails summed from the small end (accurate, O(n)).
    upper = math.ceil(lam + 12 * math.sqrt(lam) + 30)
    pmf = [poisson_pmf(j, lam) for j in range(upper + 1)]
    tail, tails = 0.0, [0.0] * (upper + 1)
    for j in range(upper, -1, -1):
        tails[j] = tail  # P(N > j), ignoring mass beyond `upper` (< 1e-30)
        tail += pmf[j]
    return next(k for k in range(upper + 1) if tails[k] <= risk)


@dataclass(frozen=True)
class PoolSizing:
    nodes: int
    lead_time_hours: float
    fleet_mtbf_hours: float
    lam: float  # expected failures during one lead time
    risk: float
    target: int
    ready: int
    shortfall: int
    risk_at_ready: float  # P(more failures than ready spares during one lead time)

    def explain(self) -> str:
        head = (
            f"{self.nodes} nodes, fleet MTBF {hours(self.fleet_mtbf_hours)}, lead time {hours(self.lead_time_hours)} → "
            f"λ = {self.lam:.2f} failures per lead time; {self.target} spares keep P(run out) ≤ {self.risk:g}"
        )
        if self.shortfall:
            return head + f"; only {self.ready} ready: short by {self.shortfall} (P(run out) = {self.risk_at_ready:.3f})"
        return head + f"; {self.ready} ready: enough (P(run out) = {self.risk_at_ready:.2g})"


def size_pool(
    nodes: int,
    ready: int,
    settings: SpareSettings | None = None,
    *,
    node_mtbf_hours: float | None = None,
    fleet_mtbf_hours: float | None = None,
    lead_time_hours: float | None = None,
    risk: float | None = None,
) -> PoolSizing:
    """Target pool size and shortfall. Give a fleet MTBF or a per-node one (default: settings, seed 000's 47 d)."""
    settings = settings or SpareSettings()
    if nodes < 0 or ready < 0:
        raise ValueError(f"node and spare counts must be >= 0, got nodes={nodes}, ready={ready}")
    if node_mtbf_hours is not None and fleet_mtbf_hours is not None:
        raise ValueError("give node_mtbf_hours or fleet_mtbf_hours, not both")
    lead = settings.replacement_lead_time_hours if lead_time_hours is None else lead_time_hours
    risk = settings.sizing_risk if risk is None else risk
    for name, v in (("lead_time_hours", lead), ("node_mtbf_hours", node_mtbf_hours), ("fleet_mtbf_hours", fleet_mtbf_hours)):
        if v is not None and v <= 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if fleet_mtbf_hours is None:
        per_node = settings.node_mtbf_hours if node_mtbf_hours is None else node_mtbf_hours
        fleet_mtbf = per_node / nodes if nodes else math.inf
    else:
        fleet_mtbf = fleet_mtbf_hours
    lam = 0.0 if math.isinf(fleet_mtbf) else lead / fleet_mtbf
    target = spares_needed(lam, risk)
    return PoolSizing(
        nodes, lead, fleet_mtbf, lam, risk, target, ready, max(0, target - ready), poisson_tail(ready, lam)
    )


@dataclass(frozen=True)
class DiversityWarning:
    domain: str  # rack, switch or pdu
    name: str  # "" when the spares carry no label for the domain
    count: int
    total: int
    message: str


def check_diversity(spares: Sequence[Node], settings: SpareSettings | None = None) -> list[DiversityWarning]:
    """Warnings when one failure domain holds too many of the ready spares (or cannot be told)."""
    settings = settings or SpareSettings()
    total = len(spares)
    out: list[DiversityWarning] = []
    if total == 0:
        return out
    for domain in DOMAINS:
        values = [getattr(s.topology, domain) for s in spares]
        unknown = sorted(s.name for s, v in zip(spares, values) if not v)
        if unknown:
            out.append(
                DiversityWarning(
                    domain, "", len(unknown), total, f"{len(unknown)} of {total} spares have no {domain} label "
                    f"({', '.join(unknown)}): their {domain} diversity cannot be checked"
                )
            )
        counts = Counter(v for v in values if v)
        for name, count in sorted(counts.items()):
            if total >= 2 and count == total:
                msg = (
                    f"all {total} spares are in {domain} {name}: one {domain} failure takes the whole pool "
                    "— move some elsewhere"
                )
            elif count / total > settings.max_share_per_domain and total >= 2:
                msg = (
                    f"{count} of {total} spares are in {domain} {name}, more than "
                    f"{settings.max_share_per_domain:.0%}: one {domain} failure would take most of the pool"
                )
            else:
                continue
            out.append(DiversityWarning(domain, name, count, total, msg))
    return out
