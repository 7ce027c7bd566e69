"""Quarantine at intake: cordon a failed node the moment its alert opens an incident, before any flow runs.

Why: a flow's cordon comes after two Prefect run starts (triage, then the replacement's gate), about 0.9 s after
the alert here; the receiver can cordon in tens of milliseconds, so nothing new is scheduled onto a GPU that just
fell off the bus while triage decides. NVSentinel's fault-quarantine module does the same. A cordon evicts nothing
and is undone by one uncordon; everything that stops work (drain, reset, reboot, replacement) stays with the flows
and their gate.

Still, a cordon is capacity an operator sees taken out, and the receiver cannot run the whole gate (it has no
fleet view and must not decide for the flows). So the receiver quarantines only when all of these hold:
- the fault is one the catalog takes the node out for (replace, reset, reboot): an application error, a warning
  or a signal triage must first measure (NotReady) never cordons at intake;
- the node is in service (active), not already cordoned (someone else's cordon stays theirs), and not in an
  open-loop pool (there an outside system says when to act);
- no breaker on the node's rack/switch/PDU/cluster is anything but closed (a correlated burst waits for a person);
- fewer than `max_nodes` nodes are quarantined by intake that no flow has taken over yet: a storm of alerts can
  never cordon more than that before a gate has looked.
The first flow that cordons the node for the same incident takes the quarantine over (the cordon's owner becomes
that run); triage releases a quarantine nobody took over when it ends (a watch, a hold, a fault that cleared).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from remedy.domain.model import NodeState
from remedy.domain.xid import RemediationPath

# Catalog paths that take the node out of service: the flows for these cordon first.
TAKES_NODE_OUT = frozenset({RemediationPath.REPLACE, RemediationPath.RESET_GPU, RemediationPath.REBOOT})

INTAKE_OWNER_PREFIX = "gpu-remedy-intake"


def intake_owner(incident_id: int) -> str:
    """Who the cordon annotation names for a quarantine at intake: the incident, so a flow of the same incident
    can take it over and no other incident's flow can."""
    return f"{INTAKE_OWNER_PREFIX}:incident-{incident_id}"


class IntakeSkip(StrEnum):
    DISABLED = "disabled"
    DRY_RUN = "dry-run"
    NOT_NODE_OUT = "not-a-node-fault"
    NOT_IN_SERVICE = "not-in-service"
    ALREADY_CORDONED = "already-cordoned"
    OPEN_LOOP = "open-loop-pool"
    BREAKER = "breaker-not-closed"
    LIMIT = "intake-limit"


@dataclass(frozen=True)
class IntakeDecision:
    quarantine: bool
    reason: str
    skip: IntakeSkip | None = None


def decide_intake(*, path: RemediationPath | str, node_state: NodeState | None, cordoned: bool, open_loop: bool,
                  scopes_not_closed: Iterable[str], quarantined_by_intake: int, max_nodes: int, dry_run: bool,
                  enabled: bool = True) -> IntakeDecision:
    """Cordon now, or leave it to triage, with the reason in plain words. Pure: the caller reads the facts. The
    limit is checked before the node's facts, so a caller at the limit need not read the node."""

    def no(skip: IntakeSkip, why: str) -> IntakeDecision:
        return IntakeDecision(False, why, skip)

    if not enabled or max_nodes <= 0:
        return no(IntakeSkip.DISABLED, "quarantine at intake is off (receiver.quarantine)")
    try:
        path = RemediationPath(path)
    except ValueError:
        return no(IntakeSkip.NOT_NODE_OUT, f"path {path!r} is not one the catalog knows: triage decides")
    if path not in TAKES_NODE_OUT:
        return no(IntakeSkip.NOT_NODE_OUT, f"the catalog's path is {path.value}: the node stays in service")
    if quarantined_by_intake >= max_nodes:
        return no(IntakeSkip.LIMIT, f"{quarantined_by_intake} node(s) already quarantined at intake and not yet "
                                    f"taken over by a remediation (limit {max_nodes})")
    if node_state is not NodeState.ACTIVE:
        state = node_state.value if node_state else "unknown"
        return no(IntakeSkip.NOT_IN_SERVICE, f"the node is {state}, not in service: triage decides")
    if cordoned:
        return no(IntakeSkip.ALREADY_CORDONED, "already cordoned: that cordon is left as it is")
    if open_loop:
        return no(IntakeSkip.OPEN_LOOP, "open-loop pool: an outside system says when to act")
    held = sorted(scopes_not_closed)
    if held:
        return no(IntakeSkip.BREAKER, f"breaker not closed on {', '.join(held)}: the gate and a person decide")
    if dry_run:
        return no(IntakeSkip.DRY_RUN, "dry-run: would cordon now")
    return IntakeDecision(True, f"cordoned at intake ({quarantined_by_intake + 1} of at most {max_nodes} awaiting "
                                f"a remediation's gate)")
