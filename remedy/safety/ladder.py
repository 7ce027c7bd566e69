"""In-place fix ladder: ordered, timed steps chosen from the XID's resolution, with replacement as the backstop.

Seed 002 §4.3.5 (Lablup): retrying the same thing without fixing anything only burns GPU-hours (one chain failed
30 times in a row), so retries back off 10 → 20 → 40 min and are capped; what to try depends on NVIDIA's
resolution for the XID (restart the job for RESTART_APP, reset the GPU for RESET_GPU, reboot for RESTART_BM) and
XID 79 (fallen off the bus) recurring means stop retrying. Seed 000 (Crusoe): node replacement is the reliable
backstop for every in-place fix.

Like medik8s' escalating remediation templates, the ladder is walked in order: a failed or timed-out attempt
falls to the next rung (the restart rung first uses its capped, backed-off retries), the same XID on the same GPU
again within the recurrence window means the last fix did not hold and also climbs a rung, and running out of
rungs is the typed result `LadderExhausted`, not an exception.

The XID → resolution table belongs to `remedy.domain.xid`; callers pass the resolution (or a `resolution_of`
callable), so this module never depends on that table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from remedy.domain.durations import hours, human_duration
from remedy.domain.xid import RemediationPath, Resolution
from remedy.safety.scopes import require_aware
from remedy.settings.safety import LadderSettings

P = RemediationPath
_IN_PLACE_THEN_REPLACE = (P.RESET_GPU, P.REBOOT, P.REPLACE)

# Rungs per NVIDIA resolution bucket. Empty = no automatic fix: a person decides.
LADDERS: dict[Resolution, tuple[RemediationPath, ...]] = {
    Resolution.RESTART_APP: (P.RESTART_APP, P.RESET_GPU, P.REBOOT, P.REPLACE),
    Resolution.RESET_GPU: _IN_PLACE_THEN_REPLACE,
    Resolution.WORKFLOW_XID_48: _IN_PLACE_THEN_REPLACE,  # double-bit ECC: reset retires the page, else reboot
    Resolution.WORKFLOW_NVLINK_ERR: _IN_PLACE_THEN_REPLACE,
    Resolution.WORKFLOW_NVLINK5_ERR: _IN_PLACE_THEN_REPLACE,
    Resolution.RESTART_BM: (P.REBOOT, P.REPLACE),
    Resolution.RESTART_VM: (P.REBOOT, P.REPLACE),
    Resolution.CONTACT_SUPPORT: (),
    Resolution.CHECK_MECHANICALS: (),
    Resolution.UNKNOWN: (),
}


class AttemptOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclass(frozen=True)
class Attempt:
    """One fix tried on this node (from the ledger). `timeout` overrides the settings' timeout for RUNNING."""

    kind: RemediationPath
    started_at: datetime
    outcome: AttemptOutcome
    xid: int | None = None
    gpu: int | None = None
    finished_at: datetime | None = None
    timeout: timedelta | None = None


@dataclass(frozen=True)
class Step:
    """What to do next: `kind` on rung `rung` (0-based), attempt `attempt` of that rung, not before `not_before`."""

    kind: RemediationPath
    rung: int
    attempt: int
    timeout: timedelta
    not_before: datetime
    reason: str


@dataclass(frozen=True)
class LadderExhausted:
    """No automatic step is left; a person decides (the flow escalates)."""

    reason: str
    tried: tuple[RemediationPath, ...] = ()
    path: RemediationPath = RemediationPath.ESCALATE


def backoff_schedule(settings: LadderSettings) -> list[timedelta]:
    """Wait before each job restart: 10, 20, 40 min with the defaults (seed 002 §4.3.5)."""
    return [
        timedelta(minutes=settings.restart_backoff_minutes * settings.restart_backoff_factor**i)
        for i in range(settings.restart_max_attempts)
    ]


def step_timeout(kind: RemediationPath, settings: LadderSettings) -> timedelta:
    minutes = {
        P.RESTART_APP: settings.restart_app_timeout_minutes,
        P.RESET_GPU: settings.reset_gpu_timeout_minutes,
        P.REBOOT: settings.reboot_timeout_minutes,
        P.REPLACE: settings.replace_timeout_minutes,
    }.get(kind)
    if minutes is None:
        raise ValueError(f"{kind.value} is not a timed fix step")
    return timedelta(minutes=minutes)


def _fault(xid: int | None, gpu: int | None) -> str:
    where = "" if gpu is None else f" on GPU {gpu}"
    return ("this fault" if xid is None else f"XID {xid}") + where


def next_step(
    history: Sequence[Attempt],
    xid: int | None,
    gpu: int | None,
    resolution: Resolution | Callable[[int], Resolution],
    now: datetime,
    settings: LadderSettings | None = None,
) -> Step | LadderExhausted:
    """The next fix for `xid` on `gpu` of one node, given that node's past attempts (any order)."""
    settings = settings or LadderSettings()
    require_aware(now, "ladder decision time")
    if callable(resolution) and not isinstance(resolution, Resolution):
        if xid is None:
            raise ValueError("a resolution_of(xid) callable needs an XID; pass the Resolution itself for non-XID faults")
        resolution = resolution(xid)
    if not isinstance(resolution, Resolution):
        raise ValueError(f"not an XID resolution: {resolution!r}")
    fault = _fault(xid, gpu)

    if resolution is Resolution.IGNORE:
        return Step(P.IGNORE, 0, 0, timedelta(0), now, f"{fault} is informational (IGNORE): record it, no action")
    ladder = LADDERS[resolution]
    if not ladder:
        return LadderExhausted(f"{fault}: NVIDIA says {resolution.value}; there is no automatic fix — a person decides")

    # The episode: earlier attempts at this same fault within the recurrence window.
    node_level = xid is not None and xid in settings.stop_retrying_xids
    since = now - timedelta(hours=settings.recurrence_window_hours)
    episode = sorted(
        (a for a in history if a.xid == xid and (node_level or a.gpu == gpu) and a.started_at >= since),
        key=lambda a: a.started_at,
    )
    for a in episode:
        if a.kind not in ladder:
            raise ValueError(
                f"attempt {a.kind.value} at {a.started_at.isoformat()} is not a step of the {resolution.value} ladder "
                f"({', '.join(k.value for k in ladder)})"
            )
    tried = tuple(a.kind for a in episode)
    window = hours(settings.recurrence_window_hours)

    if not episode:
        first = ladder[0]
        delay = backoff_schedule(settings)[0] if first is P.RESTART_APP else timedelta(0)
        reason = f"{fault} ({resolution.value}): first fix is {first.value}"
        if delay:
            reason += f" after {human_duration(delay)} back-off"
        return Step(first, 0, 1, step_timeout(first, settings), now + delay, reason)

    last = episode[-1]
    outcome, ended = last.outcome, last.finished_at
    if outcome is AttemptOutcome.RUNNING:
        deadline = last.started_at + (last.timeout or step_timeout(last.kind, settings))
        if now < deadline:
            raise ValueError(
                f"{last.kind.value} for {fault} started {last.started_at.isoformat()} is still running "
                f"(times out {deadline.isoformat()}); record its outcome first"
            )
        outcome, ended = AttemptOutcome.TIMED_OUT, deadline
    ended = ended or last.started_at + step_timeout(last.kind, settings)
    rung = ladder.index(last.kind)

    # XID 79 and friends: seen again on this node → stop retrying, replace (seed 002 §4.3.5).
    if node_level and P.REPLACE in ladder and last.kind is not P.REPLACE:
        target = ladder.index(P.REPLACE)
        if target > rung + 1 or outcome is AttemptOutcome.SUCCEEDED:
            return Step(
                P.REPLACE,
                target,
                1,
                step_timeout(P.REPLACE, settings),
                now,
                f"{fault} again on this node within {window} after {last.kind.value}: stop retrying — replace",
            )

    if outcome is AttemptOutcome.SUCCEEDED:
        nxt = rung + 1
        why = f"{fault} again within {window} after {last.kind.value} succeeded: that fix did not hold"
    else:
        verb = "timed out" if outcome is AttemptOutcome.TIMED_OUT else "failed"
        done_here = sum(1 for a in episode if a.kind is last.kind)
        cap = settings.restart_max_attempts if last.kind is P.RESTART_APP else 1
        if done_here < cap:
            delay = backoff_schedule(settings)[done_here] if last.kind is P.RESTART_APP else timedelta(0)
            return Step(
                last.kind,
                rung,
                done_here + 1,
                step_timeout(last.kind, settings),
                ended + delay,
                f"{last.kind.value} {verb} ({done_here} of {cap}); retry after {human_duration(delay)} back-off",
            )
        nxt = rung + 1
        why = f"{last.kind.value} {verb}" + (f" {done_here} times (cap {cap})" if cap > 1 else "")

    if nxt >= len(ladder):
        return LadderExhausted(f"{fault}: {why}, and no rung is left after {last.kind.value} — a person decides", tried)
    kind = ladder[nxt]
    return Step(kind, nxt, 1, step_timeout(kind, settings), max(now, ended), f"{why} — escalating to {kind.value}")
