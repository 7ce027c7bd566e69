"""May a node that has not failed yet take a ready spare? (An early warning's swap.)

A failure must be replaced; a warning is a bet (right one time in two on seed 002's report). So a warning may take a
spare only while the pool keeps, after it, what the spare cycle sizes it for: the Poisson target at the accepted
risk of running dry within one replacement lead time (`remedy.spares.pool.size_pool`), and at least one spare above
the breaker's reserve, so the next failure takes a spare without asking a person. On a small cluster whose whole
pool is at or under its target (63 nodes on 3 spares, target 4) no warning takes one; on a large pool it is the
pool's depth that decides, not its last spare. Plain Python: no Prefect import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WarnedSpare:
    allowed: bool
    left: int  # ready spares after the warning's swap
    floor: int  # the fewest it may leave
    why: str


def spare_for_warning(ready: int, target: int, reserve: int) -> WarnedSpare:
    """`ready`: spares that can be handed out now; `target`: the pool's sizing target; `reserve`: the breaker's."""
    left, floor = ready - 1, max(target, reserve + 1)
    if ready <= 0:
        return WarnedSpare(False, 0, floor, "no spare ready")
    if left >= floor:
        return WarnedSpare(True, left, floor, f"{left} spare(s) left after the swap, at least the {floor} the pool "
                                              "keeps for failures")
    return WarnedSpare(False, left, floor, f"a warned node would leave {left} spare(s), under the {floor} the pool keeps "
                                           f"for failures (sizing target {target}, reserve {reserve} + 1): the warning "
                                           "stays a warning")


__all__ = ["WarnedSpare", "spare_for_warning"]
