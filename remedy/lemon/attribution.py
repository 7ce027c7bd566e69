"""Which incidents count against a node's hardware: the lemon score's evidence rules.

A lemon is hardware that keeps failing for reasons of its own (seed 000). A busy node sees more application errors
because it runs more jobs, a node next to a failing one sees its jobs crash, and an alert re-sent every
`repeat_interval` is one fault, not several: none of that says anything about the node. So an incident counts only
when it is a node-attributable failure: a node-level XID, a hardware signal, or a failed health check. Every rule
that leaves an incident out returns the reason, which the verdict shows beside the evidence.

The XID classes are the catalog's (`remedy.domain.xid`): node-level means its class says the GPU or the node itself
needs fixing (`unsafe_to_run`), with the driver's own text deciding where the catalog says it does (XID 154's
recovery action, NVLink5's Fatal/Nonfatal subcode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from remedy.detect.signals import SignalKind
from remedy.domain.model import IncidentStatus
from remedy.domain.xid import (
    NVLINK5_XIDS,
    RemediationPath,
    Resolution,
    lookup,
    nvlink5_subcode_path,
    recovery_action_path,
    unsafe_to_run,
)
from remedy.lemon.records import IncidentRecord, ValidationRecord

# A failed health check (burn-in suite, spare cycling, post-fix verify) as a failure of its own.
HEALTH_CHECK = "health-check"

# A straggler: slower than its peers in the same job (remedy.warn.stragglers), so the slowness is the node's.
FAIL_SLOW = "fail-slow"

# Signals that are about the node's own hardware: memory rows, clocks held down by the GPU, links, the NVSwitch,
# the node going NotReady or running slow. (Shared events, e.g. a rack losing power, are set aside by time.)
HARDWARE_SIGNALS: frozenset[str] = frozenset({
    SignalKind.ROW_REMAP_FAILURE, SignalKind.ROW_REMAP_PENDING, SignalKind.UNCORRECTABLE_REMAP,
    SignalKind.HW_SLOWDOWN, SignalKind.THERMAL_THROTTLE, SignalKind.POWER_BRAKE, SignalKind.PCIE_DEGRADED,
    SignalKind.NVLINK_ERROR, SignalKind.IB_PORT_DOWN, SignalKind.IB_DOWNTIME, SignalKind.SXID,
    SignalKind.NODE_NOT_READY, HEALTH_CHECK, FAIL_SLOW,
})

# Job symptoms: every node of a job sees them when one node (or the code) fails; they name no culprit (seed 001).
JOB_SYMPTOMS: frozenset[str] = frozenset({SignalKind.NCCL_TIMEOUT, SignalKind.LOSS_NAN})

# The ledger's closing statuses that blame nothing on the node: triage found nothing to act on (watch, ignore, an
# application error), or the incident repeated one already being handled (closed as a duplicate).
CLOSED_WITHOUT_BLAME: frozenset[str] = frozenset({IncidentStatus.IGNORED.value})

RESENT = "a re-send of an alert already counted (same alert, same startsAt)"


def xid_path(i: IncidentRecord) -> RemediationPath | None:
    """The path the driver's own text names, where the catalog says the text decides (XID 154, NVLink5)."""
    if not i.raw or i.xid is None:
        return None
    if i.xid == 154:
        return recovery_action_path(i.raw)
    if i.xid in NVLINK5_XIDS:
        return nvlink5_subcode_path(i.raw)
    return None


def why_not_counted(i: IncidentRecord) -> str | None:
    """None when the incident is a node-attributable failure; otherwise the reason it does not count."""
    # The job's fault by the ledger's own record (isolation's "code" verdict, an operator's note): the same job
    # would fail on any node.
    if i.cause == "job":
        return "caused by the job (user code or data), not the node"
    # Closed without blame: counting it would re-count a fault already counted, or count what triage chose to ignore.
    if i.status in CLOSED_WITHOUT_BLAME:
        return "closed as ignored or duplicate"
    if i.signal == SignalKind.XID:
        if i.xid is None:
            return "XID without a code: names no hardware fault"
        try:
            entry = lookup(i.xid)
        except ValueError:
            return f"XID {i.xid} is not a valid XID"
        path = xid_path(i)
        if path is not None:
            # The driver said what it needs: a reset/reboot is the node's; "none"/non-fatal is not.
            return None if unsafe_to_run(None, path) else f"XID {i.xid}: the driver's message says {path.value}"
        if unsafe_to_run(i.xid):
            return None
        if entry.resolution is Resolution.RESTART_APP:
            # NVIDIA's catalog: the application's error; a busy node has more of them only because it runs more jobs.
            return f"application error (NVIDIA: {entry.catalog_bucket})"
        if entry.resolution is Resolution.IGNORE:
            # Informational, or it explains another XID that is counted in its own right (171/172 → 48).
            return f"informational XID {i.xid} (NVIDIA: {entry.catalog_bucket})"
        # CONTACT_SUPPORT, notices, unknown codes: a person decides; the class does not say the GPU needs fixing.
        return f"XID {i.xid}: NVIDIA's class ({entry.catalog_bucket or 'unknown'}) does not say the GPU needs fixing"
    if i.signal in HARDWARE_SIGNALS:
        return None
    if i.signal in JOB_SYMPTOMS:
        return "job symptom that names no node (isolation finds the culprit)"
    if i.signal == SignalKind.CORRECTABLE_REMAP:
        return "correctable remaps are a trend for early warning, not a failure"
    return f"signal {i.signal!r} says nothing about the node's hardware"


def failed_checks(validations: Iterable[ValidationRecord], counted: Sequence[IncidentRecord],
                  confirms: timedelta) -> list[IncidentRecord]:
    """Failed health checks as failures of their own, except a check that confirms a counted incident shortly
    before it (the post-fix verify of that same fault): one fault is one failure."""
    times = sorted(i.time for i in counted)
    out = []
    for v in validations:
        if v.passed:
            continue
        if any(v.time - confirms <= t <= v.time for t in times):
            continue
        out.append(IncidentRecord(v.time, HEALTH_CHECK, ref=v.ref, raw=v.check))
    return out


@dataclass(frozen=True)
class CountingRule:
    """How scoring turns a node's history into the failures it counts. `NODE_ATTRIBUTABLE` is the rule; the bench
    builds the old one (every incident the ledger did not ignore, by node name only) to compare against."""

    name: str
    attribute: Callable[[IncidentRecord], str | None]
    dedupe_occurrences: bool = True  # one alert occurrence is one failure, however often it was delivered
    count_failed_checks: bool = True
    follow_gpus: bool = True  # history follows the GPU's serial/UUID as well as the node name


NODE_ATTRIBUTABLE = CountingRule("node-attributable failures", why_not_counted)

# What the lemon review did before issue 14: every incident the ledger had not closed as ignored, by node name. Kept
# only as the baseline that bench/lemons.py and the tests measure the rule against.
EVERY_INCIDENT = CountingRule(
    "every incident", lambda i: "closed as ignored" if i.status in CLOSED_WITHOUT_BLAME else None,
    dedupe_occurrences=False, count_failed_checks=False, follow_gpus=False,
)
