"""The in-place runbook's decisions (fix-in-place, recover-node, escalate), Prefect-free: the flows call these and
carry out what they say. Each takes what the flow saw and returns a small typed answer."""

from __future__ import annotations

from dataclasses import dataclass

from remedy.domain.model import IncidentStatus
from remedy.domain.outcome import Outcome


@dataclass(frozen=True)
class Closing:
    """How to close an incident: its final status and the one line the ledger keeps."""

    status: IncidentStatus
    detail: str


def own_incident_closing(status: str | None, dry_run: bool, why: str = "") -> Closing | None:
    """A fix-in-place started by a person opened its own incident and nobody above it will close it: close it as
    the run ended. None when there is nothing to close (a dry run, a duplicate that never held it, an unknown
    status)."""
    try:
        outcome = Outcome(status or "")
    except ValueError:
        return None
    if dry_run or outcome is Outcome.DUPLICATE:
        return None
    detail = f"fix-in-place {outcome.label.lower()}" + (f": {why}" if why else "")
    return Closing(outcome.incident_status, detail[:2000])


# The background repair (recover-node) holds its incident while it works: its marker action says "the job already
# runs on a spare, the failed node is being repaired off the critical path", so a run that takes the incident over
# (the first one was killed) carries the repair on instead of starting a remediation again.
BACKGROUND_REPAIR_KIND = "background_repair"


def repair_closing(status: str | None, why: str = "") -> Closing:
    """The incident of a replacement whose background repair ended: resolved either way (the job runs on the spare;
    a node that did not clear is in repair, for a person), saying how the repair ended."""
    try:
        label = Outcome(status or "").label.lower()
    except ValueError:
        label = status or "ended without a status"
    return Closing(IncidentStatus.RESOLVED, f"replaced; background repair: {label}" + (f" ({why})" if why else ""))


# Below this chance of clearing the fault a reset is skipped and the node is rebooted at once.
MIN_RESET_ODDS = 0.25


def repair_steps(reset_clears: float | None) -> tuple[str, ...]:
    """The background repair's in-place fixes, shallow first (remedy.remediate.choice.Option values): a reset only
    when the fleet's recorded odds say it may clear this fault class (None: no odds, try it)."""
    from remedy.remediate.choice import Option

    if reset_clears is None or reset_clears >= MIN_RESET_ODDS:
        return (Option.RESET.value, Option.REBOOT.value)
    return (Option.REBOOT.value,)


def probe_cleared(verdict: str | None, dry_run: bool) -> bool:
    """The NVML probe after a fix says the fault is gone (a warning is not a fault)."""
    return dry_run or verdict in ("pass", "warn")


# ------------------------------------------------------------------------------------------------ fix-in-place
def needs_recheck(step: str, already_checked: bool, enabled: bool) -> bool:
    """A reset or reboot stops the job: first make sure the fault still holds and is not a failed monitor (once per
    run; a later rung follows a failed attempt, which is evidence enough). `step` is a RemediationPath value."""
    return enabled and not already_checked and step in ("reset-gpu", "reboot")


def recheck_outcome(verdict: str) -> Outcome:
    """The re-check said not to act: the fault cleared, or the monitor failed (not the GPU)."""
    return Outcome.CLEARED if verdict == "cleared" else Outcome.MONITOR_FAILURE


@dataclass(frozen=True)
class AfterStep:
    """What a finished rung's status means: the breaker hears a success, the incident is resolved, the node is
    repaired off the critical path (the job got a spare first)."""

    breaker_success: bool
    resolves: bool
    recover: bool


def after_step(status: str, step: str, dry_run: bool, recover_after: bool) -> AfterStep:
    fixed_here = status in (Outcome.FIXED, Outcome.RESTARTED)
    replaced = step == "replace" and status in (Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL)
    return AfterStep(breaker_success=(fixed_here or status == Outcome.PLANNED) and step != "replace",
                     resolves=fixed_here and not dry_run, recover=recover_after and replaced)


def took_node_out(history_steps: list[str], check_mechanicals: bool) -> bool:
    """An escalation after the ladder keeps the node quarantined when a rung took it out of work already, or when
    the fault class is not the "check the mechanicals" one (which leaves the node as it is)."""
    return any(s in ("reset-gpu", "reboot", "replace") for s in history_steps) or not check_mechanicals


# ------------------------------------------------------------------------------------------------ escalate
def keeps_quarantined(gate_acts: bool, already_out: bool) -> bool:
    """An escalated node is quarantined when the breaker gate lets a removal through, or when it is already out
    (quarantined, in repair, retired: kept so); in a storm it is left as it is (the breaker asks about the scope)."""
    return gate_acts or already_out
