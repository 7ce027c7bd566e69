"""A tripped rack, switch or PDU breaker holds its nodes, not the job.

A correlated failure (a PDU or leaf switch dropping a rack) is what a domain breaker catches: automation must not
reset, reboot, repair or retire nodes in the tripped scope until a person has looked. But the training job on those
nodes is down either way, and the warm pool is kept topologically diverse precisely so that a rack event can be
absorbed by spares elsewhere (seed 000: spares need topological diversity). So while a rack/switch/PDU scope is
held, the job may still move to a ready spare *outside* that scope, within the spare reserve; the held node stays
quarantined and untouched until the review. The cluster-wide breaker (a fleet-wide cause: a bad driver push, a
monitoring failure) and the capacity budget stop everything, swaps included.
"""

from __future__ import annotations

from dataclasses import dataclass

from remedy.safety.scopes import Skip, SkipReason

SWAPPABLE_HOLDS = frozenset({SkipReason.BREAKER_TRIPPED, SkipReason.BREAKER_OPEN, SkipReason.PROBE_IN_FLIGHT})


@dataclass(frozen=True)
class HeldSwap:
    allowed: bool
    why: str


def may_swap_while_held(skip: Skip, *, ready_spares_outside: int, spare_reserve: int) -> HeldSwap:
    """May the job move to a spare outside the held scope while the node waits for a person?"""
    if skip.reason not in SWAPPABLE_HOLDS:
        return HeldSwap(False, f"{skip.reason.value} stops every action, swaps included")
    if not skip.scope or skip.scope.startswith("cluster:"):
        return HeldSwap(False, "the cluster-wide breaker stops every action, swaps included")
    if ready_spares_outside - 1 < spare_reserve:
        return HeldSwap(False, f"{ready_spares_outside} ready spare(s) outside {skip.scope} and the reserve is "
                               f"{spare_reserve}: a person decides")
    return HeldSwap(True, f"{skip.scope} is held for a person; the job moves to a spare outside it and the node "
                          "is left untouched until the review")
