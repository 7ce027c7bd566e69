"""Kubernetes Event reasons gpu-remedy leaves on Nodes, named once so `grep -rn RemedyHeld` finds every writer
and reader (an on-call engineer with only kubectl filters `kubectl get events --field-selector reason=...`).

Reasons are UpperCamelCase without spaces, as Kubernetes' own (NodeNotReady, Rebooted).
"""

from __future__ import annotations

# What the adapter did to the node (remedy/adapters/kubernetes.py, workloads.py)
CORDON = "RemedyCordon"
UNCORDON = "RemedyUncordon"
TAINT = "RemedyTaint"
LABEL = "RemedyLabel"
DRAIN = "RemedyDrain"
EVICTION_REFUSED = "RemedyEvictionRefused"
FORCE_DELETE = "RemedyForceDelete"
PREEMPT = "RemedyPreempt"
RESTART_APP = "RemedyRestartApp"
RESTART_REFUSED = "RemedyRestartRefused"
# a fenced call refused: another run holds the incident now (remedy.safety.fence)
STOOD_DOWN = "RemedyStoodDown"
KEPT_OPERATOR_CORDON = "RemedyKeptOperatorCordon"  # a person's cordon from before gpu-remedy acted, left in place

# Why a run stopped short of fixing the node (remedy.domain.outcome.node_event; tasks.cluster.note_on_node)
HELD = "RemedyHeld"
ESCALATED = "RemedyEscalated"
NO_SPARE = "RemedyNoSpare"
JOB_SHRUNK = "RemedyJobShrunk"
SPARE_DID_NOT_JOIN = "RemedySpareDidNotJoin"
FREED_NODE_DID_NOT_JOIN = "RemedyFreedNodeDidNotJoin"
SENT_TO_REPAIR = "RemedySentToRepair"
MONITOR_FAILURE = "RemedyMonitorFailure"
STOPPED_BY_OPERATOR = "RemedyStoppedByOperator"
PROPOSED_NOT_EXECUTED = "RemedyProposedNotExecuted"
WATCHED = "RemedyWatched"  # an early warning not acted on: the node works, the note says why it was left
