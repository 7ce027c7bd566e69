"""Choose a remediation by expected cost, and show the arithmetic.

For one incident the options are: restart the job in place, reset the GPU, reboot the node (each on the job's
critical path: the whole gang waits), replace the node with a warm spare (the job waits only for the spare to
join; the failed node is then reset/rebooted *off* the critical path and returns through burn-in), or hand it to a
person. Each option's expected job downtime is computed with what follows if it does not clear the fault, using
the probability that a fix of that depth clears a fault of this class: the catalog's prior until the ledger holds
enough outcomes of its own (`estimate_odds`). The cheapest downtime wins; an option within `tolerance_minutes` of
it that spends fewer spares wins instead (hardware is the second cost).

One function decides for the flows and for the simulator's gpu-remedy policy (`remedy.goodput.gpu_remedy_policy`).
Plain Python: no Prefect, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

from remedy.domain.xid import RemediationPath, Resolution


class Option(StrEnum):
    RESTART = "restart-in-place"
    RESET = "reset-gpu"
    REBOOT = "reboot"
    REPLACE = "replace"
    ESCALATE = "escalate"


# In-place fixes in order of depth: a deeper fix clears whatever a shallower one clears.
DEPTHS: tuple[Option, ...] = (Option.RESTART, Option.RESET, Option.REBOOT)


@dataclass(frozen=True)
class FixOdds:
    """Probability that a fix of each depth clears a fault of one class (cumulative: restart ≤ reset ≤ reboot)."""

    restart: float
    reset: float
    reboot: float
    samples: int = 0  # outcomes from the ledger behind these numbers (0: the prior alone)

    def __post_init__(self) -> None:
        for name in ("restart", "reset", "reboot"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} odds must be in [0, 1], got {v}")
        if not self.restart <= self.reset <= self.reboot:
            raise ValueError(f"odds must not fall with depth: {self.restart} ≤ {self.reset} ≤ {self.reboot}")

    def clears(self, option: Option) -> float:
        return {Option.RESTART: self.restart, Option.RESET: self.reset, Option.REBOOT: self.reboot}.get(option, 0.0)


# Priors by NVIDIA resolution bucket. No source publishes per-bucket fix rates, so these are assumptions, set from
# what the bucket names say (RESTART_APP: the application, not the GPU; RESET_GPU: a reset is the documented fix;
# RESTART_BM: only a power cycle) and anchored on the one measured number: seed 002 §4.3.2, 4 of 12 automatic
# restart chains recovered (33 %) over that cluster's mix. The ledger's own outcomes replace them (estimate_odds).
PRIORS: dict[Resolution, FixOdds] = {
    Resolution.IGNORE: FixOdds(0.95, 0.97, 0.98),
    Resolution.RESTART_APP: FixOdds(0.85, 0.92, 0.95),
    Resolution.RESET_GPU: FixOdds(0.15, 0.70, 0.85),
    Resolution.RESTART_BM: FixOdds(0.05, 0.20, 0.60),
    Resolution.RESTART_VM: FixOdds(0.05, 0.20, 0.60),
    Resolution.WORKFLOW_XID_48: FixOdds(0.10, 0.60, 0.80),
    Resolution.WORKFLOW_NVLINK_ERR: FixOdds(0.10, 0.60, 0.80),
    Resolution.WORKFLOW_NVLINK5_ERR: FixOdds(0.10, 0.60, 0.80),
    Resolution.CONTACT_SUPPORT: FixOdds(0.10, 0.30, 0.50),
    Resolution.CHECK_MECHANICALS: FixOdds(0.0, 0.0, 0.10),
    Resolution.UNKNOWN: FixOdds(0.10, 0.30, 0.50),
}
PRIOR_WEIGHT = 10.0  # the prior counts as this many observed outcomes


def estimate_odds(prior: FixOdds, outcomes: Iterable[tuple[Option, bool]], prior_weight: float = PRIOR_WEIGHT) -> FixOdds:
    """The prior, updated by observed outcomes `(depth tried, cleared?)` of this fault class (Beta smoothing per
    depth), kept monotone in depth. With no outcomes it is the prior."""
    tried = {d: 0 for d in DEPTHS}
    cleared = {d: 0 for d in DEPTHS}
    n = 0
    for option, ok in outcomes:
        if option in tried:
            tried[option] += 1
            cleared[option] += bool(ok)
            n += 1
    if not n:
        return prior
    est, floor = {}, 0.0
    for d in DEPTHS:
        p = (cleared[d] + prior_weight * prior.clears(d)) / (tried[d] + prior_weight)
        floor = max(floor, p)  # a deeper fix never clears less than a shallower one
        est[d] = floor
    return FixOdds(est[Option.RESTART], est[Option.RESET], est[Option.REBOOT], samples=n)


# Faults without an XID: NotReady is a node that needs a reboot unless it comes back by itself (triage's rule,
# remedy.detect.signals); fail-slow and application errors get the RESTART_APP ladder (assumption).
SIGNAL_RESOLUTION: dict[str, Resolution] = {"node-not-ready": Resolution.RESTART_BM, "fail-slow": Resolution.RESTART_APP,
                                            "app-error": Resolution.RESTART_APP}


# How a ladder attempt is recorded in the ledger (fix-in-place's `fix_<step>` actions) → the option it tried.
ATTEMPT_OPTIONS = {"fix_restart-app": Option.RESTART, "fix_reset-gpu": Option.RESET, "fix_reboot": Option.REBOOT}


def odds_for(resolution: Resolution, attempts: Iterable[tuple[str, Resolution, bool]]) -> FixOdds:
    """The odds for a fault class: its prior, updated by the ledger's finished attempts `(action kind, the attempted
    fault's resolution bucket, cleared?)` of the same class."""
    outcomes = [(ATTEMPT_OPTIONS[kind], ok) for kind, res, ok in attempts
                if res is resolution and kind in ATTEMPT_OPTIONS]
    return estimate_odds(PRIORS.get(resolution, PRIORS[Resolution.UNKNOWN]), outcomes)


@dataclass(frozen=True)
class Durations:
    """Minutes each step keeps the job down. Defaults: seed 000's automated replacement (30 s detect, 30 s grace,
    4-min spare join); reset and reboot are assumptions bounded by the ladder's timeouts (10 and 30 min)."""

    detect: float = 0.5
    grace: float = 0.5
    join: float = 4.0
    reset: float = 5.0
    reboot: float = 15.0
    reload: float = 0.0  # checkpoint reload before training resumes (seed 002 §4.2.3: median 31 min)
    escalate: float = 60.0  # a person's runbook (seed 000: ~60 min)
    approval: float = 32.5  # a person answers a hold (seed 000's page 5–30 + triage 10–20 min, midpoints)
    not_ready_grace: float = 5.0  # an unreachable node gets this long to come back (Kubernetes' default 300 s)


@dataclass(frozen=True)
class Situation:
    """What is known when choosing: the fault's class, its odds, what was already tried, whether a spare is ready."""

    resolution: Resolution
    odds: FixOdds
    spare_ready: bool
    durations: Durations = field(default_factory=Durations)
    tried_depth: int = -1  # index into DEPTHS of the deepest in-place fix that already failed on this incident
    unreachable: bool = False  # the node is NotReady: "restart in place" means waiting for it to come back
    spare_needs_approval: bool = False  # only the spare reserve is left: taking it waits for a person's yes
    tolerance_minutes: float = 1.0


@dataclass(frozen=True)
class Cost:
    option: Option
    downtime_minutes: float  # expected job downtime, including what follows if this does not clear the fault
    spares: float  # expected warm spares taken
    clears: float  # probability this option clears the fault by itself
    then: Option | None  # what follows when it does not
    arithmetic: str

    def to_dict(self) -> dict:
        return {"option": self.option.value, "downtime_minutes": round(self.downtime_minutes, 2),
                "spares": round(self.spares, 3), "clears": round(self.clears, 3),
                "then": self.then.value if self.then else None, "arithmetic": self.arithmetic}


@dataclass(frozen=True)
class Choice:
    option: Option
    costs: tuple[Cost, ...]
    reason: str

    @property
    def chosen(self) -> Cost:
        return next(c for c in self.costs if c.option is self.option)

    def to_dict(self) -> dict:
        return {"option": self.option.value, "reason": self.reason, "options": [c.to_dict() for c in self.costs]}

    def markdown(self) -> str:
        rows = ["| option | expected job downtime | spares | clears alone | if not | arithmetic |",
                "|---|---|---|---|---|---|"]
        for c in self.costs:
            mark = "**" if c.option is self.option else ""
            rows.append(f"| {mark}{c.option.value}{mark} | {c.downtime_minutes:.1f} min | {c.spares:.2f} | "
                        f"{c.clears:.0%} | {c.then.value if c.then else '-'} | {c.arithmetic} |")
        return "\n".join([f"**Chosen: {self.option.value}** — {self.reason}", "", *rows])


def _conditional(odds: FixOdds, option: Option, tried_depth: int) -> float:
    """P(option clears | every fix up to `tried_depth` did not)."""
    before = odds.clears(DEPTHS[tried_depth]) if tried_depth >= 0 else 0.0
    if before >= 1.0:
        return 1.0
    return max(0.0, (odds.clears(option) - before) / (1.0 - before))


def _options(s: Situation) -> list[Cost]:
    d = s.durations
    out: list[Cost] = []
    for depth, option in enumerate(DEPTHS):
        if depth <= s.tried_depth:
            continue
        q = _conditional(s.odds, option, s.tried_depth)
        nxt = _best(replace(s, tried_depth=depth))
        if option is Option.RESTART and s.unreachable:
            # wait for the node to come back (about half the grace when it does), else the whole grace is lost
            g = d.not_ready_grace
            down = q * (g / 2 + d.reload) + (1 - q) * (g + nxt.downtime_minutes)
            how = (f"{q:.0%} × (back in ~{g / 2:g} + reload {d.reload:g}) + {1 - q:.0%} × (grace {g:g} + "
                   f"{nxt.option.value} {nxt.downtime_minutes:.1f})")
        elif option is Option.RESTART:
            # the job restarts on the same nodes: it reloads either way; a fault that remains kills it again
            fail = d.detect + nxt.downtime_minutes
            down = d.reload + (1 - q) * fail
            how = f"reload {d.reload:g} + {1 - q:.0%} × (detect {d.detect:g} + {nxt.option.value} {nxt.downtime_minutes:.1f})"
        else:
            step = d.reset if option is Option.RESET else d.reboot
            # drained, fixed and verified before the job restarts: a failed verify goes straight to the next step
            down = d.grace + step + q * d.reload + (1 - q) * nxt.downtime_minutes
            how = (f"drain {d.grace:g} + {option.value} {step:g} + {q:.0%} × reload {d.reload:g} + {1 - q:.0%} × "
                   f"{nxt.option.value} {nxt.downtime_minutes:.1f}")
        out.append(Cost(option, down, (1 - q) * nxt.spares, q, nxt.option, how))
    if s.spare_ready:
        wait = d.approval if s.spare_needs_approval else 0.0
        down = wait + d.grace + d.join + d.reload
        how = f"drain {d.grace:g} + spare joins {d.join:g} + reload {d.reload:g}"
        out.append(Cost(Option.REPLACE, down, 1.0, 1.0, None,
                        f"a person approves spending the reserve {wait:g} + {how}" if wait else how))
    out.append(Cost(Option.ESCALATE, d.escalate + d.reload, 0.0, 1.0, None,
                    f"a person {d.escalate:g} + reload {d.reload:g}"))
    return out


def _pick(costs: list[Cost], tolerance: float) -> Cost:
    fastest = min(costs, key=lambda c: c.downtime_minutes)
    near = [c for c in costs if c.downtime_minutes <= fastest.downtime_minutes + tolerance]
    return min(near, key=lambda c: (c.spares, c.downtime_minutes))


@lru_cache(maxsize=4096)
def _best(s: Situation) -> Cost:
    return _pick(_options(s), s.tolerance_minutes)


def choose(s: Situation) -> Choice:
    """The option with the least expected job downtime (fewer spares within the tolerance), with every option's
    numbers so the run can show its arithmetic."""
    costs = _options(s)
    best = _pick(costs, s.tolerance_minutes)
    fastest = min(costs, key=lambda c: c.downtime_minutes)
    if best is fastest:
        why = f"least expected job downtime ({best.downtime_minutes:.1f} min)"
    else:
        why = (f"within {s.tolerance_minutes:g} min of the fastest ({fastest.option.value}, "
               f"{fastest.downtime_minutes:.1f} min) and spends fewer spares")
    source = f"odds from {s.odds.samples} recorded outcomes + prior" if s.odds.samples else "catalog prior odds"
    if not s.spare_ready:
        why += "; no spare ready"
    elif s.spare_needs_approval:
        why += "; only the spare reserve is left"
    return Choice(best.option, tuple(costs), f"{why}; {source}")


# ---- after a rung failed in the flows ---------------------------------------------------------------------

PATHS: dict[Option, RemediationPath] = {Option.RESTART: RemediationPath.RESTART_APP, Option.RESET: RemediationPath.RESET_GPU,
                                        Option.REBOOT: RemediationPath.REBOOT, Option.REPLACE: RemediationPath.REPLACE}


def tried_depth(paths: Iterable[RemediationPath]) -> int:
    """Index into DEPTHS of the deepest in-place fix among `paths` (attempts that failed or did not hold); -1: none."""
    depths = [DEPTHS.index(o) for o, p in PATHS.items() if o in DEPTHS and p in set(paths)]
    return max(depths, default=-1)


def after_failed_rung(ladder: tuple[RemediationPath, ...], ladder_next: RemediationPath,
                      chosen: Option) -> RemediationPath:
    """The step after a rung failed (or did not hold): the ladder's next step or the expected-cost choice, whichever
    is deeper on the ladder. The choice may skip rungs — a reset after a restart the job could not come back from,
    the spare when one is ready and cheaper — but never go back to a shallower one; an escalation keeps the
    ladder's step (the ladder escalates by itself when it runs out)."""
    path = PATHS.get(chosen)
    if path is None or path not in ladder or ladder_next not in ladder:
        return ladder_next
    return path if ladder.index(path) > ladder.index(ladder_next) else ladder_next


# ---- acting on an early warning ---------------------------------------------------------------------------


class WarningAction(StrEnum):
    CHECKPOINT_NOW = "checkpoint-now-and-swap"
    AT_NEXT_CHECKPOINT = "swap-at-next-checkpoint"
    WAIT = "wait-for-failure"


@dataclass(frozen=True)
class WarningChoice:
    action: WarningAction
    act_cost_minutes: float
    wait_cost_minutes: float
    arithmetic: str

    @property
    def acts(self) -> bool:
        return self.action is not WarningAction.WAIT

    def markdown(self) -> str:
        """The two options with their expected job minutes lost, and the choice (the triage artifact)."""
        act = "not possible" if math.isinf(self.act_cost_minutes) else f"{self.act_cost_minutes:.1f} min"
        chosen = "wait for the failure" if not self.acts else (
            "ask for a checkpoint now and swap the node at it" if self.action is WarningAction.CHECKPOINT_NOW
            else "swap the node at the job's next checkpoint")
        return "\n".join([
            "| option | expected job minutes lost |", "|---|---|",
            f"| swap at a checkpoint boundary | {act} |",
            f"| wait for the failure | {self.wait_cost_minutes:.1f} min |", "",
            f"**Chosen: {chosen}.** {self.arithmetic}"])


def choose_on_warning(*, precision: float, lead_minutes: float, minutes_to_next_checkpoint: float,
                      checkpoint_interval_minutes: float, checkpoint_cost_minutes: float, spare_ready: bool,
                      durations: Durations = Durations(), job_mtbf_minutes: float = math.inf) -> WarningChoice:
    """A detector warns that a node will fail within `lead_minutes` (right with probability `precision`).

    Acting swaps the node at a checkpoint boundary: no work is rolled back, the job pays one swap (drain, join,
    reload) and, when the next scheduled checkpoint comes too late, one extra checkpoint. Waiting pays, with
    probability `precision`, the failure: on average half an interval of work rolled back, detection and the same
    swap — but only if the job is still running when it comes: with the job failing every `job_mtbf_minutes`
    (any node), it stops first with probability 1 − exp(−lead / MTBF), and the node is then swapped while the job
    is down anyway (no stop of its own). That last part is the simulator's model (remedy.goodput.sim draws the
    failure afresh when the job restarts); the flows do not yet swap a watched node during another stop, which is why
    `lemon.early_warning.job_mtbf_hours` is unset by default there and the warned failure is counted in full. The
    cheaper one wins; with no spare ready the node is left until it fails or a spare frees."""
    swap = durations.grace + durations.join + durations.reload
    runs_until = math.exp(-lead_minutes / job_mtbf_minutes) if job_mtbf_minutes > 0 else 0.0
    lose = precision * runs_until * (checkpoint_interval_minutes / 2 + durations.detect + swap)
    if not spare_ready:
        return WarningChoice(WarningAction.WAIT, float("inf"), lose, "no spare ready: nothing to swap in")
    if minutes_to_next_checkpoint < lead_minutes:
        act, action = swap, WarningAction.AT_NEXT_CHECKPOINT
        how = f"swap {swap:g} min at the checkpoint due in {minutes_to_next_checkpoint:.1f} min"
    else:
        act, action = checkpoint_cost_minutes + swap, WarningAction.CHECKPOINT_NOW
        how = f"extra checkpoint {checkpoint_cost_minutes:g} min + swap {swap:g} min"
    still = f"{runs_until:.0%} still running × " if runs_until < 1.0 else ""
    how += (f" vs {precision:.0%} × {still}(rollback {checkpoint_interval_minutes / 2:g} min + detect "
            f"{durations.detect:g} min + swap {swap:g} min)")
    if act < lose:
        return WarningChoice(action, act, lose, how)
    return WarningChoice(WarningAction.WAIT, act, lose, how)
