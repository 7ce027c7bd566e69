"""NVIDIA XID catalog: what each XID means and what gpu-remedy does about it.

(The table is being filled in; the enums below are the stable interface other modules use.)
"""

from __future__ import annotations

from enum import StrEnum


class Resolution(StrEnum):
    """NVIDIA's published resolution buckets (the XID catalog's 'immediate action')."""

    IGNORE = "IGNORE"
    RESTART_APP = "RESTART_APP"
    RESET_GPU = "RESET_GPU"
    RESTART_BM = "RESTART_BM"
    RESTART_VM = "RESTART_VM"
    CONTACT_SUPPORT = "CONTACT_SUPPORT"
    WORKFLOW_XID_48 = "WORKFLOW_XID_48"
    WORKFLOW_NVLINK_ERR = "WORKFLOW_NVLINK_ERR"
    WORKFLOW_NVLINK5_ERR = "WORKFLOW_NVLINK5_ERR"
    CHECK_MECHANICALS = "CHECK_MECHANICALS"
    UNKNOWN = "UNKNOWN"


class RemediationPath(StrEnum):
    """What gpu-remedy's triage starts for a fault."""

    IGNORE = "ignore"  # informational; recorded, no action
    RESTART_APP = "restart-app"  # restart the job's pods, node stays in
    RESET_GPU = "reset-gpu"  # drain, nvidia-smi -r, verify, uncordon
    REBOOT = "reboot"  # drain, reboot, wait Ready, verify, uncordon
    REPLACE = "replace"  # swap in a warm spare, node to repair
    ISOLATE = "isolate"  # bisection fault isolation over a pool
    ESCALATE = "escalate"  # a human decides (unknown XID, CONTACT_SUPPORT, breaker open)
    WATCH = "watch"  # warning-level: drain at next checkpoint / keep observing
