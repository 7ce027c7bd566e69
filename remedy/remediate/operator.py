"""The operator's cordon wins before, during and after (issue 32, item 3): who holds a node's cordon, and what that
means for gpu-remedy. Plain Python: the tasks read the live node and pass what they saw.

gpu-remedy's own cordons carry its annotation (`remedy.io/cordoned-by`, written in the same PATCH as the cordon);
`kubectl cordon` writes none. So a node that is cordoned without the annotation was cordoned by a person (or another
tool): gpu-remedy may cordon over it (a no-op) and act, but it never lifts that cordon afterwards.
"""

from __future__ import annotations

from enum import StrEnum


class CordonOwner(StrEnum):
    NOBODY = "nobody"  # schedulable
    GPU_REMEDY = "gpu-remedy"  # cordoned with gpu-remedy's annotation (a run, or the receiver at intake)
    PERSON = "person"  # cordoned without it: `kubectl cordon`, another tool, a person's runbook


def cordon_owner(unschedulable: bool, remedy_mark: str | None) -> CordonOwner:
    """Who holds the cordon: `remedy_mark` is the node's `remedy.io/cordoned-by` annotation (None when absent)."""
    if not unschedulable:
        return CordonOwner.NOBODY
    return CordonOwner.GPU_REMEDY if remedy_mark else CordonOwner.PERSON


def may_uncordon(owner: CordonOwner) -> bool:
    """gpu-remedy lifts only its own cordon: a person's cordon stays after a fix or a cleared re-check."""
    return owner is not CordonOwner.PERSON


def keep_cordon_why(node: str) -> str:
    return (f"{node} was cordoned by a person (no gpu-remedy annotation) before gpu-remedy acted: the fix is done, "
            "the cordon stays for them to lift")
